"""Output shapes: variant type strings → stable Avro schemas (pure functions)."""

import pytest

from zync_assets.core.errors import ZyncError
from zync_assets.tokafka.shapes import (
    Array,
    Decimal,
    Object,
    Scalar,
    from_avro,
    merge,
    parse_type,
    shape_of,
    to_avro,
    value_subject,
)


def test_variant_types_are_normalised_to_stable_ones() -> None:
    parsed = parse_type(
        "OBJECT<ID: BIGINT, d: DECIMAL(3,1), f: FLOAT, `odd name`: VOID, a: ARRAY<INT>>"
    )
    assert parsed == Object(
        (
            ("ID", Scalar("BIGINT")),
            ("d", Decimal(1)),
            ("f", Scalar("DOUBLE")),
            ("odd name", Scalar("VOID")),
            ("a", Array(Scalar("BIGINT"))),
        )
    )


def test_mixed_array_elements_merge_as_one_element_type() -> None:
    # zync_variant_type lists an array's distinct element types as ARRAY<A | B>
    parsed = parse_type("OBJECT<xs: ARRAY<BIGINT | DECIMAL(38,2) | VOID>>")
    assert parsed == Object((("xs", Array(Decimal(2))),))
    with pytest.raises(ZyncError, match=r"field n\.xs\[\] holds BIGINT and STRING values"):
        parse_type("OBJECT<n: OBJECT<xs: ARRAY<BIGINT | STRING>>>")


def test_shape_is_the_sorted_top_level_names() -> None:
    assert shape_of(parse_type("OBJECT<b: BIGINT, a: OBJECT<z: STRING>>")) == "a,b"
    assert shape_of(parse_type("OBJECT<>")) == ""
    assert shape_of(parse_type("STRING")) is None


def test_types_only_widen() -> None:
    old = parse_type("OBJECT<n: BIGINT, s: VOID, d: DECIMAL(4,2)>")
    new = parse_type("OBJECT<n: DECIMAL(5,3), s: STRING, d: DECIMAL(2,1), extra: DATE>")
    assert merge(old, new) == Object(
        (
            ("n", Decimal(3)),
            ("s", Scalar("STRING")),
            ("d", Decimal(2)),
            ("extra", Scalar("DATE")),
        )
    )
    assert merge(parse_type("OBJECT<x: DECIMAL(3,1)>"), parse_type("OBJECT<x: DOUBLE>")) == Object(
        (("x", Scalar("DOUBLE")),)
    )
    with pytest.raises(ZyncError, match="field x holds STRING and BIGINT values"):
        merge(parse_type("OBJECT<x: STRING>"), parse_type("OBJECT<x: BIGINT>"))


def test_avro_schema_has_optional_fields_and_round_trips() -> None:
    kind = parse_type("OBJECT<ID: BIGINT, at: TIMESTAMP, d: DECIMAL(9,2), n: OBJECT<x: STRING>>")
    schema = to_avro(kind, "Value_1", "zync.T")
    assert schema["fields"][0] == {"name": "ID", "type": ["null", "long"], "default": None}
    # A JDBC sink makes a timestamptz column of Debezium's ZonedTimestamp (a bare
    # timestamp-micros would reach it as int64, a bigint column).
    assert schema["fields"][1]["type"][1] == {
        "type": "string",
        "connect.name": "io.debezium.time.ZonedTimestamp",
    }
    assert schema["fields"][2]["type"][1]["scale"] == 2
    assert schema["fields"][3]["type"][1]["name"] == "Value_1_n"
    assert from_avro(schema) == kind


def test_names_avro_cannot_hold_and_mixed_types_are_refused_with_the_path() -> None:
    with pytest.raises(ZyncError, match=r"field n\.bad-name is not a valid Avro name"):
        to_avro(parse_type("OBJECT<n: OBJECT<`bad-name`: BIGINT>>"), "V", "ns")
    with pytest.raises(ZyncError, match="field v has type VARIANT"):
        to_avro(parse_type("OBJECT<v: VARIANT>"), "V", "ns")


def test_one_subject_per_field_set_whatever_the_types() -> None:
    a = parse_type("OBJECT<ID: BIGINT, s: VOID>")
    b = parse_type("OBJECT<ID: DECIMAL(3,1), s: STRING>")
    assert value_subject("T", a) == value_subject("T", b)
    assert value_subject("T", a) != value_subject("T", parse_type("OBJECT<ID: BIGINT>"))
    assert value_subject("T", Scalar("STRING")) == "T-value"
