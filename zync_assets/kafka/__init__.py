"""Kafka and schema-registry access shared by every stage: clients, codecs, topic tools."""
