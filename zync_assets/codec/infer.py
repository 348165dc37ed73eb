"""Infer one Avro schema that fits every JSON value of a batch.

Numbers are `long` or `double` (a field holding both is `double`), objects are
records, a field missing or null in some values is a nullable union with
default null. Values whose shapes cannot share a schema (a field that is a string
in one line and a number in another) are refused, naming the field and the line:
give an explicit `.avsc` schema for such data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
NAMESPACE = "zync.inferred"


class InferenceError(ValueError):
    pass


@dataclass
class _Shape:
    """What one JSON position has held so far."""

    # any of: null, boolean, long, double, string, array, record
    kinds: set[str] = field(default_factory=set)
    items: _Shape | None = None
    fields: dict[str, _Shape] = field(default_factory=dict)
    seen: int = 0  # records only: how many objects were merged
    field_seen: dict[str, int] = field(default_factory=dict)

    def add(self, value: Any, path: str, line: int) -> None:
        kind = _kind_of(value, path, line)
        self.kinds.add(kind)
        concrete = self.kinds - {"null"}
        if concrete == {"long", "double"}:
            pass  # widened to double when rendered
        elif len(concrete) > 1:
            raise InferenceError(
                f"line {line}: field {path} holds both {' and '.join(sorted(concrete))} values; "
                "give an explicit schema (--key-schema/--value-schema FILE.avsc)"
            )
        if kind == "array":
            self.items = self.items or _Shape()
            for i, item in enumerate(value):
                self.items.add(item, f"{path}[{i}]", line)
        elif kind == "record":
            self.seen += 1
            for name, item in value.items():
                if not _NAME.match(name):
                    raise InferenceError(
                        f"line {line}: field name {path}.{name!r} is not a valid Avro name; "
                        "give an explicit schema"
                    )
                self.fields.setdefault(name, _Shape()).add(item, f"{path}.{name}", line)
                self.field_seen[name] = self.field_seen.get(name, 0) + 1

    def avro(self, name: str) -> Any:
        concrete = self.kinds - {"null"}
        if not concrete:
            return "null"
        if concrete == {"long", "double"}:
            base: Any = "double"
        else:
            (kind,) = concrete
            if kind == "array":
                assert self.items is not None
                base = {"type": "array", "items": self.items.avro(f"{name}_item")}
            elif kind == "record":
                base = self._record(name)
            else:
                base = kind
        return ["null", base] if "null" in self.kinds else base

    def _record(self, name: str) -> dict:
        fields = []
        for field_name, shape in self.fields.items():
            avro_type = shape.avro(f"{name}_{field_name}")
            always_present = self.field_seen[field_name] == self.seen
            if not always_present and avro_type != "null" and not isinstance(avro_type, list):
                avro_type = ["null", avro_type]
            entry: dict[str, Any] = {"name": field_name, "type": avro_type}
            if avro_type == "null" or isinstance(avro_type, list):
                entry["default"] = None
            fields.append(entry)
        return {"type": "record", "name": name, "namespace": NAMESPACE, "fields": fields}


def _kind_of(value: Any, path: str, line: int) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "long"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "record"
    raise InferenceError(f"line {line}: field {path} has unsupported JSON value {value!r}")


def record_name(topic: str, part: str) -> str:
    """An Avro record name for a topic's key or value schema."""
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", topic)
    if not cleaned or cleaned[0].isdigit():
        cleaned = "_" + cleaned
    return f"{cleaned}_{part}"


def infer_schema(values: list[tuple[int, Any]], name: str, path: str) -> Any:
    """One schema for all `(line number, value)` pairs; None values are tombstones, skipped."""
    shape = _Shape()
    for line, value in values:
        if value is not None:
            shape.add(value, path, line)
    if not shape.kinds:
        return None
    return shape.avro(name)
