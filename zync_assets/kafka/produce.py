"""`zync produce`: JSON lines → Avro messages on a topic.

All lines are parsed, conformed and encoded before the first message is sent, so
a bad line (not JSON, or not fitting the schema) stops the command with its line
number and nothing of the batch reaches Kafka.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from zync_assets.codec.avro import encode
from zync_assets.codec.conform import Conformer, SchemaMismatch
from zync_assets.codec.infer import InferenceError, infer_schema, record_name
from zync_assets.core.errors import ZyncError
from zync_assets.core.settings import KafkaSettings
from zync_assets.kafka import clients
from zync_assets.kafka.registry import Registry

KEY_VALUE_FIELDS = {"key", "value"}
# librdkafka's and the broker's default largest message (message.max.bytes): checked
# before anything is sent, so one oversized line cannot leave half a file in the topic.
MAX_MESSAGE_BYTES = 1_000_000


@dataclass(frozen=True)
class Line:
    number: int
    key: Any
    value: Any


@dataclass(frozen=True)
class ProduceResult:
    topic: str
    messages: int
    key_schema_id: int | None
    value_schema_id: int | None


def parse_lines(lines: Iterable[str | bytes]) -> list[Line]:
    """JSON lines (text, or UTF-8 bytes) → (key, value) records; blank lines are skipped.

    A line that is an object with only `key` and/or `value` fields sends those;
    any other line is the value itself, with a null key.
    """
    records = []
    for number, raw in enumerate(lines, start=1):
        text = _text(number, raw)
        if not text.strip():
            continue
        data = _json(number, text)
        if isinstance(data, dict) and data and set(data) <= KEY_VALUE_FIELDS:
            records.append(Line(number, data.get("key"), data.get("value")))
        else:
            records.append(Line(number, None, data))
    return records


def _text(number: int, raw: str | bytes) -> str:
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ZyncError(
            f"line {number}: not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
        ) from exc


def _json(number: int, text: str) -> Any:
    """One line's JSON; a key given twice in an object is refused, not silently dropped."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for key, value in pairs:
            if key in found:
                raise ZyncError(f"line {number}: key {key!r} is given twice in one object")
            found[key] = value
        return found

    try:
        return json.loads(text, object_pairs_hook=unique)
    except json.JSONDecodeError as exc:
        raise ZyncError(f"line {number}: not valid JSON ({exc.msg}, column {exc.colno})") from exc
    except RecursionError as exc:
        raise ZyncError(f"line {number}: nested too deeply to read") from exc
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise ZyncError(f"line {number}: {str(exc).split(';')[0]}") from exc


def _schema_for(topic: str, part: str, lines: list[Line], given: Any) -> Any:
    if given is not None:
        return given
    values = [(line.number, getattr(line, part)) for line in lines]
    try:
        return infer_schema(values, record_name(topic, part), part)
    except InferenceError as exc:
        raise ZyncError(str(exc)) from exc


class _Encoder:
    """Conforms and frames one side (key or value) of every line with one registered schema."""

    def __init__(self, registry: Registry, subject: str, schema: Any) -> None:
        self.conformer = Conformer(schema) if schema is not None else None
        self.schema_id = registry.register(subject, schema) if schema is not None else None

    def encode(self, line: Line, part: str) -> bytes | None:
        value = getattr(line, part)
        if value is None:
            return None  # null key, or a tombstone value
        if self.conformer is None or self.schema_id is None:
            raise AssertionError("a non-null value always has a schema")
        try:
            conformed = self.conformer.conform(value, part)
        except SchemaMismatch as exc:
            raise ZyncError(f"line {line.number}: {exc}") from exc
        return encode(self.schema_id, self.conformer.parsed, conformed)


def encode_lines(
    topic: str, lines: list[Line], registry: Registry, key_schema: Any, value_schema: Any
) -> tuple[list[tuple[bytes | None, bytes | None]], _Encoder, _Encoder]:
    keys = _Encoder(registry, f"{topic}-key", _schema_for(topic, "key", lines, key_schema))
    values = _Encoder(registry, f"{topic}-value", _schema_for(topic, "value", lines, value_schema))
    messages = [(keys.encode(ln, "key"), values.encode(ln, "value")) for ln in lines]
    for line, (key, value) in zip(lines, messages, strict=True):
        size = len(key or b"") + len(value or b"")
        if size > MAX_MESSAGE_BYTES:
            raise ZyncError(
                f"line {line.number}: its message is {size:,} bytes, over Kafka's default "
                f"limit of {MAX_MESSAGE_BYTES:,} (message.max.bytes); nothing was sent"
            )
    return messages, keys, values


def produce(
    topic: str,
    lines: list[Line],
    kafka: KafkaSettings,
    registry: Registry,
    key_schema: Any = None,
    value_schema: Any = None,
    partitions: int = 1,
) -> ProduceResult:
    messages, keys, values = encode_lines(topic, lines, registry, key_schema, value_schema)
    clients.ensure_topic(kafka, topic, partitions)
    send(kafka, topic, messages)
    return ProduceResult(topic, len(messages), keys.schema_id, values.schema_id)


def send(
    kafka: KafkaSettings, topic: str, messages: list[tuple[bytes | None, bytes | None]]
) -> None:
    """Send encoded messages with an idempotent producer; raise if any was not delivered."""
    failures: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            failures.append(error)

    producer = clients.connected_producer(kafka, topic)
    for key, value in messages:
        while True:
            try:
                producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)  # local queue full: let deliveries drain
            except KafkaException as exc:
                raise ZyncError(f"cannot produce to {topic!r}: {exc.args[0].str()}") from exc
    pending = producer.flush(clients.CONNECT_TIMEOUT_S * 3)
    if pending:
        raise clients.unreachable(kafka, f"{pending} messages not delivered")
    if failures:
        raise ZyncError(
            f"{len(failures)} of {len(messages)} messages to {topic!r} failed: {failures[0].str()}"
        )
