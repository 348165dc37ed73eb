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
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from zync_assets.core.errors import ZyncError
from zync_assets.core.timeparse import parse_duration
from zync_assets.specs.patterns import TopicPattern, excluded_of, pattern_problem

TABLE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
# A column Delta can hold without column mapping, and an identifier Spark SQL takes bare.
COLUMN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
SCD_TYPES = ("scd1", "scd2")
DEFAULT_SEQUENCE = "kafka.offset"
# A table without `keys` takes Debezium's: its keys are the message key's fields, and its
# order the connector's own position, which a redelivered event keeps: PostgreSQL's
# `lsn`, MySQL's binlog file, position and row; the Kafka offset orders what a position
# does not (a snapshot's rows share one LSN) and other sources' events.
SOURCE_POSITION = (
    "source:lsn::bigint", "source:file::string", "source:pos::bigint", "source:row::int",
    "kafka.offset",
)  # fmt: skip
DEFAULT_RETENTION = "7d"

TABLE_FIELDS = {
    "name", "source", "topics", "exclude", "keys", "sequence-by", "apply-as-deletes",
    "stored-as", "column-list",
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
    keys: tuple[str, ...]  # (): the message key's fields, found by the first pass (keys.py)
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


@dataclass(frozen=True)
class TablePattern:
    """A `tables` entry with `topics:`: one table per matching input topic, named by the
    template `name` (`{table}`, `{schema}`, `{prefix}`, `{topic}`: the topic name's last,
    second-to-last and first dot-separated parts, and the whole of it)."""

    topics: TopicPattern  # its pool is unused: a topic's pool is where it was ingested
    template: TableDef  # every field of the tables it makes but name, source and pool

    def table_for(self, topic: str, pool: str) -> TableDef:
        """The table of `topic` (ingested into raw pool `pool`); ZyncError when its name
        is no table name."""
        name = render_name(self.template.name, topic)
        if not TABLE_NAME.match(name):
            raise ZyncError(
                f"topic {topic} makes table name {name!r}, which is not one (a letter, then up "
                f"to 63 letters, digits or _): change the spec's name template "
                f"{self.template.name!r}, or exclude the topic"
            )
        return replace(self.template, name=name, source=topic, source_pool=pool)


PLACEHOLDERS = ("table", "schema", "prefix", "topic")


def render_name(template: str, topic: str) -> str:
    """`template` for `topic`: Debezium names a table's topic <prefix>.<schema>.<table>
    (MySQL: <prefix>.<database>.<table>); characters a table name cannot hold become _."""
    parts = topic.split(".")
    values = {
        "table": parts[-1], "schema": parts[-2] if len(parts) > 1 else "",
        "prefix": parts[0], "topic": topic,
    }  # fmt: skip
    return re.sub(r"[^A-Za-z0-9_]", "_", template.format_map(values))


def parse_tables(
    path: Path, items: Any, inputs: list, outputs: list, patterns: Sequence[TopicPattern] = ()
) -> tuple[list[TableDef], list[TablePattern]]:
    """The `tables` section of spec `path`, whose routes are `inputs` and `outputs` and
    input patterns `patterns`: its tables named one by one, and its tables by pattern."""
    if not isinstance(items, list) or not items:
        raise ZyncError(f"{path}: tables: expected a non-empty list of tables")
    pools = {r.topic: (r.pool, False) for r in inputs} | {r.topic: (r.pool, True) for r in outputs}
    tables: list[TableDef] = []
    by_pattern: list[TablePattern] = []
    for index, item in enumerate(items, start=1):
        if isinstance(item, dict) and "topics" in item:
            by_pattern.append(_parse_pattern(path, index, item))
            continue
        table = _parse_one(path, index, item, pools, patterns)
        if any(t.name == table.name for t in tables):
            raise _fail(path, table.name, "name", "is used by two tables")
        tables.append(table)
    return tables, by_pattern


def _parse_pattern(path: Path, index: int, item: dict) -> TablePattern:
    where = str(index)
    if (found := pattern_problem(item)) is not None:
        raise _fail(path, where, *found)
    if "source" in item:
        raise _fail(path, where, "source", "give topics (a pattern) or source (a topic), not both")
    template = item.get("name")
    if not isinstance(template, str) or not any(f"{{{p}}}" in template for p in PLACEHOLDERS):
        raise _fail(
            path, where, "name", f"{template!r}: a pattern's tables need a name template "
            "with {table}, {schema}, {prefix} or {topic}, e.g. '{table}'",
        )  # fmt: skip
    try:
        sample = render_name(template, "prefix.schema.table")
    except (KeyError, ValueError, IndexError) as exc:
        raise _fail(
            path, where, "name", f"{template!r}: the placeholders are {{table}}, {{schema}}, "
            f"{{prefix}} and {{topic}} ({type(exc).__name__}: {exc})",
        ) from exc  # fmt: skip
    checked = _parse_one(
        path, index, {**_without(item, "topics", "exclude"), "name": sample, "source": ""},
        {"": ("", False)}, [], label=where,
    )  # fmt: skip
    topics = TopicPattern(item["topics"], "", exclude=excluded_of(item))
    return TablePattern(topics, replace(checked, name=template))


def _without(item: dict, *names: str) -> dict:
    return {k: v for k, v in item.items() if k not in names}


def _source_pool(
    source: Any, pools: dict[str, tuple[str, bool]], patterns: Sequence[TopicPattern]
) -> tuple[str, bool] | None:
    """The pool a table's source topic is in (and whether it is a staging pool)."""
    if source in pools:
        return pools[source]
    taken = next((p for p in patterns if isinstance(source, str) and p.matches(source)), None)
    return None if taken is None else (taken.pool, False)


def _parse_one(
    path: Path, index: int, item: Any, pools: dict[str, tuple[str, bool]],
    patterns: Sequence[TopicPattern], label: str | None = None,
) -> TableDef:  # fmt: skip
    """One named table (`label`: how errors name it, when not by its name)."""
    if not isinstance(item, dict):
        raise _fail(path, str(index), "", "expected a mapping with name and source (or topics)")
    name = item.get("name")
    if not isinstance(name, str) or not TABLE_NAME.match(name):
        raise _fail(
            path, str(index), "name",
            f"{name!r} is not a table name (a letter, then up to 63 letters, digits or _)",
        )  # fmt: skip
    where = label or name
    unknown = sorted(str(name) for name in set(item) - TABLE_FIELDS)  # YAML keys: any scalar
    if unknown:
        raise _fail(path, where, unknown[0], "not a field of a table")
    if "exclude" in item:
        raise _fail(path, where, "exclude", "only a table pattern (topics:) excludes topics")
    source = item.get("source")
    found = _source_pool(source, pools, patterns)
    if found is None:
        raise _fail(path, where, "source", f"{source!r} is neither an input nor an output topic")
    stored_as = item.get("stored-as", "scd1")
    if stored_as not in SCD_TYPES:
        raise _fail(path, where, "stored-as", f"{stored_as!r}: expected scd1 or scd2")
    keys = _columns(path, where, "keys", item.get("keys")) or ()
    column_list = _columns(path, where, "column-list", item.get("column-list"))
    except_list = _columns(path, where, "except-column-list", item.get("except-column-list"))
    if column_list is not None and except_list is not None:
        raise _fail(path, where, "except-column-list", "give column-list or except-column-list")
    for key in keys:
        if key in (except_list or ()):
            raise _fail(path, where, "except-column-list", f"{key!r} is a key: keys are kept")
    track = _columns(
        path, where, "track-history-column-list", item.get("track-history-column-list")
    )
    track_except = _columns(
        path,
        where,
        "track-history-except-column-list",
        item.get("track-history-except-column-list"),
    )
    if (track is not None or track_except is not None) and stored_as != "scd2":
        field = (
            "track-history-column-list" if track is not None else "track-history-except-column-list"
        )
        raise _fail(path, where, field, "only an scd2 table keeps history")
    if track is not None and track_except is not None:
        raise _fail(
            path, where, "track-history-except-column-list",
            "give track-history-column-list or track-history-except-column-list",
        )  # fmt: skip
    pool, from_staging = found
    sequence = item.get("sequence-by", DEFAULT_SEQUENCE if keys else list(SOURCE_POSITION))
    return TableDef(
        name=name, source=str(source), source_pool=pool, from_staging=from_staging, keys=keys,
        sequence_by=_sequence(path, where, sequence),
        apply_as_deletes=_expression(path, where, "apply-as-deletes", item.get("apply-as-deletes")),
        stored_as=stored_as, column_list=column_list, except_column_list=except_list or (),
        track_history_column_list=track, track_history_except_column_list=track_except or (),
        retention_s=_retention(path, where, item.get("deleted-keys-retention", DEFAULT_RETENTION)),
    )  # fmt: skip


def _columns(path: Path, table: str, field: str, value: Any) -> tuple[str, ...] | None:
    if value is None:
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
