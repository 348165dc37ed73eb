"""A table's keys when its spec gives none: the fields of its source's message key.

Debezium keys each message by the source table's primary key (or the columns its
`message.key.columns` names), so the key's fields are the table's keys. The first pass
with a row change finds them in the events' Kafka keys and records them with its
commit (tables/state.py); later passes take the recorded ones, and refuse a source whose
key has other fields (the source table's primary key changed): the stored rows are keyed
by the old one, and only a rebuild keys them anew.
"""

from __future__ import annotations

from dataclasses import replace

from zync_assets.core.variants import split_fields
from zync_assets.tables.changes import CompiledTable
from zync_assets.tables.columns import ColumnTypeError
from zync_assets.tables.state import TableState


def with_message_keys(
    compiled: CompiledTable, state: TableState, key_schema: str | None
) -> CompiledTable:
    """`compiled` with its keys: the spec's, else those recorded by an earlier pass, else
    the fields of the Kafka keys of this pass's events (`key_schema`, their schema as
    `schema_of_variant_agg` gives it)."""
    table = compiled.table
    if table.keys:
        return compiled
    found = tuple(name for name, _ in split_fields(key_schema or ""))
    recorded = tuple(state.details.get("keys") or ())
    rebuild = f"`zync table rebuild {compiled.spec.path} {table.name}`"
    if recorded and found and set(found) != set(recorded):
        raise ColumnTypeError(
            f"table {table.name}: its source {table.source} is now keyed by "
            f"{', '.join(found)}, but the table by {', '.join(recorded)} (the source table's "
            f"primary key changed?): nothing was written; run {rebuild} to key it anew"
        )
    keys = recorded or found
    if not keys:
        raise ColumnTypeError(
            f"table {table.name}: the messages of {table.source} carry no key (a source table "
            "without a primary key?), so the table has none to merge by: give it keys in "
            "the spec, set Debezium's message.key.columns for it, or exclude its topic"
        )
    return replace(compiled, table=replace(table, keys=keys))
