"""Spark's Kafka source, configured from `KafkaSettings` to read exact offset ranges."""

from __future__ import annotations

import json

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from zync_assets.core.offsets import OffsetRange, spark_offsets_json
from zync_assets.core.settings import KafkaSettings
from zync_assets.kafka.java_config import java_client_config
from zync_assets.spark.session import default_parallelism

# How long the broker may hold a fetch that finds no data (Kafka's default: 500 ms).
END_OF_RANGE_WAIT_MS = 10


def java_client_options(settings: KafkaSettings) -> dict[str, str]:
    """The Java Kafka client's properties (with Spark's `kafka.` prefix) for these settings."""
    options = {f"kafka.{key}": value for key, value in java_client_config(settings).items()}
    options.update({
        # CDC producers may be transactional: never ingest aborted or open transactions.
        "kafka.isolation.level": "read_committed",
        # A broker gone mid-read fails the pass within about a minute, not Spark's default
        # several (offset lookups 3 × 60 s, then a fetch poll of 120 s); a continuous run
        # then says so and retries.
        "kafka.request.timeout.ms": "15000",
        "kafka.default.api.timeout.ms": "15000",
        # Big fetches: the default 1 MiB per partition costs a round trip per few thousand rows.
        "kafka.max.partition.fetch.bytes": str(16 << 20),
        "kafka.fetch.max.bytes": str(64 << 20),
        "kafka.max.poll.records": "20000",
        # With Kafka's 500 ms each Spark task of a pass paid about half a second whatever its
        # rows: past the end of its range a fetch finds nothing, and the broker holds such a
        # fetch for fetch.max.wait.ms (60 topics of one new message each: 17.1 s an ingest,
        # 2.1 s with 10 ms, bench/ingest_topics_bench.py). A fetch that finds data returns
        # at once either way.
        "kafka.fetch.max.wait.ms": str(END_OF_RANGE_WAIT_MS),
    })  # fmt: skip
    return options


def read_ranges(
    spark: SparkSession, settings: KafkaSettings, ranges: list[OffsetRange]
) -> DataFrame:
    """Messages of exactly `ranges`, as kafka{topic,partition,offset,timestamp}, key, value bytes.

    Offsets missing inside a range (transaction markers, compaction) are skipped;
    the caller checks up front that no range starts below a partition's low watermark.
    """
    assign: dict[str, list[int]] = {}
    for r in ranges:
        assign.setdefault(r.topic, []).append(r.partition)
    frame = (
        spark.read.format("kafka")
        .options(**java_client_options(settings))
        .option("assign", json.dumps(assign))
        .option("startingOffsets", spark_offsets_json(ranges, "start"))
        .option("endingOffsets", spark_offsets_json(ranges, "end"))
        .option("failOnDataLoss", "false")
        .option("fetchOffset.numRetries", "2")
        .option("kafkaConsumer.pollTimeoutMs", "30000")
        # Split big ranges so decoding runs on every core, not one task per partition.
        .option("minPartitions", str(default_parallelism(spark)))
        .load()
    )
    return frame.select(
        F.struct(
            F.col("topic"),
            F.col("partition"),
            F.col("offset"),
            F.col("timestamp"),
        ).alias("kafka"),
        F.col("key").alias("key_bytes"),
        F.col("value").alias("value_bytes"),
    )
