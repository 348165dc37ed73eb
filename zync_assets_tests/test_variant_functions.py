"""zync's own Spark functions (jvm/src), called from SQL as to-kafka calls them."""

from __future__ import annotations

import json

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException

from zync_assets.tokafka.per_topic import ENCODER_ERROR

pytestmark = pytest.mark.integration


def variant_type(spark, sql_value: str) -> str | None:
    return spark.sql(f"SELECT zync_variant_type({sql_value}) AS t").first().t


def test_variant_type_normalises_each_value_like_the_schemas_it_feeds(spark) -> None:
    assert variant_type(spark, 'parse_json(\'{"b": 1, "a": 1.50, "s": "x"}\')') == (
        "OBJECT<`a`: DECIMAL(38,2), `b`: BIGINT, `s`: STRING>"
    )
    assert variant_type(spark, "parse_json('[1, 2.5e0, null, 3]')") == (
        "ARRAY<BIGINT | DOUBLE | VOID>"
    )
    assert variant_type(spark, "to_variant_object(named_struct('d', DATE'2026-01-02', "
                               "'`odd`', X'01', 'f', CAST(1 AS FLOAT)))") == (
        "OBJECT<```odd```: BINARY, `d`: DATE, `f`: DOUBLE>"  # the variant's sorted field order
    )  # fmt: skip
    assert variant_type(spark, "parse_json('null')") is None  # a tombstone
    assert variant_type(spark, "CAST(NULL AS VARIANT)") is None


def encode(spark, sql_value: str, schemas: dict) -> bytes | None:
    literal = "X'" + json.dumps(schemas).encode().hex() + "'"
    return spark.sql(f"SELECT zync_variant_avro({sql_value}, {literal}) AS b").first().b


RECORD = {"type": "record", "name": "V", "fields": [
    {"name": "a", "type": ["null", "long"], "default": None},
    {"name": "d", "type": ["null", {"type": "bytes", "logicalType": "decimal",
                                    "precision": 38, "scale": 1}], "default": None},
]}  # fmt: skip


def test_variant_avro_frames_the_body_with_the_schema_id(spark) -> None:
    schemas = {"objects": {"a,d": [258, json.dumps(RECORD)]}, "other": None}
    encoded = encode(spark, 'parse_json(\'{"a": -1, "d": 2.5}\')', schemas)
    # magic 0, id 258 big-endian, then: branch 1, zigzag(-1)=1, branch 1, bytes(25)
    assert encoded == bytes([0, 0, 0, 1, 2, 2, 1, 2, 2, 25])
    assert encode(spark, "parse_json('null')", schemas) is None


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ('{"a": 1, "d": 2.5, "x": 0}', "no schema was registered for a value of shape a,d,x"),
        ('{"a": 1, "d": 2.55}', "field d holds a DECIMAL value where its Avro schema has "
                                "decimal(38,1), which cannot hold 2.55 exactly"),
        ('{"a": "one", "d": 1}', "field a holds a STRING value where its Avro schema has long"),
    ],
)  # fmt: skip
def test_variant_avro_refuses_what_the_schema_cannot_hold_exactly(
    spark, value: str, reason: str
) -> None:
    schemas = {"objects": {"a,d": [1, json.dumps(RECORD)], "a,d,x": [2, json.dumps(RECORD)]}}
    if "shape a,d,x" in reason:
        del schemas["objects"]["a,d,x"]
    with pytest.raises((PySparkException, Py4JJavaError)) as failure:
        encode(spark, f"parse_json('{value}')", schemas)
    refusal = ENCODER_ERROR.search(str(failure.value))
    assert refusal is not None and refusal.group(1) == reason
