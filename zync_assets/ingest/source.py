"""Spark's Kafka source, configured from `KafkaSettings` to read exact offset ranges."""

from __future__ import annotations

import json

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from zync_assets.ingest.ranges import OffsetRange, spark_offsets_json
from zync_assets.settings import KafkaSettings

_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def java_client_options(settings: KafkaSettings) -> dict[str, str]:
    """The Java Kafka client's properties (with Spark's `kafka.` prefix) for these settings."""
    options = {
        "kafka.bootstrap.servers": settings.bootstrap_servers,
        "kafka.security.protocol": settings.security_protocol,
        # CDC producers may be transactional: never ingest aborted or open transactions.
        "kafka.isolation.level": "read_committed",
        "kafka.request.timeout.ms": "30000",
        "kafka.default.api.timeout.ms": "30000",
        # Big fetches: the default 1 MiB per partition costs a round trip per few thousand rows.
        "kafka.max.partition.fetch.bytes": str(16 << 20),
        "kafka.fetch.max.bytes": str(64 << 20),
        "kafka.max.poll.records": "20000",
    }
    if settings.security_protocol.startswith("SASL_"):
        mechanism = settings.sasl_mechanism or "PLAIN"
        options["kafka.sasl.mechanism"] = mechanism
        user = (settings.sasl_username or "").replace('"', '\\"')
        password = (settings.sasl_password or "").replace('"', '\\"')
        options["kafka.sasl.jaas.config"] = (
            f'{_JAAS_MODULES[mechanism]} required username="{user}" password="{password}";'
        )
    if settings.security_protocol.endswith("SSL"):
        if settings.ssl_ca:
            options["kafka.ssl.truststore.type"] = "PEM"
            options["kafka.ssl.truststore.location"] = settings.ssl_ca
        if settings.ssl_cert and settings.ssl_key:
            options["kafka.ssl.keystore.type"] = "PEM"
            options["kafka.ssl.keystore.certificate.chain"] = _read(settings.ssl_cert)
            options["kafka.ssl.keystore.key"] = _read(settings.ssl_key)
        if settings.ssl_skip_verify:
            options["kafka.ssl.endpoint.identification.algorithm"] = ""
    return options


def _read(path: str) -> str:
    with open(path) as handle:
        return handle.read()


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
        # Split big ranges so decoding runs on every core, not one task per partition.
        .option("minPartitions", str(spark.sparkContext.defaultParallelism))
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
