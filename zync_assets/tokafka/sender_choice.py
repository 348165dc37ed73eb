"""Which sender a to-kafka run uses (the protocol they share is in sender.py)."""

from __future__ import annotations

from pyspark.sql import SparkSession

from zync_assets.core.settings import KafkaSettings
from zync_assets.tokafka.jvm_sender import JvmSender
from zync_assets.tokafka.librdkafka_sender import LibrdkafkaSender
from zync_assets.tokafka.sender import Sender


def open_sender(spark: SparkSession, kafka: KafkaSettings, pool: str, topic: str | None) -> Sender:
    """A sender that has fenced its predecessors: in the driver JVM when there is one
    (a classic SparkSession), else through librdkafka (Spark Connect). `topic` None: one
    for all the pool's topics (together.py)."""
    if getattr(spark, "_jvm", None) is not None:
        return JvmSender(spark, kafka, pool, topic)
    return LibrdkafkaSender(kafka, pool, topic)
