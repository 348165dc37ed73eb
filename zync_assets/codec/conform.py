"""Turn JSON data into values an Avro schema accepts, naming the field that does not fit.

The inverse of `render.to_json_value`: base64 strings become bytes, decimal
strings become `Decimal`, ISO dates and timestamps become `date`/`datetime`, and
an untagged union value takes the first branch it fits.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import uuid
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from fastavro import parse_schema

INT_RANGE = (-(2**31), 2**31 - 1)
LONG_RANGE = (-(2**63), 2**63 - 1)


class SchemaMismatch(ValueError):
    """A JSON value does not fit the Avro schema; `path` names the field."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class Conformer:
    """Conforms JSON values to one parsed Avro schema."""

    def __init__(self, schema: dict | list | str) -> None:
        self.parsed = parse_schema(schema)
        self._named: dict[str, Any] = dict(
            self.parsed.get("__named_schemas", {}) if isinstance(self.parsed, dict) else {}
        )

    def conform(self, value: Any, path: str = "value") -> Any:
        return self._conform(self.parsed, value, path)

    def _conform(self, schema: Any, value: Any, path: str) -> Any:
        if isinstance(schema, str):
            if schema in self._named:
                return self._conform(self._named[schema], value, path)
            return _primitive(schema, value, path)
        if isinstance(schema, list):
            return self._union(schema, value, path)
        kind = schema["type"]
        logical = schema.get("logicalType")
        if logical:
            converted = _logical(logical, schema, value, path)
            if converted is not _NOT_LOGICAL:
                return converted
        if kind == "record" or kind == "error":
            return self._record(schema, value, path)
        if kind == "enum":
            if value not in schema["symbols"]:
                raise SchemaMismatch(path, f"{value!r} is not one of {schema['symbols']}")
            return value
        if kind == "array":
            if not isinstance(value, list):
                raise SchemaMismatch(path, f"expected an array, got {_show(value)}")
            return [self._conform(schema["items"], v, f"{path}[{i}]") for i, v in enumerate(value)]
        if kind == "map":
            if not isinstance(value, dict):
                raise SchemaMismatch(path, f"expected an object (map), got {_show(value)}")
            return {k: self._conform(schema["values"], v, f"{path}.{k}") for k, v in value.items()}
        if kind == "fixed":
            data = _bytes(value, path)
            if len(data) != schema["size"]:
                raise SchemaMismatch(path, f"fixed size {schema['size']}, got {len(data)} bytes")
            return data
        return self._conform(kind, value, path)

    def _record(self, schema: dict, value: Any, path: str) -> dict:
        if not isinstance(value, dict):
            raise SchemaMismatch(path, f"expected an object (record), got {_show(value)}")
        known = {f["name"] for f in schema["fields"]}
        extra = sorted(set(value) - known)
        if extra:
            raise SchemaMismatch(f"{path}.{extra[0]}", "field is not in the schema")
        result = {}
        for field in schema["fields"]:
            name = field["name"]
            field_path = f"{path}.{name}"
            if name in value:
                result[name] = self._conform(field["type"], value[name], field_path)
            elif "default" in field:
                result[name] = field["default"]
            else:
                raise SchemaMismatch(field_path, "required field is missing")
        return result

    def _union(self, branches: list, value: Any, path: str) -> Any:
        problems = []
        for branch in branches:
            try:
                return self._conform(branch, value, path)
            except SchemaMismatch as exc:
                problems.append(exc.problem)
        raise SchemaMismatch(path, f"fits no branch of the union ({'; '.join(problems)})")


_NOT_LOGICAL = object()


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _primitive(kind: str, value: Any, path: str) -> Any:
    if kind == "null":
        if value is not None:
            raise SchemaMismatch(path, f"expected null, got {_show(value)}")
        return None
    if value is None:
        raise SchemaMismatch(path, f"expected {kind}, got null")
    if kind == "boolean":
        if not isinstance(value, bool):
            raise SchemaMismatch(path, f"expected boolean, got {_show(value)}")
        return value
    if kind in ("int", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise SchemaMismatch(path, f"expected {kind}, got {_show(value)}")
        low, high = INT_RANGE if kind == "int" else LONG_RANGE
        if not low <= value <= high:
            raise SchemaMismatch(path, f"{value} is out of range for {kind}")
        return value
    if kind in ("float", "double"):
        if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
            return float(value.replace("Infinity", "inf"))
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SchemaMismatch(path, f"expected {kind}, got {_show(value)}")
        return float(value)
    if kind == "string":
        if not isinstance(value, str):
            raise SchemaMismatch(path, f"expected string, got {_show(value)}")
        return value
    if kind == "bytes":
        return _bytes(value, path)
    raise SchemaMismatch(path, f"unknown Avro type {kind!r}")


def _bytes(value: Any, path: str) -> bytes:
    if not isinstance(value, str):
        raise SchemaMismatch(path, f"expected base64 string (bytes), got {_show(value)}")
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error as exc:
        raise SchemaMismatch(path, f"not valid base64: {exc}") from exc


def _logical(logical: str, schema: dict, value: Any, path: str) -> Any:
    if value is None:
        raise SchemaMismatch(path, f"expected {logical}, got null")
    if logical == "decimal":
        return _decimal(schema, value, path)
    if logical == "date":
        return _parsed(value, path, "date (YYYY-MM-DD)", dt.date.fromisoformat, int)
    if logical in ("time-millis", "time-micros"):
        return _parsed(value, path, "time (HH:MM:SS[.ffffff])", dt.time.fromisoformat, int)
    if logical in ("timestamp-millis", "timestamp-micros"):
        return _parsed(value, path, "timestamp (ISO-8601)", _utc_timestamp, int)
    if logical in ("local-timestamp-millis", "local-timestamp-micros"):
        return _parsed(value, path, "local timestamp (ISO-8601)", dt.datetime.fromisoformat, int)
    if logical == "uuid":
        if not isinstance(value, str):
            raise SchemaMismatch(path, f"expected uuid string, got {_show(value)}")
        try:
            return str(uuid.UUID(value))
        except ValueError as exc:
            raise SchemaMismatch(path, f"{value!r} is not a UUID") from exc
    return _NOT_LOGICAL  # unknown logical types fall back to their underlying type


def _parsed(value: Any, path: str, what: str, parse: Callable[[str], Any], raw_type: type) -> Any:
    if isinstance(value, raw_type) and not isinstance(value, bool):
        return value  # already in Avro's own units (days, ms, µs)
    if not isinstance(value, str):
        raise SchemaMismatch(path, f"expected {what}, got {_show(value)}")
    try:
        return parse(value)
    except ValueError as exc:
        raise SchemaMismatch(path, f"{value!r} is not a {what}") from exc


def _utc_timestamp(text: str) -> dt.datetime:
    parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _decimal(schema: dict, value: Any, path: str) -> Decimal:
    precision, scale = schema.get("precision", 38), schema.get("scale", 0)
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise SchemaMismatch(path, f"expected decimal({precision},{scale}), got {_show(value)}")
    try:
        number = Decimal(str(value))
    except InvalidOperation as exc:
        raise SchemaMismatch(path, f"{value!r} is not a decimal number") from exc
    if not number.is_finite():
        raise SchemaMismatch(path, f"{value!r} is not a finite decimal")
    quantized = number.quantize(Decimal(1).scaleb(-scale))
    if quantized != number:
        raise SchemaMismatch(path, f"{value!r} has more than {scale} decimal places")
    if len(quantized.as_tuple().digits) > precision and quantized != 0:
        raise SchemaMismatch(path, f"{value!r} has more than {precision} digits")
    return quantized
