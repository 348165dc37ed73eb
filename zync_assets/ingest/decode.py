"""Decode Confluent-framed Avro inside Spark, one `from_avro` per writer schema id.

The 4-byte schema id is read in SQL; the driver fetches each distinct id's schema
once from the registry and builds a CASE over the ids, so decoding runs in the
JVM on the executors and every record keeps its own writer schema. The decoded
value becomes a VARIANT, which keeps each record's own shape and tells a missing
field from a null one.

A message that cannot be decoded gets a dead-letter reason instead of a value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro
from pyspark.sql.utils import AnalysisException

from zync_assets.codec.avro import CORRUPT, NOT_FRAMED, UNKNOWN_SCHEMA

UNSUPPORTED_SCHEMA = "unsupported-schema"
NOT_FRAMED_ID = -1  # marker in the schema-id column for bytes without the Confluent header
_AVRO_OPTIONS = {"mode": "PERMISSIVE"}  # corrupt bytes decode to NULL, not a failed job


def schema_id_column(raw: str) -> Column:
    """Schema id of a framed message; NULL when empty (tombstone), -1 when not framed."""
    data = F.col(raw)
    framed = (F.length(data) >= 5) & (F.substring(data, 1, 1) == F.lit(b"\x00"))
    as_int = F.conv(F.hex(F.substring(data, 2, 4)), 16, 10).cast("long")
    return (
        F.when(data.isNull() | (F.length(data) == 0), F.lit(None).cast("long"))
        .when(framed, as_int)
        .otherwise(F.lit(NOT_FRAMED_ID).cast("long"))
    )


@dataclass(frozen=True)
class WriterSchemas:
    """Writer schemas by id for one batch; ids the registry does not know are kept apart."""

    known: dict[int, Any]
    unknown: set[int]
    unsupported: dict[int, str]
    via_json: frozenset[int] = frozenset()  # schemas whose structs go to VARIANT through JSON


def fetch_schemas(ids: Iterable[int], lookup: Callable[[int], Any]) -> WriterSchemas:
    known: dict[int, Any] = {}
    unknown: set[int] = set()
    for schema_id in sorted(set(ids)):
        try:
            known[schema_id] = lookup(schema_id)
        except LookupError:
            unknown.add(schema_id)
    return WriterSchemas(known, unknown, {})


def _required_fields(schema: Any) -> list[str]:
    """Top-level record fields that can never be null (a null there means corrupt bytes)."""
    if not (isinstance(schema, dict) and schema.get("type") == "record"):
        return []
    return [
        f["name"]
        for f in schema["fields"]
        if f["type"] != "null" and not (isinstance(f["type"], list) and "null" in f["type"])
    ]


def _to_variant(decoded: Column, schema: Any, via_json: bool = False) -> Column:
    complex_type = isinstance(schema, dict) and schema.get("type") in ("record", "map", "array")
    if not complex_type:
        return decoded.cast("variant")
    # to_variant_object keeps decimals, dates and timestamps typed but refuses fields of
    # Avro type "null" (Spark's VOID); such schemas take the JSON route.
    return F.parse_json(F.to_json(decoded)) if via_json else F.to_variant_object(decoded)


def _from_avro(raw: str, schema: Any) -> Column:
    return from_avro(F.expr(f"substring({raw}, 6)"), json.dumps(schema), _AVRO_OPTIONS)


def _variant_for(raw: str, schema: Any, via_json: bool = False) -> Column:
    return _to_variant(_from_avro(raw, schema), schema, via_json)


def check_schemas(frame: DataFrame, raw: str, schemas: WriterSchemas) -> WriterSchemas:
    """Sort out schemas Spark cannot decode (e.g. recursive records) as `unsupported`."""
    known, unsupported, via_json = {}, dict(schemas.unsupported), set()
    for schema_id, schema in schemas.known.items():
        for json_route in (False, True):
            try:
                _ = frame.limit(0).select(_variant_for(raw, schema, json_route)).schema
            except AnalysisException as exc:
                unsupported[schema_id] = str(exc).splitlines()[0][:300]
                continue
            known[schema_id] = schema
            unsupported.pop(schema_id, None)
            if json_route:
                via_json.add(schema_id)
            break
    return WriterSchemas(known, schemas.unknown, unsupported, frozenset(via_json))


def decode_side(frame: DataFrame, side: str, schemas: WriterSchemas) -> DataFrame:
    """Add `<side>` (VARIANT) and `<side>_problem` for the bytes in `<side>_bytes`.

    Each schema id decodes into its own struct column first, so `from_avro` runs
    once per message; Spark's PERMISSIVE mode turns corrupt bytes into NULL or an
    all-NULL struct, which shows as a NULL in a field the schema requires.
    """
    raw, sid = f"{side}_bytes", F.col(f"{side}_id")
    structs = {i: f"__{side}_{i}" for i in schemas.known}
    staged = frame.select(
        "*",
        *(
            F.when(sid == i, _from_avro(raw, schemas.known[i])).alias(name)
            for i, name in structs.items()
        ),
    )
    value = F.lit(None).cast("variant")
    broken = F.lit(False)
    for i, name in structs.items():
        schema = schemas.known[i]
        value = F.when(sid == i, _to_variant(F.col(name), schema, i in schemas.via_json)).otherwise(
            value
        )
        required = _required_fields(schema)
        bad = F.col(name).isNull()
        for field_name in required:
            bad = bad | F.col(name)[field_name].isNull()
        broken = F.when(sid == i, bad).otherwise(broken)
    problem = (
        F.when(sid.isNull(), F.lit(None).cast("string"))
        .when(sid == NOT_FRAMED_ID, F.lit(f"{NOT_FRAMED}: no Confluent Avro header"))
        .when(
            sid.isin(sorted(schemas.unknown)) if schemas.unknown else F.lit(False),
            F.concat(F.lit(f"{UNKNOWN_SCHEMA}: schema id "), sid.cast("string")),
        )
        .when(
            sid.isin(sorted(schemas.unsupported)) if schemas.unsupported else F.lit(False),
            F.concat(F.lit(f"{UNSUPPORTED_SCHEMA}: schema id "), sid.cast("string")),
        )
        .when(
            broken,
            F.concat(F.lit(f"{CORRUPT}: does not decode with schema id "), sid.cast("string")),
        )
    )
    return staged.select(*frame.columns, value.alias(side), problem.alias(f"{side}_problem"))


RAW_COLUMNS = ("kafka", "key", "value", "dead_letter")


def decode_envelopes(envelopes: DataFrame, registry: Any) -> DataFrame:
    """Raw pool rows: `kafka`, decoded `key`/`value`, and `dead_letter` (NULL when decodable).

    `dead_letter` is {reason, key, value} with the original bytes; such a row's
    `key`/`value` are NULL. `envelopes` should be cached: the schema ids are read
    from it before the decoding pass.
    """
    framed = envelopes.select(
        "*",
        schema_id_column("key_bytes").alias("key_id"),
        schema_id_column("value_bytes").alias("value_id"),
    )
    ids = [
        row.id
        for row in framed.select(F.explode(F.array("key_id", "value_id")).alias("id"))
        .where("id IS NOT NULL AND id >= 0")
        .distinct()
        .collect()
    ]
    schemas = check_schemas(framed, "value_bytes", fetch_schemas(ids, registry.schema_by_id))
    decoded = decode_side(decode_side(framed, "key", schemas), "value", schemas)
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
