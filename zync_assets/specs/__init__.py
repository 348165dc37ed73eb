"""The user's contract: spec files read and checked (routes, rules, lake tables); no Spark, no Kafka."""
