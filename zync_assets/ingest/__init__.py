"""Ingest: Kafka topic-partitions → a raw pool (Delta), exactly once, with dead letters."""
