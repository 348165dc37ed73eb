"""A row's record in a topic's Avro value schema: what the lake's tables and a mirror's
output both take their column types from."""

from __future__ import annotations

from typing import Any


def row_record(schema: Any, envelope: bool) -> dict | None:
    """The record of a row in a topic's value schema, resolved if named before: a Debezium
    envelope's `after` (`envelope`), else the value schema itself; None if it has none."""
    named: dict[str, Any] = {}
    _collect_names(schema, named)
    if not envelope:
        return schema if isinstance(schema, dict) and schema.get("type") == "record" else None
    if not isinstance(schema, dict):
        return None
    for field in schema.get("fields", []):
        if isinstance(field, dict) and field.get("name") in ("after", "before"):
            record = non_null(field.get("type"))
            if isinstance(record, str):
                record = named.get(record)
            if isinstance(record, dict) and record.get("type") == "record":
                return record
    return None


def _collect_names(schema: Any, named: dict[str, Any]) -> None:
    """Named types by name and full name, so a later reference finds its record."""
    if isinstance(schema, list):
        for branch in schema:
            _collect_names(branch, named)
    elif isinstance(schema, dict):
        if schema.get("type") in ("record", "enum", "fixed") and "name" in schema:
            name = schema["name"]
            named[name] = schema
            if schema.get("namespace"):
                named[f"{schema['namespace']}.{name}"] = schema
        for field in schema.get("fields", []):
            if isinstance(field, dict):
                _collect_names(field.get("type"), named)
        for key in ("items", "values"):
            if key in schema:
                _collect_names(schema[key], named)


def non_null(kind: Any) -> Any:
    if isinstance(kind, list):
        branches = [b for b in kind if b != "null"]
        return branches[0] if len(branches) == 1 else kind
    return kind
