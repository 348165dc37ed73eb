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
