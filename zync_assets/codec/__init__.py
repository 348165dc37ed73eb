"""Avro in Confluent wire format, and its JSON rendering for humans and JSON-lines tools."""
