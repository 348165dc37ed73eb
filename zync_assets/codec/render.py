"""How Avro values appear as JSON (consume output, the JSON lines `produce` reads).

| Avro                     | JSON                                                    |
|--------------------------|---------------------------------------------------------|
| null, boolean            | null, true/false                                        |
| int, long, float, double | number (NaN/±Infinity as the strings "NaN", "Infinity") |
| string, enum             | string (enum: the symbol)                               |
| bytes, fixed             | base64 string                                           |
| array, map, record       | list, object, object (fields in schema order)           |
| union                    | the value of the branch itself, untagged                |
| decimal                  | string with the exact digits, e.g. "1234.50"            |
| date                     | "YYYY-MM-DD"                                            |
| time-millis/micros       | "HH:MM:SS[.ffffff]"                                     |
| timestamp-millis/micros  | "YYYY-MM-DDTHH:MM:SS[.ffffff]Z" (UTC)                   |
| local-timestamp-*        | the same without "Z"                                    |
| uuid                     | canonical string                                        |
"""

from __future__ import annotations

import base64
import datetime as dt
import math
import uuid
from decimal import Decimal
from typing import Any


def to_json_value(value: Any) -> Any:
    """Render a value decoded by fastavro (logical types already converted) as JSON data."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _non_finite(value)
    if isinstance(value, dict):
        return {k: to_json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json_value(v) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime):
        return render_datetime(value)
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"no JSON rendering for {type(value).__name__}")


def render_datetime(value: dt.datetime) -> str:
    if value.tzinfo is None:
        return value.isoformat()
    return value.astimezone(dt.UTC).replace(tzinfo=None).isoformat() + "Z"


def _non_finite(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"
