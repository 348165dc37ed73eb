"""A lake table's columns: which fields of the row images, and their types.

A pass finds the top-level fields its events' row images hold (`schema_of_variant_agg`)
and types each one from the source's Avro schema where there is one (declared.py), else
from the VARIANT values themselves (decimals then as DECIMAL(38,18): a VARIANT drops a
decimal's declared scale). Then it merges them with the table's columns:

- a field the table lacks becomes a new column once it holds a non-null value, or at
  once when the source's schema declares it (a column NULL in every row so far exists,
  typed, as it does in the source);
- integers are BIGINT; nested objects, arrays and mixed types VARIANT;
- FLOAT widens to DOUBLE, a decimal to a wider one of the same scale; any other change
  (a decimal's scale, a number becoming a string) is refused with one line naming the
  column, before anything is written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from zync_assets.core.debezium import is_unavailable
from zync_assets.core.errors import ZyncError
from zync_assets.core.variants import split_fields
from zync_assets.specs.tables import COLUMN_NAME, TableDef
from zync_assets.tables.changes import ROW

VARIANT = "variant"
# The data columns whose value the event left out (Debezium's TOAST placeholder): fold.py
# keeps their previous value.
UNAVAILABLE = "__UNAVAILABLE"
_DECIMAL = re.compile(r"^DECIMAL\((\d+),\s*(\d+)\)$")
_SCALARS = {
    "TINYINT": "bigint", "SMALLINT": "bigint", "INT": "bigint", "BIGINT": "bigint",
    "FLOAT": "float", "DOUBLE": "double", "BOOLEAN": "boolean", "STRING": "string",
    "BINARY": "binary", "DATE": "date", "TIMESTAMP": "timestamp",
    "TIMESTAMP_NTZ": "timestamp_ntz", "VARIANT": VARIANT,
}  # fmt: skip
_WIDENS = {("float", "double")}
UNDECLARED_DECIMAL = "decimal(38,18)"


class ColumnTypeError(ZyncError):
    pass


def column_type(variant_type: str) -> str | None:
    """The table column type for a field whose values have `variant_type` (None: only nulls)."""
    if variant_type == "VOID":
        return None
    if variant_type.startswith(("OBJECT<", "ARRAY<")):
        return VARIANT
    if _DECIMAL.match(variant_type):
        return UNDECLARED_DECIMAL
    return _SCALARS.get(variant_type, VARIANT)


def merged_type(table: str, column: str, current: str | None, seen: str | None) -> str | None:
    """The column's type once the pass's values of type `seen` join those of type `current`."""
    if seen is None or seen == current:
        return current
    if current is None:
        return seen
    if (current, seen) in _WIDENS or _wider_decimal(current, seen):
        return seen  # the column widens
    if (seen, current) in _WIDENS or _wider_decimal(seen, current):
        return current  # the values fit as they are
    raise ColumnTypeError(
        f"table {table}: column {column} is {current} but new events hold {seen}; "
        "it cannot widen to that: nothing was written (leave the column out with "
        f"except-column-list, then run `zync table rebuild SPEC {table}`)"
    )


def _wider_decimal(narrow: str, wide: str) -> bool:
    """decimal(p1,s) → decimal(p2,s) with p2 > p1: a widening Delta applies in place."""
    a, b = _LOWER_DECIMAL.match(narrow), _LOWER_DECIMAL.match(wide)
    return bool(a and b and a.group(2) == b.group(2) and int(b.group(1)) > int(a.group(1)))


_LOWER_DECIMAL = re.compile(r"^decimal\((\d+),(\d+)\)$")


@dataclass(frozen=True)
class Columns:
    """A table's data columns (keys first) and their types, in table order."""

    types: dict[str, str]
    keys: tuple[str, ...]
    # JSON columns (declared.Declared.documents): their variant null is the document null.
    documents: frozenset[str] = frozenset()

    def typed(self, skip: tuple[str, ...] = ()) -> list[Column]:
        """The columns (but `skip`), read from the event's row image (keys also from its
        Kafka key)."""
        return [
            _typed(name, kind, name in self.keys, name in self.documents)
            for name, kind in self.types.items() if name not in skip
        ]  # fmt: skip

    def unavailable(self) -> Column:
        """The data columns whose value in the event's row image is Debezium's placeholder
        for an unchanged TOASTed value (array<string>; empty for most events)."""
        found = [F.when(is_unavailable(F.col(ROW), f"$.{n}"), F.lit(n)) for n in self.data()]
        names = F.array_compact(F.array(*found)) if found else F.array()
        return names.cast("array<string>").alias(UNAVAILABLE)

    def data(self) -> list[str]:
        """The columns that are not keys."""
        return [name for name in self.types if name not in self.keys]


def _typed(name: str, kind: str, key: bool, document: bool = False) -> Column:
    return F.expr(typed_sql(name, kind, key, document)).alias(name)


def typed_sql(name: str, kind: str, key: bool, document: bool = False) -> str:
    """Column `name` of type `kind` read from an event's row image (`__ROW`; a key column
    also from its Kafka key, `__KEY`), as SQL."""

    # Ingest stored each value as the type it stands for (a Debezium Date is a DATE), so a
    # plain cast reads it; a value that does not fit fails the pass (apply.py names it).
    def read(variant: str) -> str:
        field = f"variant_get({variant}, '$.{name}')"
        if kind == VARIANT and document:  # SQL NULL is an absent field, so NULL here; the
            return field  # document `null` a variant null: `WHERE c IS NULL` tells them apart
        if kind == VARIANT:  # a variant null is SQL NULL: `WHERE c IS NULL` finds it
            return f"CASE WHEN is_variant_null({field}) THEN NULL ELSE {field} END"
        return f"variant_get({variant}, '$.{name}', '{kind}')"

    value = read(ROW)
    if key and kind != VARIANT:  # a tombstone has no row image: its key is in the Kafka key
        value = f"coalesce({value}, {read('__KEY')})"
    return value


def variant_schemas() -> list[Column]:
    """The aggregates `observed` reads: the row images' and the Kafka keys' schemas (to
    compute in the same Spark job as other aggregates of the events)."""
    return [
        F.expr(f"schema_of_variant_agg({ROW})").alias("__row_schema"),
        F.expr("schema_of_variant_agg(__KEY)").alias("__key_schema"),
    ]


def observed(found: dict, keys: tuple[str, ...]) -> dict[str, str | None]:
    """Each top-level field of the events' row images → its column type (None: only nulls);
    key columns also from the Kafka keys (a tombstone has no row image). `found`: the
    values of `variant_schemas()`."""
    types: dict[str, str | None] = {}
    for name, kind in split_fields(found.get("__key_schema") or ""):
        if name in keys:
            types[name] = column_type(kind)
    for name, kind in split_fields(found.get("__row_schema") or ""):
        seen = column_type(kind)
        types[name] = seen if seen is not None else types.get(name)
    return types


def plan_columns(
    table: TableDef,
    current: dict[str, str],
    seen: dict[str, str | None],
    declared: dict[str, str] | None = None,
    documents: frozenset[str] = frozenset(),
) -> Columns:
    """The table's columns after this pass: its `current` ones (name → type), widened where
    the events' types ask for it, and the new fields the table keeps. `declared`: the
    types the source's schemas give (they win over the values' own); `documents`: its
    JSON columns."""
    declared = declared or {}
    seen = {
        name: declared[name] if name in declared and kind is not None else kind
        for name, kind in seen.items()
    } | {name: kind for name, kind in declared.items() if seen.get(name) is None}
    types = dict(current)
    for name in [*table.keys, *seen]:
        if not table.keeps(name):
            continue
        if name not in current and not COLUMN_NAME.match(name):
            raise ColumnTypeError(
                f"table {table.name}: source column {name!r} cannot be a table column "
                "(letters, digits and _ only): leave it out with except-column-list"
            )
        merged = merged_type(table.name, name, current.get(name), seen.get(name))
        if merged is not None:
            types[name] = merged
    missing = [k for k in table.keys if k not in types]
    if missing:
        raise ColumnTypeError(
            f"table {table.name}: key column {missing[0]} is in no event's row or Kafka key"
        )
    ordered = {k: types[k] for k in table.keys} | {
        k: v for k, v in types.items() if k not in table.keys
    }
    return Columns(ordered, table.keys, frozenset(n for n in documents if n in ordered))
