"""What Debezium's events mean beyond their shape, shared by the stages that read them.

TOAST: with PostgreSQL's default replica identity an UPDATE that leaves a TOASTed column
(a large text, bytea, json…) unchanged does not carry its value; Debezium then writes the
placeholder `__debezium_unavailable_value` (its `unavailable.value.placeholder`) in its
place. The value is unchanged, not that string: a reader must keep the previous one.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

UNAVAILABLE_PLACEHOLDER = "__debezium_unavailable_value"


def is_unavailable(variant: Column, path: str) -> Column:
    """Whether the field at `path` of a VARIANT row image is Debezium's placeholder: the
    string, or for a bytea column its bytes."""
    text = F.try_variant_get(variant, path, "string")
    data = F.try_variant_get(variant, path, "binary")
    placeholder = F.lit(UNAVAILABLE_PLACEHOLDER)
    return F.coalesce((text == placeholder) | (data == placeholder.cast("binary")), F.lit(False))
