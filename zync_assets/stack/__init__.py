"""The local stack: Kafka (KRaft) and the schema registry as loopback processes under `.zync/`."""
