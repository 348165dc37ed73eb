"""Confluent wire format: magic byte 0, 4-byte big-endian schema id, Avro binary body."""

from __future__ import annotations

import struct

MAGIC = 0
HEADER = struct.Struct(">bI")


class FramingError(ValueError):
    """The bytes are not a Confluent-framed Avro message."""


def frame(schema_id: int, body: bytes) -> bytes:
    return HEADER.pack(MAGIC, schema_id) + body


def unframe(message: bytes) -> tuple[int, memoryview]:
    """Split a framed message into (schema id, Avro body)."""
    if len(message) < HEADER.size:
        raise FramingError(f"message of {len(message)} bytes is shorter than the 5-byte header")
    magic, schema_id = HEADER.unpack_from(message)
    if magic != MAGIC:
        raise FramingError(f"magic byte is {magic}, not 0: not Confluent-framed Avro")
    return schema_id, memoryview(message)[HEADER.size :]
