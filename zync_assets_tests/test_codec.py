"""Avro ⇄ JSON: conforming, framing, decoding and rendering, without a broker."""

from __future__ import annotations

import json
from typing import Any

import pytest

from zync_assets.codec.avro import CORRUPT, NOT_FRAMED, UNKNOWN_SCHEMA, DecodeError, Decoder, encode
from zync_assets.codec.conform import Conformer, SchemaMismatch
from zync_assets.codec.render import to_json_value
from zync_assets.codec.wire import FramingError, frame, unframe

EVERY_TYPE = {
    "type": "record",
    "name": "Everything",
    "namespace": "test",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "small", "type": "int"},
        {"name": "ratio", "type": "float"},
        {"name": "score", "type": "double"},
        {"name": "flag", "type": "boolean"},
        {"name": "name", "type": "string"},
        {"name": "nothing", "type": "null"},
        {"name": "blob", "type": "bytes"},
        {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 4}},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "maybe", "type": ["null", "string"], "default": None},
        {"name": "either", "type": ["long", "string"]},
        {
            "name": "nested",
            "type": {
                "type": "record",
                "name": "Nested",
                "fields": [{"name": "inner", "type": ["null", "Color"]}],
            },
        },
        {
            "name": "amount",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
        },
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "clock", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
    ],
}

EVERY_VALUE = {
    "id": 9007199254740993,
    "small": -7,
    "ratio": 0.5,
    "score": 1e-300,
    "flag": True,
    "name": "héllo \u2603",
    "nothing": None,
    "blob": "AAEC/w==",
    "hash": "3q2+7w==",
    "color": "GREEN",
    "tags": ["a", "b"],
    "attrs": {"x": 1, "y": -2},
    "maybe": None,
    "either": "text",
    "nested": {"inner": "RED"},
    "amount": "-12345678.90",
    "day": "2024-02-29",
    "at_ms": "2024-02-29T23:59:59.123000Z",
    "at_us": "2024-02-29T23:59:59.123456Z",
    "local": "2024-02-29T12:00:00.000001",
    "clock": "12:34:56.789000",
    "uid": "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
}


def round_trip(schema: dict, value: object) -> Any:
    conformer = Conformer(schema)
    message = encode(42, conformer.parsed, conformer.conform(value))
    return to_json_value(Decoder({42: schema}.__getitem__).decode(message))


def test_every_avro_type_round_trips_through_its_json_rendering() -> None:
    assert round_trip(EVERY_TYPE, EVERY_VALUE) == EVERY_VALUE


def test_rendering_is_plain_json() -> None:
    """Every leaf is a JSON type (no Decimal, datetime, bytes or UUID left for a caller's
    json.dumps to refuse), and the rendering reads back from its JSON text unchanged."""
    rendered = round_trip(EVERY_TYPE, EVERY_VALUE)
    assert not_json(rendered) == []
    assert json.loads(json.dumps(rendered)) == rendered


def not_json(value: object, path: str = "$") -> list[str]:
    """Where `value` holds something other than JSON's types."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in not_json(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in not_json(v, f"{path}[{i}]")]
    if value is None or type(value) in (str, int, float, bool):
        return []
    return [f"{path}: {type(value).__name__}"]


def test_union_takes_the_first_branch_that_fits() -> None:
    value = dict(EVERY_VALUE, either=12, maybe="set")
    assert round_trip(EVERY_TYPE, value) == value


def test_timestamps_with_offsets_are_rendered_in_utc() -> None:
    value = dict(EVERY_VALUE, at_us="2024-03-01T01:00:00.5+01:00")
    assert round_trip(EVERY_TYPE, value)["at_us"] == "2024-03-01T00:00:00.500000Z"


@pytest.mark.parametrize(
    ("field", "bad", "path"),
    [
        ("small", 2**31, "value.small"),
        ("flag", "yes", "value.flag"),
        ("amount", "1.234", "value.amount"),
        ("amount", "123456789012", "value.amount"),
        ("color", "BLUE", "value.color"),
        ("day", "29/02/2024", "value.day"),
        ("blob", "not base64!", "value.blob"),
        ("uid", "nope", "value.uid"),
        ("hash", "AAE=", "value.hash"),
    ],
)
def test_a_value_that_does_not_fit_names_its_field(field: str, bad: object, path: str) -> None:
    with pytest.raises(SchemaMismatch) as caught:
        Conformer(EVERY_TYPE).conform(dict(EVERY_VALUE, **{field: bad}))
    assert caught.value.path == path


def test_missing_and_unknown_fields_are_named() -> None:
    missing = {k: v for k, v in EVERY_VALUE.items() if k != "name"}
    with pytest.raises(SchemaMismatch, match=r"value\.name: required field is missing"):
        Conformer(EVERY_TYPE).conform(missing)
    with pytest.raises(SchemaMismatch, match=r"value\.extra: field is not in the schema"):
        Conformer(EVERY_TYPE).conform(dict(EVERY_VALUE, extra=1))


def test_nested_paths_reach_into_arrays_and_records() -> None:
    with pytest.raises(SchemaMismatch) as caught:
        Conformer(EVERY_TYPE).conform(dict(EVERY_VALUE, tags=["ok", 3]))
    assert caught.value.path == "value.tags[1]"


def test_frame_and_unframe() -> None:
    schema_id, body = unframe(frame(7, b"xyz"))
    assert (schema_id, bytes(body)) == (7, b"xyz")
    with pytest.raises(FramingError):
        unframe(b"\x00\x00")
    with pytest.raises(FramingError, match="magic byte"):
        unframe(b"\x01\x00\x00\x00\x07xyz")


def test_decode_errors_carry_a_stable_reason() -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "s", "type": "string"}]}
    decoder = Decoder({1: schema}.__getitem__)
    assert decoder.decode(b"") is None and decoder.decode(None) is None
    cases = {
        NOT_FRAMED: b'{"json": true}',
        UNKNOWN_SCHEMA: frame(99, b"\x02a"),
        CORRUPT: frame(1, b"\x40a"),  # string of length 32, one byte present
    }
    for reason, message in cases.items():
        with pytest.raises(DecodeError) as caught:
            decoder.decode(message)
        assert caught.value.reason == reason
    with pytest.raises(DecodeError, match="bytes after the record"):
        decoder.decode(frame(1, b"\x02aEXTRA"))
