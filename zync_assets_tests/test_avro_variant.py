"""zync's Avro decoder (`zync_avro_variant`, jvm/src) against Spark's from_avro + to_variant_object.

Raw pools held Spark's VARIANT before zync had its own decoder, and ETL rules read
them: the two must agree, for every type a writer schema can hold.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import uuid
from decimal import Decimal
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro

from zync_assets.codec.wire import frame
from zync_assets.ingest import decode
from zync_assets.kafka.registry import Registry

pytestmark = pytest.mark.integration
UTC = dt.UTC


def money(precision: int, scale: int, base: str = "bytes") -> dict:
    extra = {"size": 16, "name": f"money{precision}_{scale}"} if base == "fixed" else {}
    return {"type": base, "logicalType": "decimal", "precision": precision, "scale": scale, **extra}


ROW = {"type": "record", "name": "Row", "namespace": "db.public", "fields": [
    {"name": "id", "type": "int"},
    {"name": "big", "type": "long"},
    {"name": "ok", "type": "boolean"},
    {"name": "ratio", "type": "float"},
    {"name": "score", "type": "double"},
    {"name": "name", "type": ["null", "string"]},
    {"name": "blob", "type": "bytes"},
    {"name": "amount", "type": money(10, 2)},
    {"name": "wide", "type": ["null", money(38, 9, "fixed")]},
    {"name": "born", "type": {"type": "int", "logicalType": "date"}},
    {"name": "at_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "at_us", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
    {"name": "local_ms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "local_us", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
    {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["OPEN", "PAID"]}},
    {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 4}},
    {"name": "tags", "type": {"type": "array", "items": ["null", "string"]}},
    {"name": "counts", "type": {"type": "map", "values": "long"}},
    {"name": "n", "type": ["null", "int", "long"]},
    {"name": "x", "type": ["float", "double"]},
    {"name": "either", "type": ["null", "int", "string", "Hash"]},
    {"name": "source", "type": {"type": "record", "name": "Source", "fields": [
        {"name": "db", "type": "string"}, {"name": "lsn", "type": ["null", "long"]}]}},
    {"name": "previous", "type": ["null", "Source"]},
]}  # fmt: skip


def row(i: int) -> dict[str, Any]:
    return {
        "id": -i, "big": 2**62 + i, "ok": i % 2 == 0, "ratio": 0.1 * i, "score": -1e300 / (i + 1),
        "name": None if i % 3 == 0 else "ünï" * i, "blob": bytes(range(i % 7)),
        "amount": Decimal(f"-{i}.0{i % 10}"), "wide": None if i == 1 else Decimal("1.000000001") * i,
        "born": dt.date(1000 + i, 1, 1), "at_ms": dt.datetime(1969, 12, 31, 23, 59, i, 1000, UTC),
        "at_us": dt.datetime(2026, 11, 22, 1, 2, 3, i, UTC),
        "local_ms": dt.datetime(2020, 2, 29, 0, 0, i), "local_us": dt.datetime(1, 1, 1, 0, 0, 0, i),
        "ref": str(uuid.UUID(int=i)), "state": ["OPEN", "PAID"][i % 2], "hash": b"\x00\x01\x02" + bytes([i]),
        "tags": [] if i == 0 else ["a", None, ""][: i % 4], "counts": {} if i == 0 else {"z": i, "a": -i},
        "n": [None, 7, 2**40][i % 3], "x": [1.5, 2.25][i % 2], "either": [None, 3, "s", b"four"][i % 4],
        "source": {"db": "shop", "lsn": None if i == 2 else i}, "previous": None if i % 2 else {"db": "old", "lsn": 1},
    }  # fmt: skip


NOTHING = {"type": "record", "name": "Nothing", "fields": [
    {"name": "gone", "type": "null"}, {"name": "only_null", "type": ["null"]},
]}  # fmt: skip

LOOSE_LOGICAL = {"type": "record", "name": "Loose", "fields": [
    {"name": "t", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "ns", "type": {"type": "long", "logicalType": "timestamp-nanos"}},
    {"name": "d", "type": {"type": "fixed", "name": "D", "size": 12, "logicalType": "duration"}},
    {"name": "m", "type": {"type": "string", "logicalType": "made-up"}},
]}  # fmt: skip

CASES = [
    pytest.param(
        LOOSE_LOGICAL,
        [{"t": 1000, "ns": 5, "d": b"\x01" * 12, "m": "x"}],
        id="logical types read as their base type",
    ),
    pytest.param(ROW, [row(i) for i in range(6)], id="debezium-like record"),
    pytest.param("string", ["", "key-ü"], id="string key"),
    pytest.param("long", [0, -(2**63)], id="long key"),
    pytest.param(["null", "string"], ["x"], id="nullable string"),
    pytest.param({"type": "array", "items": "double"}, [[], [1.0, -0.0]], id="top-level array"),
]


def encoded(schema: Any, value: Any, schema_id: int = 7) -> bytes:
    body = io.BytesIO()
    schemaless_writer(body, parse_schema(schema), value)
    return frame(schema_id, body.getvalue())


def spark_variant(column: str, schema: Any) -> Any:
    """Spark's own decoding: `from_avro` into a struct, then `to_variant_object`."""
    struct = from_avro(
        F.expr(f"substring({column}, 6)"), json.dumps(schema), {"mode": "PERMISSIVE"}
    )
    is_complex = isinstance(schema, dict) and schema["type"] in ("record", "map", "array")
    return F.to_variant_object(struct) if is_complex else struct.cast("variant")


def zync_variant(column: str, schema: Any) -> Any:
    return decode.avro_variant(column, {7: schema})


def both_decoders(spark, schema: Any, messages: list[bytes]) -> list[tuple]:
    """What a reader can see of zync's and of Spark's variant, per message: (zync, Spark)."""
    frame_ = spark.createDataFrame([(i, m) for i, m in enumerate(messages)], "i int, b binary")
    decoded = frame_.select(
        "i", zync_variant("b", schema).alias("zync"), spark_variant("b", schema).alias("spark")
    ).select(
        "i", "zync", "spark",
        F.schema_of_variant("zync").alias("zync_type"),
        F.schema_of_variant("spark").alias("spark_type"),
    )  # fmt: skip
    return [
        (meaning(r.zync, r.zync_type), meaning(r.spark, r.spark_type))
        for r in decoded.orderBy("i").collect()
    ]


def meaning(variant: Any, types: str | None) -> tuple[str, str | None]:
    """Its values (repr keeps decimal scales and time zones) and its types (schema_of_variant
    tells float from double, date from string)."""
    return ("SQL NULL" if variant is None else repr(variant.toPython()), types)


def zync_decodes(spark, schema: Any, message: bytes) -> tuple[Any, str | None]:
    """zync's variant of one message, and why it does not decode (None when it does)."""
    frame_ = spark.createDataFrame([(message,)], "b binary")
    schemas = {7: schema}
    decoded = frame_.select(
        decode.avro_variant("b", schemas).alias("v"), decode.avro_error("b", schemas).alias("e")
    ).first()
    return decoded.v, decoded.e


@pytest.mark.parametrize(("schema", "values"), CASES)
def test_zync_decoder_gives_the_variant_spark_gives(spark, schema, values) -> None:
    # Equal in meaning, not in bytes: Spark lays a map's fields out in Java HashMap order.
    pairs = both_decoders(spark, schema, [encoded(schema, v) for v in values])
    assert len(pairs) == len(values)
    for zync, spark_variant in pairs:
        assert zync[0] != "SQL NULL"
        assert zync == spark_variant


TIME_OF_DAY = {"type": "long", "logicalType": "time-micros"}  # Spark's TIME type
LINKED = {"type": "record", "name": "Node", "fields": [
    {"name": "v", "type": "long"}, {"name": "next", "type": ["null", "Node"]}]}  # fmt: skip
WIDE = {"type": "record", "name": "W", "fields": [{"name": "d", "type": money(64, 2)}]}


def decoded_envelopes(spark, registry: Registry, messages: list[tuple]) -> list[Any]:
    """decode_envelopes over (key bytes, value bytes) messages at offsets 0, 1, ..."""
    envelopes = spark.createDataFrame(
        [(("t", 0, offset, None), k, v) for offset, (k, v) in enumerate(messages)],
        "kafka struct<topic string, partition int, offset long, timestamp timestamp>, "
        "key_bytes binary, value_bytes binary",
    )
    return decode.decode_envelopes(envelopes, registry).orderBy("kafka.offset").collect()


@pytest.mark.parametrize(
    ("schema", "value", "expected"),
    [
        pytest.param(LINKED, {"v": 1, "next": {"v": 2, "next": None}},
                     "{'next': {'next': None, 'v': 2}, 'v': 1}", id="recursive record"),
        pytest.param(WIDE, {"d": Decimal("-123.45")}, "{'d': Decimal('-123.45')}",
                     id="decimal declared wider than 38 digits"),
        pytest.param({"type": "record", "name": "T", "fields": [{"name": "t", "type": TIME_OF_DAY}]},
                     {"t": dt.time(0, 0, 1, 5)}, "{'t': 1000005}", id="time-micros as its long"),
        pytest.param(NOTHING, {"gone": None, "only_null": None},
                     "{'gone': None, 'only_null': None}", id="null-typed fields"),
        pytest.param(["null", "string"], None, "None", id="a null union: a variant null"),
    ],
)  # fmt: skip
def test_what_spark_cannot_decode_decodes_too(spark, schema, value, expected) -> None:
    variant, error = zync_decodes(spark, schema, encoded(schema, value))
    assert error is None
    assert repr(variant.toPython()) == expected


@pytest.mark.parametrize(
    ("message", "schema", "why"),
    [
        pytest.param(encoded(ROW, row(1))[:-3], ROW, "the message ends too early", id="truncated"),
        pytest.param(frame(7, b""), ROW, "the message ends too early", id="header only"),
        pytest.param(encoded(ROW, row(1)) + b"\0\0", ROW, "2 bytes are left after the value",
                     id="bytes left over"),
        pytest.param(frame(7, b"\x08"), ["null", "long"], "union branch 4 does not exist (there are 2)",
                     id="union branch out of range"),
        pytest.param(encoded(WIDE, {"d": Decimal("1" * 40 + ".00")}), WIDE,
                     "decimal 1111111111111111111111111111111111111111.00 has more digits than 38",
                     id="decimal beyond a variant's 38 digits"),
        pytest.param(encoded(WIDE, {"d": Decimal("1.50")}), {**WIDE, "fields": [
            {"name": "d", "type": money(2, 2)}]}, "decimal 1.50 has more digits than 2",
                     id="decimal beyond the schema's precision"),
    ],
)  # fmt: skip
def test_bytes_that_do_not_decode_say_why(spark, message, schema, why) -> None:
    assert zync_decodes(spark, schema, message) == (None, why)


def test_every_message_is_decoded_or_a_dead_letter_with_its_reason(
    spark, registry: Registry, topic: str
) -> None:
    ids = {name: registry.register(f"{topic}-{name}", s) for name, s in
           {"row": ROW, "linked": LINKED, "key": "string"}.items()}  # fmt: skip
    messages = [
        (encoded("string", "k", ids["key"]), encoded(ROW, row(2), ids["row"])),
        (None, encoded(ROW, row(3), ids["row"])[:-2]),
        (None, encoded(LINKED, {"v": 1, "next": None}, ids["linked"])),
        (encoded("string", "k", ids["key"]), frame(ids["row"], b"\x02")),
        (None, b"text"),
        (None, frame(987654, b"")),
        (b"", None),
        (None, b""),
    ]
    rows = decoded_envelopes(spark, registry, messages)
    assert [r.key.toJson() if r.key else None for r in rows] == ['"k"', *[None] * 7]
    [(_, by_spark)] = both_decoders(spark, ROW, [encoded(ROW, row(2))])
    assert repr(rows[0].value.toPython()) == by_spark[0]
    assert rows[2].value.toJson() == '{"next":null,"v":1}'
    assert rows[6].value is None and rows[6].dead_letter is None  # empty key, tombstone
    row_id = ids["row"]
    assert [(r.dead_letter.reason if r.dead_letter else None) for r in rows] == [
        None,
        f"value corrupt-payload: does not decode with schema id {row_id}: the message ends too early",
        None,
        f"value corrupt-payload: does not decode with schema id {row_id}: the message ends too early",
        "value not-confluent-avro: no Confluent Avro header",
        "value unknown-schema-id: schema id 987654",
        None,
        # zero bytes are no Avro value: as a tombstone they would delete the key downstream
        "value not-confluent-avro: zero bytes, neither a tombstone nor Confluent Avro",
    ]
    assert bytes(rows[7].dead_letter.value) == b""
    assert bytes(rows[3].dead_letter.key) == messages[3][0]
    assert bytes(rows[3].dead_letter.value) == messages[3][1]


def test_a_batch_without_one_known_schema_is_all_dead_letters(spark, registry: Registry) -> None:
    rows = decoded_envelopes(spark, registry, [(None, frame(987654, b"\x02")), (None, b"x")])
    assert [(r.value, r.dead_letter.reason) for r in rows] == [
        (None, "value unknown-schema-id: schema id 987654"),
        (None, "value not-confluent-avro: no Confluent Avro header"),
    ]
