"""A spec's `tables:` section: lake tables kept from a pool's change events (SCD1 / SCD2).

The names and meanings follow Spark's Auto CDC (`keys`, `sequence_by`,
`apply_as_deletes`, `stored_as_scd_type`, `column_list`, `except_column_list`,
`track_history_column_list`, `track_history_except_column_list`), spelled with dashes
as the rest of a spec is. Structure is checked here; the expressions are checked
against Spark when a pass compiles them (tables/compile.py). Every error names the
file, the table and the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zync_assets.core.errors import ZyncError
from zync_assets.core.timeparse import parse_duration

TABLE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
# A column Delta can hold without column mapping, and an identifier Spark SQL takes bare.
COLUMN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
SCD_TYPES = ("scd1", "scd2")
DEFAULT_SEQUENCE = "kafka.offset"
DEFAULT_RETENTION = "7d"

TABLE_FIELDS = {
    "name", "source", "keys", "sequence-by", "apply-as-deletes", "stored-as", "column-list",
    "except-column-list", "track-history-column-list", "track-history-except-column-list",
    "deleted-keys-retention",
}  # fmt: skip


@dataclass(frozen=True)
class TableDef:
    """One entry of a spec's `tables`."""

    name: str
    source: str  # a topic: an input topic (its raw pool) or an output topic (its staging pool)
    source_pool: str
    from_staging: bool  # True: the source is an output topic; rows are its records' values
    keys: tuple[str, ...]
    sequence_by: tuple[str, ...]  # one expression, or several compared in order
    apply_as_deletes: str | None  # None: the default (op = 'd' or a tombstone)
    stored_as: str  # scd1 | scd2
    column_list: tuple[str, ...] | None = None
    except_column_list: tuple[str, ...] = ()
    track_history_column_list: tuple[str, ...] | None = None
    track_history_except_column_list: tuple[str, ...] = ()
    retention_s: float = parse_duration(DEFAULT_RETENTION)

    @property
    def scd2(self) -> bool:
        return self.stored_as == "scd2"

    def keeps(self, column: str) -> bool:
        """Whether a source column becomes a column of the table (keys always do)."""
        if column in self.keys:
            return True
        if self.column_list is not None and column not in self.column_list:
            return False
        return column not in self.except_column_list

    def selection(self) -> dict[str, list[str] | None]:
        """Which source columns it keeps, as the spec says it: recorded with each pass, so
        that a changed list is noticed (its stored rows were built with the old one)."""
        return {
            "column-list": None if self.column_list is None else sorted(self.column_list),
            "except-column-list": sorted(self.except_column_list),
        }

    def tracks(self, column: str) -> bool:
        """SCD2: whether a change of `column` starts a new version (else it is updated in place)."""
        if self.track_history_column_list is not None:
            return column in self.track_history_column_list or column in self.keys
        return column not in self.track_history_except_column_list


def _fail(path: Path, table: str, field: str, problem: str) -> ZyncError:
    where = f"tables[{table}]" + (f" {field}" if field else "")
    return ZyncError(f"{path}: {where}: {problem}")


def parse_tables(path: Path, items: Any, inputs: list, outputs: list) -> list[TableDef]:
    """The `tables` section of spec `path`, whose routes are `inputs` and `outputs`."""
    if not isinstance(items, list) or not items:
        raise ZyncError(f"{path}: tables: expected a non-empty list of tables")
    pools = {r.topic: (r.pool, False) for r in inputs} | {r.topic: (r.pool, True) for r in outputs}
    tables: list[TableDef] = []
    for index, item in enumerate(items, start=1):
        table = _parse_one(path, index, item, pools)
        if any(t.name == table.name for t in tables):
            raise _fail(path, table.name, "name", "is used by two tables")
        tables.append(table)
    return tables


def _parse_one(path: Path, index: int, item: Any, pools: dict[str, tuple[str, bool]]) -> TableDef:
    if not isinstance(item, dict):
        raise _fail(path, str(index), "", "expected a mapping with name, source, keys")
    name = item.get("name")
    if not isinstance(name, str) or not TABLE_NAME.match(name):
        raise _fail(
            path, str(index), "name",
            f"{name!r} is not a table name (a letter, then up to 63 letters, digits or _)",
        )  # fmt: skip
    unknown = sorted(str(name) for name in set(item) - TABLE_FIELDS)  # YAML keys: any scalar
    if unknown:
        raise _fail(path, name, unknown[0], "not a field of a table")
    source = item.get("source")
    if source not in pools:
        raise _fail(path, name, "source", f"{source!r} is neither an input nor an output topic")
    stored_as = item.get("stored-as", "scd1")
    if stored_as not in SCD_TYPES:
        raise _fail(path, name, "stored-as", f"{stored_as!r}: expected scd1 or scd2")
    keys = _columns(path, name, "keys", item.get("keys"), required=True)
    assert keys is not None
    column_list = _columns(path, name, "column-list", item.get("column-list"))
    except_list = _columns(path, name, "except-column-list", item.get("except-column-list"))
    if column_list is not None and except_list is not None:
        raise _fail(path, name, "except-column-list", "give column-list or except-column-list")
    for key in keys:
        if key in (except_list or ()):
            raise _fail(path, name, "except-column-list", f"{key!r} is a key: keys are kept")
    track = _columns(path, name, "track-history-column-list", item.get("track-history-column-list"))
    track_except = _columns(
        path, name, "track-history-except-column-list", item.get("track-history-except-column-list")
    )
    if (track is not None or track_except is not None) and stored_as != "scd2":
        field = (
            "track-history-column-list" if track is not None else "track-history-except-column-list"
        )
        raise _fail(path, name, field, "only an scd2 table keeps history")
    if track is not None and track_except is not None:
        raise _fail(
            path, name, "track-history-except-column-list",
            "give track-history-column-list or track-history-except-column-list",
        )  # fmt: skip
    pool, from_staging = pools[source]
    return TableDef(
        name=name, source=source, source_pool=pool, from_staging=from_staging, keys=keys,
        sequence_by=_sequence(path, name, item.get("sequence-by", DEFAULT_SEQUENCE)),
        apply_as_deletes=_expression(path, name, "apply-as-deletes", item.get("apply-as-deletes")),
        stored_as=stored_as, column_list=column_list, except_column_list=except_list or (),
        track_history_column_list=track, track_history_except_column_list=track_except or (),
        retention_s=_retention(path, name, item.get("deleted-keys-retention", DEFAULT_RETENTION)),
    )  # fmt: skip


def _columns(
    path: Path, table: str, field: str, value: Any, required: bool = False
) -> tuple[str, ...] | None:
    if value is None:
        if required:
            raise _fail(path, table, field, "missing: list the key columns, e.g. [id]")
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise _fail(path, table, field, "expected a non-empty list of column names")
    for column in value:
        if not isinstance(column, str) or not COLUMN_NAME.match(column):
            raise _fail(path, table, field, f"{column!r} is not a column name")
    if len(set(value)) != len(value):
        raise _fail(path, table, field, "lists a column twice")
    return tuple(value)


def _expression(path: Path, table: str, field: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _fail(path, table, field, "expected a Spark SQL expression")
    return value.strip()


def _sequence(path: Path, table: str, value: Any) -> tuple[str, ...]:
    parts = value if isinstance(value, list) else [value]
    if not parts:
        raise _fail(path, table, "sequence-by", "expected an expression or a list of them")
    return tuple(_expression(path, table, "sequence-by", part) or "" for part in parts)


def _retention(path: Path, table: str, value: Any) -> float:
    try:
        return parse_duration(str(value))
    except ZyncError as exc:
        raise _fail(path, table, "deleted-keys-retention", str(exc)) from exc
