"""What a JDBC sink in upsert mode makes of an output topic (for the demo and its tests)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def upsert_by_key(records: Iterable[tuple[Any, Any]], key_field: str) -> dict[Any, dict]:
    """Per key, the columns of every (key, value) record merged in order — a record's
    absent columns stay as they were — and a tombstone (value None) deletes the row."""
    table: dict[Any, dict] = {}
    for key, value in records:
        if value is None:
            table.pop(key[key_field], None)
        else:
            table[key[key_field]] = {**table.get(key[key_field], {}), **value}
    return table
