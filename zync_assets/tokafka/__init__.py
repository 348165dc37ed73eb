"""to-kafka: staging pool output records → Kafka topics for a JDBC sink."""
