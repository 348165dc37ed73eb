"""`zync consume` and `zync info`: read a topic as JSON-ready records, report its offsets."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, TopicPartition

from zync_assets.codec.avro import DecodeError, Decoder
from zync_assets.codec.render import render_datetime, to_json_value
from zync_assets.core.errors import ZyncError
from zync_assets.core.settings import KafkaSettings
from zync_assets.kafka import clients
from zync_assets.kafka.failures import CONNECT_TIMEOUT_S
from zync_assets.kafka.registry import Registry


@dataclass(frozen=True)
class Undecodable:
    """A message that could not be decoded; consume reports it and goes on."""

    partition: int | None  # as the client gives them: None only for an error event
    offset: int | None
    error: DecodeError


def consume(
    kafka: KafkaSettings,
    registry: Registry,
    topic: str,
    from_beginning: bool = False,
    idle_timeout: float | None = None,
    with_metadata: bool = False,
) -> Iterator[dict[str, Any] | Undecodable]:
    """Yield `{key, value}` (plus `kafka` metadata if asked) for each message, in arrival order.

    Stops once it has caught up with every partition and no message arrived for
    `idle_timeout` seconds (None: never). The clock waits for the catch-up because on a
    loaded broker the first fetch alone can outlast a short timeout, and stopping then
    would print nothing for a topic that has messages.
    """
    partitions = clients.partitions_of(kafka, topic)
    decoder = Decoder(registry.schema_by_id)
    consumer = clients.consumer(kafka)
    start = OFFSET_BEGINNING if from_beginning else OFFSET_END
    consumer.assign([TopicPartition(topic, p, start) for p in partitions])
    behind = set(partitions)  # partitions that have not yet reported their end
    last_event = time.monotonic()
    try:
        while not _idle_past(behind, last_event, idle_timeout, kafka):
            message = consumer.poll(0.2)
            if message is None:
                continue
            last_event = time.monotonic()
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    behind.discard(message.partition())
                    continue
                raise ZyncError(f"consuming {topic!r} failed: {error.str()}")
            try:
                record = {
                    "key": to_json_value(decoder.decode(message.key())),
                    "value": to_json_value(decoder.decode(message.value())),
                }
            except DecodeError as exc:
                yield Undecodable(message.partition(), message.offset(), exc)
                continue
            if with_metadata:
                record["kafka"] = _metadata(message)
            yield record
    finally:
        consumer.close()


def _idle_past(
    behind: set[int], last_event: float, idle_timeout: float | None, kafka: KafkaSettings
) -> bool:
    """Whether to stop: idle that long once caught up; a broker silent before then is an error."""
    if idle_timeout is None:
        return False
    silent = time.monotonic() - last_event
    if not behind:
        return silent >= idle_timeout
    if silent >= idle_timeout + CONNECT_TIMEOUT_S:
        raise ZyncError(
            f"{kafka.bootstrap_servers} sent nothing for {silent:.0f} s before the topic's end "
            "was reached; check that the broker is up and reachable (`zync info -t TOPIC`)"
        )
    return False


def _metadata(message: Any) -> dict[str, Any]:
    _kind, millis = message.timestamp()
    stamp = dt.datetime.fromtimestamp(millis / 1000, dt.UTC) if millis >= 0 else None
    return {
        "topic": message.topic(),
        "partition": message.partition(),
        "offset": message.offset(),
        "timestamp": render_datetime(stamp) if stamp else None,
    }
