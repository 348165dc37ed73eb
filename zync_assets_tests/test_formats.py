"""Wire formats per topic: Kafka Connect JSON in ingest and to-kafka, and keys in a
format of their own (string, bytes, JSON) beside Avro values."""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pytest

from zync_assets.codec.formats import WireFormat
from zync_assets.core.errors import ZyncError
from zync_assets.ingest.ingest import ingest
from zync_assets.kafka.registry import Registry
from zync_assets_tests.conftest import Stack, produce_bytes, produce_json, read_topic
from zync_assets_tests.test_ingest import raw_rows
from zync_assets_tests.test_tokafka import sync

pytestmark = pytest.mark.integration

# What Kafka Connect's JsonConverter (schemas.enable=true) writes for a Debezium update.
ROW_SCHEMA = {
    "type": "struct", "optional": True, "name": "shop.public.invoices.Value",
    "fields": [
        {"field": "id", "type": "int64", "optional": False},
        {"field": "amount", "type": "bytes", "optional": False, "version": 1,
         "name": "org.apache.kafka.connect.data.Decimal",
         "parameters": {"scale": "2", "connect.decimal.precision": "10"}},
        {"field": "created_at", "type": "string", "optional": False, "version": 1,
         "name": "io.debezium.time.ZonedTimestamp"},
        {"field": "local", "type": "int64", "optional": True, "version": 1,
         "name": "io.debezium.time.MicroTimestamp"},
        {"field": "day", "type": "int32", "optional": True, "version": 1,
         "name": "io.debezium.time.Date"},
        {"field": "at_time", "type": "int64", "optional": True, "version": 1,
         "name": "io.debezium.time.MicroTime"},
        {"field": "doc", "type": "string", "optional": True, "version": 1,
         "name": "io.debezium.data.Json"},
        {"field": "raw", "type": "bytes", "optional": True},
        {"field": "ratio", "type": "float", "optional": True},  # a PostgreSQL real
        {"field": "score", "type": "double", "optional": True},  # a double precision
    ],
}  # fmt: skip
ENVELOPE_SCHEMA = {
    "type": "struct", "name": "shop.public.invoices.Envelope", "optional": False,
    "fields": [
        {**ROW_SCHEMA, "field": "before"},
        {**ROW_SCHEMA, "field": "after"},
        {"field": "op", "type": "string", "optional": False},
    ],
}  # fmt: skip
AFTER = {
    "id": 7,
    "amount": base64.b64encode((1234).to_bytes(2, "big", signed=True)).decode(),  # 12.34
    "created_at": "2026-11-25T04:20:04.620840Z",
    "local": 1_795_341_600_123_456,
    "day": 20_417,
    "at_time": 45_296_789_000,  # 12:34:56.789
    "doc": '{"tags": ["a", "b"], "n": 1}',
    "raw": base64.b64encode(b"\x00\xff").decode(),
    "ratio": 1.5,
    "score": 0.1,
}
KEY = {"schema": {"type": "struct", "fields": [{"field": "id", "type": "int64"}]},
       "payload": {"id": 7}}  # fmt: skip


def connect_json(payload: dict) -> bytes:
    return json.dumps({"schema": ENVELOPE_SCHEMA, "payload": payload}).encode()


def test_connect_json_lands_with_debeziums_types_as_real_values(
    spark, stack: Stack, registry: Registry, topic: str, lake: Path
) -> None:
    value = connect_json({"before": None, "after": AFTER, "op": "u"})
    produce_bytes(stack, topic, [(json.dumps(KEY).encode(), value)])
    result = ingest(
        spark, "J", [topic], stack.kafka, registry, formats={topic: WireFormat("json", "json")}
    )
    assert (result.rows, result.dead_letters) == (1, 0)
    row = spark.read.format("delta").load(str(lake / "J")).selectExpr(
        "key:id::bigint AS id", "value:op::string AS op",
        "value:after:amount::decimal(10,2) AS amount", "value:after:created_at::timestamp AS at",
        "value:after:local::timestamp_ntz AS local", "value:after:day::date AS day",
        "value:after:at_time::string AS t", "value:after:doc:tags[1]::string AS tag",
        "value:after:raw::binary AS raw", "value:before::string AS before",
        "schema_of_variant(value:after:ratio) AS ratio_type", "value:after:ratio::float AS ratio",
        "schema_of_variant(value:after:score) AS score_type", "value:after:score::double AS score",
    ).first()  # fmt: skip
    assert row.asDict() == {
        "id": 7, "op": "u", "amount": Decimal("12.34"),
        "at": dt.datetime(2026, 11, 25, 4, 20, 4, 620840),  # Spark's session zone is UTC
        "local": dt.datetime(2026, 11, 22, 10, 0, 0, 123456),
        "day": dt.date(2025, 11, 25), "t": "12:34:56.789", "tag": "b", "raw": bytearray(b"\x00\xff"),
        "before": None,  # a null field stays null (a variant null)
        "ratio_type": "FLOAT", "ratio": 1.5, "score_type": "DOUBLE", "score": 0.1,
    }  # fmt: skip


def test_a_string_key_beside_an_avro_value_is_not_a_dead_letter(
    spark, stack: Stack, registry: Registry, topic: str, lake: Path
) -> None:
    produce_json(stack, topic, [({"k": 1}, {"op": "c", "n": 1})])  # a framed Avro value
    value = read_topic(stack, topic, decode=False)[0].value
    produce_bytes(stack, topic, [(b"order-42", value), (b"\x00\x01raw", value)])
    formats = {topic: WireFormat("avro", "string")}
    result = ingest(spark, "S", [topic], stack.kafka, registry, formats=formats)
    rows = raw_rows(spark, "S", "kafka.offset", "key::string", "value:n::int", "dead_letter")
    assert result.dead_letters == 0
    # The first message's Avro key, read as text, is its bytes: nothing is refused or lost.
    assert [(o, n, dead) for o, _k, n, dead in rows] == [(0, 1, None), (1, 1, None), (2, 1, None)]
    assert rows[1][1] == "order-42"
    as_bytes = ingest(spark, "B", [topic], stack.kafka, registry,
                      formats={topic: WireFormat("avro", "bytes")})  # fmt: skip
    assert as_bytes.dead_letters == 0
    keys = raw_rows(spark, "B", "kafka.offset", "key::binary")
    assert keys[2][1] == bytearray(b"\x00\x01raw")


def test_bad_json_goes_to_the_dead_letters_with_its_bytes_and_reason(
    spark, stack: Stack, registry: Registry, topic: str, lake: Path
) -> None:
    good = connect_json({"before": None, "after": AFTER, "op": "c"})
    wrong_type = connect_json({"before": None, "after": {**AFTER, "id": "seven"}, "op": "c"})
    produce_bytes(stack, topic, [(b'{"id": 1}', good), (b'{"id": 2}', b"{not json"),
                                 (b'{"id": 3}', wrong_type), (b'{"id": 4}', None)])  # fmt: skip
    result = ingest(spark, "D", [topic], stack.kafka, registry, formats={topic: WireFormat("json")})
    assert (result.rows, result.dead_letters) == (2, 2)  # the tombstone is a row, not dead
    dead = raw_rows(spark, "D", "kafka.offset", "dead_letter.reason", "dead_letter.value")
    assert dead[0][1:] == (None, None) and dead[3][1:] == (None, None)
    assert dead[1][1].startswith("value corrupt-payload: not JSON: Unexpected character")
    assert dead[1][2] == bytearray(b"{not json")
    assert (
        dead[2][1]
        == 'value corrupt-payload: field after.id holds "seven" where its schema has an integer'
    )


def test_to_kafka_writes_connect_json_that_ingest_reads_back_the_same(
    spark, stack: Stack, registry: Registry, topic: str, lake: Path
) -> None:
    spark.sql(f"""
        SELECT 'output' AS kind,
          named_struct('topic', '{topic}', 'partition', 0, 'offset', 0L,
                       'timestamp', current_timestamp()) AS kafka,
          to_variant_object(named_struct('id', 7)) AS key,
          to_variant_object(named_struct(
            'amount', CAST(-12.30 AS DECIMAL(12,2)), 'day', DATE'2026-11-22',
            'at', TIMESTAMP'2026-11-22 10:00:00.123456', 'local', TIMESTAMP_NTZ'2026-11-22 10:00:00',
            'raw', X'00FF', 'text', 'zürich', 'none', CAST(NULL AS STRING), 'score', 0.1D,
            'nested', named_struct('a', 1, 'b', array(1, NULL, 3)))) AS value
    """).write.format("delta").mode("append").partitionBy("kind").save(
        str(lake / "JsonOut")
    )  # fmt: skip
    assert sync(spark, stack, "JsonOut", topic, wire_format="json").sent == 1
    (record,) = read_topic(stack, topic, decode=False)
    assert record.key is not None and record.value is not None, record
    key, value = json.loads(record.key), json.loads(record.value)
    assert key["payload"] == {"id": 7}
    assert (
        value["payload"]["amount"]
        == base64.b64encode((-1230).to_bytes(2, "big", signed=True)).decode()
    )
    assert value["payload"]["at"] == "2026-11-22T10:00:00.123456Z"
    fields = {f["field"]: f for f in value["schema"]["fields"]}
    assert fields["amount"]["name"] == "org.apache.kafka.connect.data.Decimal"
    assert fields["amount"]["parameters"] == {"scale": "2"}
    assert fields["at"]["name"] == "io.debezium.time.ZonedTimestamp"
    assert (fields["score"]["type"], value["payload"]["score"]) == ("double", 0.1)  # Connect's
    ingest(spark, "Back", [topic], stack.kafka, registry, formats={topic: WireFormat("json")})
    back = (
        spark.read.format("delta").load(str(lake / "Back")).selectExpr("value::string").first()[0]
    )
    sent = (
        spark.read.format("delta")
        .load(str(lake / "JsonOut"))
        .selectExpr("value::string")
        .first()[0]
    )
    assert json.loads(back) == json.loads(sent)  # every type made the round trip


def test_formats_are_checked_with_a_clear_error(tmp_path: Path) -> None:
    from zync_assets.specs.model import load_spec

    with pytest.raises(
        ZyncError, match="unknown key format 'text': use one of avro, json, string, bytes"
    ):
        WireFormat("avro", "text")
    spec = tmp_path / "s.yaml"
    spec.write_text("inputs: [{topic: t, pool: P, format: protobuf}]\n")
    with pytest.raises(ZyncError, match=r"inputs\[1\]: unknown value format 'protobuf'"):
        load_spec(spec)
    spec.write_text(
        "inputs: [{topic: t, pool: P}]\noutputs: [{topic: o, pool: S, key-format: string}]\n"
    )
    with pytest.raises(ZyncError, match="to-kafka writes keys in the value's format"):
        load_spec(spec)
