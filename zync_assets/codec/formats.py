"""Wire formats of Kafka messages: what ingest decodes and to-kafka writes, per topic.

A message's value is Confluent-framed Avro through the schema registry (`avro`) or
Kafka Connect's JSON envelope, `{"schema": ..., "payload": ...}` (`json`; JSON without
the envelope is read as it is). Its key is set apart, as many producers write keys in
another format than values: `avro`, `json`, `string` (UTF-8 text) or `bytes`.
"""

from __future__ import annotations

from dataclasses import dataclass

from zync_assets.core.errors import ZyncError

VALUE_FORMATS = ("avro", "json")
KEY_FORMATS = ("avro", "json", "string", "bytes")
OUTPUT_FORMATS = VALUE_FORMATS  # to-kafka writes keys in the value's format


@dataclass(frozen=True)
class WireFormat:
    value: str = "avro"
    key: str = ""  # default: the value's format

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", self.value)
        if self.value not in VALUE_FORMATS:
            raise ZyncError(
                f"unknown value format {self.value!r}: use one of {', '.join(VALUE_FORMATS)}"
            )
        if self.key not in KEY_FORMATS:
            raise ZyncError(f"unknown key format {self.key!r}: use one of {', '.join(KEY_FORMATS)}")


def wire_format(value: str | None, key: str | None) -> WireFormat:
    """The format of `value` (default avro) with its key in `key` (default: the value's)."""
    return WireFormat(value or "avro", key or "")


AVRO = WireFormat()
