"""Encode and decode Confluent-framed Avro, with writer schemas looked up by id.

Decoding uses the writer schema named by the message's own schema id (never the
subject's latest), so a topic whose schema evolves mid-stream decodes record by
record. Failures are `DecodeError`s whose `reason` is short and stable: it goes
into dead-letter rows and consume's warnings.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer

from zync_assets.codec.wire import FramingError, frame, unframe


class DecodeError(ValueError):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


NOT_FRAMED = "not-confluent-avro"
UNKNOWN_SCHEMA = "unknown-schema-id"
CORRUPT = "corrupt-payload"


class Decoder:
    """Decodes framed Avro; `lookup(schema_id)` returns the writer schema (JSON data)."""

    def __init__(self, lookup: Callable[[int], Any]) -> None:
        self._lookup = lookup
        self._parsed: dict[int, Any] = {}

    def writer_schema(self, schema_id: int) -> Any:
        if schema_id not in self._parsed:
            try:
                raw = self._lookup(schema_id)
            except LookupError as exc:
                raise DecodeError(UNKNOWN_SCHEMA, str(exc)) from exc
            self._parsed[schema_id] = parse_schema(raw)
        return self._parsed[schema_id]

    def decode(self, message: bytes | None) -> Any:
        """The decoded value; None for a missing or empty message (a tombstone)."""
        if not message:
            return None
        try:
            schema_id, body = unframe(message)
        except FramingError as exc:
            raise DecodeError(NOT_FRAMED, str(exc)) from exc
        schema = self.writer_schema(schema_id)
        stream = io.BytesIO(body)
        try:
            value = schemaless_reader(stream, schema, None)
        except Exception as exc:  # fastavro raises EOFError, ValueError, UnicodeError, ...
            raise DecodeError(
                CORRUPT, f"schema id {schema_id}: {type(exc).__name__}: {exc}"
            ) from exc
        leftover = len(body) - stream.tell()
        if leftover:
            raise DecodeError(CORRUPT, f"schema id {schema_id}: {leftover} bytes after the record")
        return value


def encode(schema_id: int, parsed_schema: Any, value: Any) -> bytes:
    """Frame `value` (already conformed to the schema) as Confluent Avro."""
    out = io.BytesIO()
    schemaless_writer(out, parsed_schema, value)
    return frame(schema_id, out.getvalue())
