"""Staging output records → Confluent-framed Avro key/value bytes, encoded in Spark.

One survey job groups the records to send by shape (top-level field names) and
checks their offsets are dense; the registry gets one schema per shape; then
Spark's `to_avro` encodes every record in the JVM, so the driver only moves bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import to_avro

from zync_assets.codec.wire import frame
from zync_assets.kafka.registry import Registry
from zync_assets.pools import require_pool
from zync_assets.tokafka import shapes

STAGING_HINT = "run `zync etl` first"
# Top-level field names of an object, as "a,b,c"; NULL for scalars.
_NAMES = "array_join(array_sort(map_keys(try_variant_get({0}, '$', 'map<string,variant>'))), ',')"


@dataclass(frozen=True)
class Survey:
    """The records of one topic from a staging offset on: how many, and their shapes."""

    count: int
    low: int | None
    high: int | None  # the largest offset
    has_previous: bool  # staging has the record at start - 1
    key_types: list[str]  # schema_of_variant_agg per key shape
    value_shapes: dict[str | None, str]  # field names ("a,b") -> merged type


@dataclass(frozen=True)
class Encoding:
    key: Column
    value: Column
    subjects: dict[str, int]  # registry subject -> schema id used


def _staging(spark: SparkSession, pool: str) -> DataFrame:
    path = require_pool(pool, "staging pool", STAGING_HINT)
    return spark.read.format("delta").load(path)


def output_topics(spark: SparkSession, pool: str) -> list[str]:
    outputs = _staging(spark, pool).where("kind = 'output'")
    return sorted(r.topic for r in outputs.select("kafka.topic").distinct().collect())


def outputs_from(spark: SparkSession, pool: str, topic: str, start: int) -> DataFrame:
    """Output records of `topic` in `pool` with offset ≥ start: offset, key, value
    (tombstones' value is NULL) and `shape`, the value's top-level field names."""
    return (
        _staging(spark, pool)
        .where((F.col("kind") == "output") & (F.col("kafka.topic") == topic))
        .where(F.col("kafka.offset") >= start)
        .select(
            F.col("kafka.offset").alias("offset"),
            F.when(~F.expr("is_variant_null(key)"), F.col("key")).alias("key"),
            F.when(~F.expr("is_variant_null(value)"), F.col("value")).alias("value"),
        )
        .withColumn("shape", F.expr(_NAMES.format("value")))
    )


def survey(outputs: DataFrame, start: int) -> Survey:
    """Shapes and offsets of the records from `start` on; `outputs` may begin one
    record earlier, to learn whether staging has the record before `start`."""
    new = F.col("offset") >= start
    grouped = (
        outputs.select(
            "offset",
            "shape",
            F.when(new, F.col("key")).alias("key"),
            F.when(new, F.col("value")).alias("value"),
            new.alias("new"),
        )
        .groupBy("shape")
        .agg(
            F.count(F.when(F.col("new"), 1)).alias("n"),
            F.count("key").alias("keys"),
            F.count("value").alias("values"),
            F.min(F.when(F.col("new"), F.col("offset"))).alias("low"),
            F.max(F.when(F.col("new"), F.col("offset"))).alias("high"),
            F.max(F.col("offset") == start - 1).alias("previous"),
            F.expr("schema_of_variant_agg(key)").alias("key_type"),
            F.expr("schema_of_variant_agg(value)").alias("value_type"),
        )
        .collect()
    )
    return Survey(
        count=sum(r.n for r in grouped),
        low=min((r.low for r in grouped if r.n), default=None),
        high=max((r.high for r in grouped if r.n), default=None),
        has_previous=any(r.previous for r in grouped),
        key_types=[r.key_type for r in grouped if r.keys],  # keys: one merged schema
        value_shapes={r.shape: r.value_type for r in grouped if r.values},  # not tombstones
    )


def encoding(survey_: Survey, topic: str, registry: Registry) -> Encoding:
    """Register one schema per shape (widening what is registered) and build the
    columns that encode keys and values."""
    subjects: dict[str, int] = {}
    key = F.lit(None).cast("binary")
    if survey_.key_types:
        key_type = _merged(survey_.key_types)
        subject = shapes.key_subject(topic)
        key_type, schema_id, avro = _register(registry, subject, key_type, "Key", topic)
        subjects[subject] = schema_id
        key = _framed("key", key_type, schema_id, avro)
    value = F.lit(None).cast("binary")
    for names, type_text in survey_.value_shapes.items():
        kind = shapes.parse_type(type_text)
        subject = shapes.value_subject(topic, kind)
        kind, schema_id, avro = _register(
            registry, subject, kind, shapes.value_record_name(kind), topic
        )
        subjects[subject] = schema_id
        matches = F.col("shape").isNull() if names is None else F.col("shape") == names
        value = F.when(
            F.col("value").isNotNull() & matches, _framed("value", kind, schema_id, avro)
        ).otherwise(value)
    return Encoding(key, value, subjects)


def encoded(outputs: DataFrame, encoding_: Encoding) -> DataFrame:
    return outputs.select("offset", encoding_.key.alias("key"), encoding_.value.alias("value"))


def _merged(type_texts: list[str]) -> shapes.Type:
    merged = shapes.VOID
    for text in type_texts:
        merged = shapes.merge(merged, shapes.parse_type(text))
    return merged


def _register(
    registry: Registry, subject: str, kind: shapes.Type, name: str, topic: str
) -> tuple[shapes.Type, int, str]:
    """Widen `kind` by the subject's latest schema, register it; (type, id, Avro JSON)."""
    latest = registry.latest_schema(subject)
    if latest is not None:
        kind = shapes.merge(shapes.from_avro(latest), kind)
    avro = shapes.to_avro(kind, name, shapes.namespace_of(topic))
    return kind, registry.register(subject, avro), json.dumps(avro)


def _framed(column: str, kind: shapes.Type, schema_id: int, avro: str) -> Column:
    typed = F.expr(f"variant_get({column}, '$', '{shapes.spark_ddl(kind)}')")
    return F.concat(F.lit(frame(schema_id, b"")), to_avro(typed, avro))
