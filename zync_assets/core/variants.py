"""Turning Spark values into VARIANT, the type of every pool's `key` and `value`."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, MapType, NullType, StructType, VariantType


def as_variant(frame: DataFrame, name: str) -> Column:
    """Column `name` of `frame` as a VARIANT (structs and maps become objects)."""
    data_type = frame.schema[name].dataType
    if isinstance(data_type, VariantType):
        return F.col(name)
    if isinstance(data_type, NullType):
        return F.lit(None).cast("variant")
    if isinstance(data_type, StructType | MapType | ArrayType):
        return F.to_variant_object(F.col(name))
    return F.col(name).cast("variant")


def split_fields(object_type: str) -> list[tuple[str, str]]:
    """`OBJECT<a: BIGINT, b: OBJECT<c: STRING>>` → [(a, BIGINT), (b, OBJECT<c: STRING>)]."""
    text = object_type.strip()
    if not (text.startswith("OBJECT<") and text.endswith(">")):
        return []
    body, fields, depth, start = text[7:-1], [], 0, 0
    parts = []
    for i, char in enumerate(body):
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    if body.strip():
        parts.append(body[start:])
    for part in parts:
        name, _, kind = part.partition(":")
        fields.append((name.strip().strip("`"), kind.strip()))
    return fields
