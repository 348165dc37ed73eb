"""The invoice demo (zync's), as Debezium-shaped Avro events in four batches."""
