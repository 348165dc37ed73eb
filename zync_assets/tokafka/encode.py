"""Staging output records → Confluent-framed Avro key/value bytes, encoded in Spark.

The schemas already registered for the topic are tried first (`registered_encoding`);
a first run types its first SAMPLE_SIZE records in the job that checks the offsets
(`survey`, with zync's `zync_variant_type`) and registers one schema per shape
(top-level field names). When a record does not fit, the rest are surveyed in full
and the schemas widened. An `Encoding` carries the schemas to zync's Avro writer,
which writes each record straight from its VARIANT bytes on the executors: inside
the JVM sender's own job (zync.spark.StagingFetch), or as the SQL function
`zync_variant_avro` (`encoded`, for the librdkafka sender). Both are zync's own
(jvm/src): Spark's `schema_of_variant_agg` and `variant_get` into a struct cost
~25 µs per record, these ~1 µs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from zync_assets.core.staging_rows import OUTPUT, of_kind
from zync_assets.kafka.registry import Registry
from zync_assets.lake.commits import ETL_STATE_KEY, newest_states
from zync_assets.lake.pools import pool_version, require_pool
from zync_assets.tokafka import shapes
from zync_assets.tokafka.declared import DeclaredSchemas, declared_schemas

STAGING_HINT = "run `zync etl` first"
SAMPLE_SIZE = 20_000  # the records a first run types before it registers schemas


@dataclass(frozen=True)
class Span:
    """The offsets of one topic's records from a staging offset on."""

    count: int
    low: int | None
    high: int | None  # the largest offset
    has_previous: bool  # staging has the record at start - 1


@dataclass(frozen=True)
class Survey:
    """The types of one topic's records from a staging offset on."""

    key_type: shapes.Type | None  # all keys merged; None when every key is null
    value_shapes: dict[str | None, shapes.Type]  # shape -> merged type; tombstones excluded


@dataclass(frozen=True)
class Encoding:
    """The registered schemas a sync encodes with, as zync's JVM encoder reads them (UTF-8
    JSON: `{"objects": {shape: [id, avro]}, "other": [id, avro] | null}`), and as the
    `zync_variant_avro` columns that apply them in SQL."""

    key_schemas: bytes
    value_schemas: bytes
    subjects: dict[str, int]  # registry subject -> schema id used

    @property
    def key(self) -> Column:
        return _avro("key", self.key_schemas)

    @property
    def value(self) -> Column:
        return _avro("value", self.value_schemas)


def require_staging(pool: str) -> str:
    """The staging pool's path; a ZyncError if there is no such pool."""
    return require_pool(pool, "staging pool", STAGING_HINT)


def staging_of(spark: SparkSession, pool: str) -> DataFrame:
    return spark.read.format("delta").load(require_staging(pool))


def output_topics(spark: SparkSession, pool: str, version: int | None = None) -> list[str]:
    """Every topic `pool` has output records for (as of `version`, default its newest).

    Read from the ETL states in the pool's commits (their `next` offsets), which costs a
    few file reads: a scan of the outputs cost a sync six Spark jobs (measured: eight syncs
    of a test's pool of a few hundred rows took 3.8 s less without it, about 0.5 s each)
    and grows with the pool's history. Only a pool whose commits hold no ETL state (none
    written yet) is scanned."""
    path = require_staging(pool)
    version = pool_version(path) if version is None else version
    if version is None:
        return []
    states = newest_states(path, version).get(ETL_STATE_KEY, [])
    if states:
        return sorted({t for c in states for t, n in c.data.get("next", {}).items() if n > 0})
    reader = spark.read.format("delta").option("versionAsOf", version)
    outputs = reader.load(path).where(of_kind(OUTPUT))
    return sorted(r.topic for r in outputs.select("kafka.topic").distinct().collect())


def outputs_from(spark: SparkSession, pool: str, topic: str, start: int) -> DataFrame:
    """Output records of `topic` in `pool` with offset ≥ start: offset, key, value
    (VARIANTs; a tombstone's value is null)."""
    return (
        staging_of(spark, pool)
        .where(of_kind(OUTPUT) & (F.col("kafka.topic") == topic))
        .where(F.col("kafka.offset") >= start)
        .select(F.col("kafka.offset").alias("offset"), "key", "value")
    )


def load_files(spark: SparkSession, pool: str) -> None:
    """Plan a read of `pool` that matches no file. Delta loads the pool's newest snapshot
    (its files and their statistics, cached for the reads planned after it): after each
    commit that takes about half a second, which a caller can spend waiting on Kafka."""
    staging_of(spark, pool).where(F.col("kafka.offset") < 0).inputFiles()


def span(outputs: DataFrame, start: int) -> Span:
    """Offsets of the records from `start` on (reads no keys or values); `outputs` may
    begin one record earlier, to learn whether staging has the record before `start`."""
    new = F.col("offset") >= start
    row = outputs.agg(
        F.count(F.when(new, 1)).alias("n"),
        F.min(F.when(new, F.col("offset"))).alias("low"),
        F.max(F.when(new, F.col("offset"))).alias("high"),
        F.max(F.col("offset") == start - 1).alias("previous"),
    ).first()
    assert row is not None  # an aggregate without grouping has one row
    return Span(row.n, row.low, row.high, bool(row.previous))


def survey(outputs: DataFrame, start: int, typed: int | None = None) -> tuple[Span, Survey]:
    """Offsets of the records from `start` on and the types of the first `typed` of them
    (default: all), in one pass (`span` reads offsets only, when no types are needed)."""
    new = F.col("offset") >= start
    to_type = new if typed is None else new & (F.col("offset") < start + typed)
    grouped = (
        outputs.select(
            "offset",
            new.alias("new"),
            F.when(to_type, F.call_function("zync_variant_type", "key")).alias("key_type"),
            F.when(to_type, F.call_function("zync_variant_type", "value")).alias("value_type"),
        )
        .groupBy("key_type", "value_type")
        .agg(
            F.count(F.when(F.col("new"), 1)).alias("n"),
            F.min(F.when(F.col("new"), F.col("offset"))).alias("low"),
            F.max(F.when(F.col("new"), F.col("offset"))).alias("high"),
            F.max(F.col("offset") == start - 1).alias("previous"),
        )
        .collect()
    )
    found = [r for r in grouped if r.n]
    found.sort(key=lambda r: (r.key_type or "", r.value_type or ""))  # a stable field order
    offsets = Span(
        count=sum(r.n for r in found),
        low=min((r.low for r in found), default=None),
        high=max((r.high for r in found), default=None),
        has_previous=any(r.previous for r in grouped),
    )
    types = Survey(
        key_type=_merged(r.key_type for r in found),
        value_shapes=_by_shape(r.value_type for r in found),
    )
    return offsets, types


def surveys(outputs: DataFrame, starts: list[int]) -> dict[int, Survey]:
    """The types of several topics' records in one job: `outputs` as many_topics reads
    them (`topic`: an index into `starts`, each topic's first offset to type)."""
    new = F.col("offset") >= F.array(*[F.lit(s) for s in starts])[F.col("topic")]
    rows = (
        outputs.where(new)
        .select(
            "topic",
            F.call_function("zync_variant_type", "key").alias("key_type"),
            F.call_function("zync_variant_type", "value").alias("value_type"),
        )
        .groupBy("topic", "key_type", "value_type")
        .count()
        .collect()
    )
    rows.sort(key=lambda r: (r.key_type or "", r.value_type or ""))  # a stable field order
    found: dict[int, Survey] = {}
    for index in range(len(starts)):
        mine = [r for r in rows if r.topic == index]
        found[index] = Survey(
            key_type=_merged(r.key_type for r in mine),
            value_shapes=_by_shape(r.value_type for r in mine),
        )
    return found


@dataclass(frozen=True)
class Schemas:
    """Where a topic's schemas come from: the registry (Avro), or, for Kafka Connect JSON,
    the survey alone: every message carries its schema, nothing is registered. `source`:
    the input topic whose row schema the records follow (a mirror's), whose declared
    column types win over the values' own (declared.py)."""

    registry: Registry
    wire_format: str = "avro"
    source: str | None = None

    def registered(self, topic: str) -> Encoding | None:
        if self.wire_format == "json":
            return None  # no memory between runs: each run types its records
        declared = self._declared(topic)
        if declared is not None:
            return _encoding(
                {"other": declared.key}, {"objects": declared.values, "other": None},
                declared.subjects,
            )  # fmt: skip
        return registered_encoding(topic, self.registry)

    def encoding(self, survey_: Survey, topic: str) -> Encoding:
        if self.wire_format == "json":
            return json_encoding(survey_, topic)
        declared = self._declared(topic)
        if declared is None:
            return encoding(survey_, topic, self.registry)
        covered = {s: declared.covering(s) for s in survey_.value_shapes if s is not None}
        rest = Survey(
            key_type=None if declared.key else survey_.key_type,
            value_shapes={
                s: k for s, k in survey_.value_shapes.items() if s is None or not covered[s]
            },
        )
        keys, values, subjects = _parts(rest, topic, self.registry)
        values["objects"].update({s: entry for s, entry in covered.items() if entry})
        if declared.key:
            keys["other"] = declared.key
        return _encoding(keys, values, subjects | declared.subjects)

    def _declared(self, topic: str) -> DeclaredSchemas | None:
        if self.source is None:
            return None
        return declared_schemas(self.registry, topic, self.source)


def json_encoding(survey_: Survey, topic: str) -> Encoding:
    """Connect JSON: one Connect schema per shape, written into each message."""
    key = None
    if survey_.key_type is not None:
        key = ["json", json.dumps(shapes.to_connect(survey_.key_type, f"{topic}.Key"))]
    objects: dict[str, Any] = {}
    other = None
    for shape, kind in survey_.value_shapes.items():
        entry = ["json", json.dumps(shapes.to_connect(kind, shapes.value_record_name(kind)))]
        if shape is None:
            other = entry
        else:
            objects[shape] = entry
    return _encoding({"other": key}, {"objects": objects, "other": other}, {})


def encoding(survey_: Survey, topic: str, registry: Registry) -> Encoding:
    """Register one schema per shape (widening what is registered) and build the
    columns that encode keys and values."""
    return _encoding(*_parts(survey_, topic, registry))


def _parts(
    survey_: Survey, topic: str, registry: Registry
) -> tuple[dict[str, Any], dict[str, Any], dict[str, int]]:
    """The schema lists of `encoding` (keys, values) and the subjects they registered."""
    subjects: dict[str, int] = {}
    key = None  # every key surveyed is null: the encoder refuses a key, if one turns up
    if survey_.key_type is not None:
        subject = shapes.key_subject(topic)
        schema_id, avro = _register(registry, subject, survey_.key_type, "Key", topic)
        subjects[subject] = schema_id
        key = [schema_id, avro]
    objects: dict[str, Any] = {}
    other = None
    for shape, kind in survey_.value_shapes.items():
        subject = shapes.value_subject(topic, kind)
        name = shapes.value_record_name(kind)
        schema_id, avro = _register(registry, subject, kind, name, topic)
        subjects[subject] = schema_id
        if shape is None:
            other = [schema_id, avro]
        else:
            objects[shape] = [schema_id, avro]
    return {"other": key}, {"objects": objects, "other": other}, subjects


def registered_encoding(topic: str, registry: Registry) -> Encoding | None:
    """The encoding of what earlier runs registered for `topic` (no survey); None if
    nothing is. A record it does not fit makes the encoder refuse; the caller surveys."""
    keys, objects, other, subjects = None, {}, None, {}
    for subject in registry.subjects():
        kind = shapes.subject_kind(topic, subject)
        if kind is None:
            continue
        registered = registry.latest(subject)
        subjects[subject] = registered.schema_id
        entry = [registered.schema_id, registered.schema.schema_str]
        if kind == "key":
            keys = entry
        elif kind == "value":
            other = entry
        else:
            value_type = shapes.from_avro(json.loads(registered.schema.schema_str))
            objects[shapes.shape_of(value_type)] = entry
    if not subjects:
        return None
    return _encoding({"other": keys}, {"objects": objects, "other": other}, subjects)


def encoded(outputs: DataFrame, encoding_: Encoding) -> DataFrame:
    return outputs.select("offset", encoding_.key.alias("key"), encoding_.value.alias("value"))


def _merged(type_texts: Iterable[str | None]) -> shapes.Type | None:
    merged = None
    for text in type_texts:
        if text is not None:
            kind = shapes.parse_type(text)
            merged = kind if merged is None else shapes.merge(merged, kind)
    return merged


def _by_shape(type_texts: Iterable[str | None]) -> dict[str | None, shapes.Type]:
    """Value types grouped by shape and merged; tombstones (None) left out."""
    merged: dict[str | None, shapes.Type] = {}
    for text in type_texts:
        if text is not None:
            kind = shapes.parse_type(text)
            shape = shapes.shape_of(kind)
            merged[shape] = shapes.merge(merged[shape], kind) if shape in merged else kind
    return merged


def _register(
    registry: Registry, subject: str, kind: shapes.Type, name: str, topic: str
) -> tuple[int, str]:
    """Widen `kind` by the subject's latest schema and register it: (id, Avro JSON)."""
    latest = registry.latest_schema(subject)
    if latest is not None:
        kind = shapes.merge(shapes.from_avro(latest), kind)
    avro = shapes.to_avro(kind, name, shapes.namespace_of(topic))
    return registry.register(subject, avro), json.dumps(avro)


def _encoding(keys: dict[str, Any], values: dict[str, Any], subjects: dict[str, int]) -> Encoding:
    return Encoding(json.dumps(keys).encode(), json.dumps(values).encode(), subjects)


def _avro(column: str, schemas: bytes) -> Column:
    """Confluent-framed Avro of a VARIANT column; `schemas` as zync_variant_avro reads it."""
    # bytearray: a BINARY literal
    return F.call_function("zync_variant_avro", F.col(column), F.lit(bytearray(schemas)))
