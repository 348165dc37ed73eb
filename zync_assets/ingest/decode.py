"""Decode Kafka messages inside Spark: Confluent-framed Avro, each message with its own
writer schema, or Kafka Connect's JSON envelope; keys may also be plain strings or bytes.
Each topic's key and value formats come from its spec route (codec/formats.py).

A first pass over the (cached) messages finds the distinct schema ids; the driver
fetches each one's schema once from the registry and hands them all to zync's own
decoder (`zync_avro_variant`, jvm/src), so decoding runs in the JVM on the executors
and every record keeps its own writer schema. The decoded value is a VARIANT, which keeps each record's own
shape and tells a missing field from a null one. It is the VARIANT Spark's
`from_avro` and `to_variant_object` would give, in one pass instead of two, and
also for schemas Spark refuses (recursive records, time-micros, null-typed fields,
decimals declared wider than 38 digits).

Connect JSON is decoded by `zync_connect_json_variant` (jvm/src): the payload is read by
its schema, so Debezium's semantic types become the same values as from Avro. A
string key becomes a variant string, a bytes key a variant binary.

A message that cannot be decoded gets a dead-letter reason instead of a value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from zync_assets.codec.avro import CORRUPT, NOT_FRAMED, UNKNOWN_SCHEMA
from zync_assets.codec.formats import WireFormat

NOT_FRAMED_ID = -1  # marker in the schema-id column for bytes without the Confluent header


def schema_id_column(raw: str) -> Column:
    """Schema id of a framed message; NULL when empty (tombstone), -1 when not framed."""
    return F.call_function("zync_schema_id", F.col(raw))


@dataclass(frozen=True)
class WriterSchemas:
    """Writer schemas by id for one batch; ids the registry does not know are kept apart."""

    known: dict[int, Any]
    unknown: set[int]


def fetch_schemas(ids: Iterable[int], lookup: Callable[[int], Any]) -> WriterSchemas:
    known: dict[int, Any] = {}
    unknown: set[int] = set()
    for schema_id in sorted(set(ids)):
        try:
            known[schema_id] = lookup(schema_id)
        except LookupError:
            unknown.add(schema_id)
    return WriterSchemas(known, unknown)


def avro_variant(framed_bytes: str, schemas: Mapping[int, Any]) -> Column:
    """VARIANT of each framed message in column `framed_bytes` whose schema id is in
    `schemas`; NULL when it does not decode (`avro_error` says why)."""
    return F.call_function("zync_avro_variant", F.col(framed_bytes), _listing(schemas))


def avro_error(framed_bytes: str, schemas: Mapping[int, Any]) -> Column:
    """Why `avro_variant` gives NULL for a message of a listed schema id (NULL if it decodes)."""
    return F.call_function("zync_avro_error", F.col(framed_bytes), _listing(schemas))


def _listing(schemas: Mapping[int, Any]) -> Column:
    text = json.dumps({str(i): json.dumps(s) for i, s in sorted(schemas.items())})
    return F.lit(text.encode())


def format_column(formats: Mapping[str, WireFormat], side: str) -> Column:
    """Each message's `side` format, by its topic (avro unless its route says otherwise)."""
    column = F.lit("avro")
    by_format: dict[str, list[str]] = {}
    for topic, wire in formats.items():
        by_format.setdefault(getattr(wire, side), []).append(topic)
    for name, topics in sorted(by_format.items()):
        if name != "avro":
            column = F.when(F.col("kafka.topic").isin(sorted(topics)), F.lit(name)).otherwise(
                column
            )
    return column


def decode_side(
    frame: DataFrame, side: str, schemas: WriterSchemas, formats: Mapping[str, WireFormat]
) -> DataFrame:
    """Add `<side>` (VARIANT) and `<side>_problem` for the bytes in `<side>_bytes`.

    The decoder runs once per message, into a staged column; only a message it
    did not decode is looked at again, to say why.
    """
    raw, staged_side = f"{side}_bytes", f"__{side}"
    wire = format_column(formats, side)
    decoded = (
        F.when(wire == "json", F.call_function("zync_connect_json_variant", F.col(raw)))
        .when(wire == "string", F.col(raw).cast("string").cast("variant"))
        .when(wire == "bytes", F.col(raw).cast("variant"))
        .otherwise(avro_variant(raw, schemas.known))
    )
    staged = frame.select("*", decoded.alias(staged_side))
    sid = schema_id_column(raw)
    # Kafka's null is no key or no value (a tombstone) in every format, and so are zero
    # bytes, but for an Avro value: Confluent's deserializer refuses those, and read as a
    # tombstone they would delete their key downstream (docs/RELIABILITY.md).
    empty = F.length(F.col(raw)) == 0
    absent = F.col(raw).isNull() | (empty if side == "key" else empty & (wire != "avro"))
    problem = (
        F.when(F.col(staged_side).isNotNull() | absent, F.lit(None).cast("string"))
        .when(
            wire == "json",
            F.concat(F.lit(f"{CORRUPT}: "), F.call_function("zync_connect_json_error", F.col(raw))),
        )
        .when(wire != "avro", F.lit(None).cast("string"))
        .when(empty, F.lit(f"{NOT_FRAMED}: zero bytes, neither a tombstone nor Confluent Avro"))
        .when(sid == NOT_FRAMED_ID, F.lit(f"{NOT_FRAMED}: no Confluent Avro header"))
        .when(
            ~sid.isin(sorted(schemas.known)),
            F.concat(F.lit(f"{UNKNOWN_SCHEMA}: schema id "), sid.cast("string")),
        )
        .otherwise(
            F.concat(
                F.lit(f"{CORRUPT}: does not decode with schema id "),
                sid.cast("string"),
                F.lit(": "),
                avro_error(raw, schemas.known),
            )
        )
    )
    return staged.select(
        *frame.columns, F.col(staged_side).alias(side), problem.alias(f"{side}_problem")
    )


RAW_COLUMNS = ("kafka", "key", "value", "dead_letter")


def _avro_ids(envelopes: DataFrame, formats: Mapping[str, WireFormat]) -> DataFrame:
    """The distinct schema ids of the Avro keys and values (one small job)."""
    ids = []
    for side in ("key", "value"):
        is_avro = format_column(formats, side) == "avro"
        ids.append(F.when(is_avro, schema_id_column(f"{side}_bytes")))
    return (
        envelopes.select(F.explode(F.array(*ids)).alias("id"))
        .where("id IS NOT NULL AND id >= 0")
        .distinct()
    )


def decode_envelopes(
    envelopes: DataFrame, registry: Any, formats: Mapping[str, WireFormat] | None = None
) -> DataFrame:
    """Raw pool rows: `kafka`, decoded `key`/`value`, and `dead_letter` (NULL when decodable).

    `formats` gives a topic's key and value formats (default: Avro). `dead_letter` is
    {reason, key, value} with the original bytes; such a row's `key`/`value` are NULL.
    `envelopes` should be cached: the schema ids are read from it before the decoding pass.
    """
    formats = formats or {}
    ids = [row.id for row in _avro_ids(envelopes, formats).collect()]
    schemas = fetch_schemas(ids, registry.schema_by_id) if ids else WriterSchemas({}, set())
    decoded = decode_side(
        decode_side(envelopes, "key", schemas, formats), "value", schemas, formats
    )
    reason = F.coalesce(
        F.concat(F.lit("key "), F.col("key_problem")),
        F.concat(F.lit("value "), F.col("value_problem")),
    )
    dead = F.when(
        reason.isNotNull(),
        F.struct(
            reason.alias("reason"),
            F.col("key_bytes").alias("key"),
            F.col("value_bytes").alias("value"),
        ),
    )
    return decoded.select(
        "kafka",
        F.when(reason.isNull(), F.col("key")).alias("key"),
        F.when(reason.isNull(), F.col("value")).alias("value"),
        dead.alias("dead_letter"),
    )
