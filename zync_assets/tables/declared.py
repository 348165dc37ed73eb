"""Column types declared by a topic's Avro schemas: the row image (`after`) of its envelopes.

A VARIANT keeps a value's type but not all of its schema's: a decimal loses its declared
precision and its trailing zeros (1.50 is 1.5). So for a raw pool's Avro topic, a table
takes its columns' types from the registry's schemas of `<topic>-value`, every version,
newest last. Ingest has already turned Debezium's semantic types into the values they
stand for (jvm/src/zync/spark/ConnectTypeReaders.java: io.debezium.time.Date is a DATE in
the pool, not its int of days), so each declared type here is the type of the value
ingest stored, and a column reads it with a plain cast:

| Avro (or Debezium's `connect.name`)                        | column |
|------------------------------------------------------------|--------|
| int, long (also Year, MicroDuration, time-millis/-micros)  | bigint |
| float / double / boolean / string / bytes                  | float / double / boolean / string / binary |
| decimal(p, s) (bytes or fixed)                             | decimal(p, s) (p at most 38) |
| date, io.debezium.time.Date                                | date |
| timestamp-millis/-micros, io.debezium.time.ZonedTimestamp  | timestamp |
| local-timestamp-*, io.debezium.time.Timestamp, MicroTimestamp, NanoTimestamp | timestamp_ntz |
| io.debezium.time.Time, MicroTime, NanoTime, Connect's Time | string (HH:mm:ss[.ffffff]) |
| io.debezium.data.Json, VariableScaleDecimal                | variant |
| record, map, array, other unions                           | variant |
"""

from __future__ import annotations

from typing import Any, NamedTuple

from zync_assets.codec.row_schema import non_null, row_record

VARIANT = "variant"


# What ingest stores for each semantic type it reads (ConnectTypeReaders.java).
_DEBEZIUM = {
    "io.debezium.time.Date": "date",
    "io.debezium.time.Timestamp": "timestamp_ntz",
    "io.debezium.time.MicroTimestamp": "timestamp_ntz",
    "io.debezium.time.NanoTimestamp": "timestamp_ntz",
    "io.debezium.time.ZonedTimestamp": "timestamp",
    "io.debezium.time.Time": "string",
    "io.debezium.time.MicroTime": "string",
    "io.debezium.time.NanoTime": "string",
    "org.apache.kafka.connect.data.Time": "string",
    "io.debezium.data.Json": VARIANT,
    "io.debezium.data.VariableScaleDecimal": VARIANT,
}
_LOGICAL = {
    "date": "date",
    "timestamp-millis": "timestamp",
    "timestamp-micros": "timestamp",
    "local-timestamp-millis": "timestamp_ntz",
    "local-timestamp-micros": "timestamp_ntz",
}
_PRIMITIVE = {
    "int": "bigint", "long": "bigint", "float": "float", "double": "double",
    "boolean": "boolean", "string": "string", "bytes": "binary", "fixed": "binary",
    "enum": "string",
}  # fmt: skip


class Declared(NamedTuple):
    """What a topic's value schemas say of its row's columns."""

    types: dict[str, str]  # column name → type
    # The JSON columns (io.debezium.data.Json): ingest leaves out a field whose value is SQL
    # NULL and keeps the JSON document `null` as a variant null, so in these columns (and
    # only these) a variant null is a value, not a NULL.
    documents: frozenset[str]


def declared(schemas: list[Any], envelope: bool) -> Declared:
    """The columns of a topic's value schemas (oldest first; a newer one wins). `envelope`:
    the schemas are Debezium envelopes, whose `after` record is the row."""
    columns: dict[str, str] = {}
    documents: set[str] = set()
    for schema in schemas:
        row = row_record(schema, envelope)
        for field in row.get("fields", []) if row else []:
            if isinstance(field, dict) and isinstance(field.get("name"), str):
                name, kind = field["name"], field.get("type")
                columns[name] = avro_column(kind)
                documents.discard(name)
                if _is_json(kind):
                    documents.add(name)
    return Declared(columns, frozenset(documents))


NOTHING_DECLARED = Declared({}, frozenset())


def declared_columns(schemas: list[Any], envelope: bool) -> dict[str, str]:
    """Column name → type, from a topic's value schemas (see `declared`)."""
    return declared(schemas, envelope).types


def _is_json(kind: Any) -> bool:
    kind = non_null(kind)
    return isinstance(kind, dict) and kind.get("connect.name") == "io.debezium.data.Json"


def avro_column(kind: Any) -> str:
    """The column type of a value ingest read with Avro type `kind`."""
    kind = non_null(kind)
    if isinstance(kind, list):
        return VARIANT
    if isinstance(kind, str):
        return _PRIMITIVE.get(kind, VARIANT)
    if not isinstance(kind, dict):
        return VARIANT
    connect = kind.get("connect.name")
    if connect in _DEBEZIUM:
        return _DEBEZIUM[connect]
    logical = kind.get("logicalType")
    if logical == "decimal":
        scale = int(kind.get("scale", 0))
        precision = min(int(kind.get("precision", 38)), 38)
        return f"decimal({max(precision, scale)},{scale})"
    if logical in _LOGICAL:
        return _LOGICAL[logical]
    base = kind.get("type")
    if base in ("record", "map", "array"):
        return VARIANT
    return _PRIMITIVE.get(base, VARIANT) if isinstance(base, str) else VARIANT
