"""Schema inference for `zync produce` without an .avsc file."""

from __future__ import annotations

import pytest

from zync_assets.codec.infer import InferenceError, infer_schema, record_name


def fields(schema: dict) -> dict:
    return {f["name"]: f for f in schema["fields"]}


def test_fields_missing_or_null_somewhere_become_nullable_with_default() -> None:
    schema = infer_schema([(1, {"a": 1, "b": "x"}), (2, {"a": None}), (3, {"a": 2})], "R", "value")
    by_name = fields(schema)
    assert by_name["a"] == {"name": "a", "type": ["null", "long"], "default": None}
    assert by_name["b"] == {"name": "b", "type": ["null", "string"], "default": None}


def test_ints_and_floats_widen_to_double() -> None:
    schema = infer_schema([(1, {"n": 1}), (2, {"n": 2.5})], "R", "value")
    assert fields(schema)["n"]["type"] == "double"


def test_nested_records_and_arrays_get_their_own_names() -> None:
    schema = infer_schema([(1, {"after": {"id": 1}, "tags": [{"t": "a"}]})], "T_value", "value")
    after = fields(schema)["after"]["type"]
    assert after["name"] == "T_value_after" and fields(after)["id"]["type"] == "long"
    assert fields(schema)["tags"]["type"]["items"]["name"] == "T_value_tags_item"


def test_conflicting_types_name_the_field_and_line() -> None:
    with pytest.raises(InferenceError, match=r"line 2: field value\.a holds both long and string"):
        infer_schema([(1, {"a": 1}), (2, {"a": "x"})], "R", "value")


def test_invalid_avro_field_names_are_refused() -> None:
    with pytest.raises(InferenceError, match="not a valid Avro name"):
        infer_schema([(4, {"bad-name": 1})], "R", "value")


def test_only_tombstones_need_no_schema() -> None:
    assert infer_schema([(1, None)], "R", "value") is None


def test_record_names_are_valid_avro_names() -> None:
    assert record_name("db.public.orders", "value") == "db_public_orders_value"
    assert record_name("9lives", "key") == "_9lives_key"
