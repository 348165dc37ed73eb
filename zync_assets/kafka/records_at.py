"""Single records read by their position, within a bound: a dead letter's headers, the
timestamp of the oldest record a sink has not committed."""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import KafkaError, TopicPartition

from zync_assets.core.settings import KafkaSettings
from zync_assets.kafka import clients

READ_TIMEOUT_S = 5.0  # a read-only command answers within seconds, even from a slow broker


@dataclass(frozen=True)
class RecordAt:
    """One record: where it is, when it was written (ms since the epoch), its headers."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
    headers: dict[str, bytes]
    key: bytes | None
    value: bytes | None


Position = tuple[str, int, int]  # topic, partition, offset


def first_records_from(
    kafka: KafkaSettings, positions: list[Position], timeout: float = READ_TIMEOUT_S
) -> dict[Position, RecordAt]:
    """For each of `positions` (one per partition), the first committed record at or after
    it (an offset can be a transaction's marker, which holds none) that could be read
    within `timeout` seconds; a position at its partition's end, or not read in time, is
    left out."""
    if not positions:
        return {}
    consumer = clients.consumer(kafka, **{"isolation.level": "read_committed"})
    asked = {(t, p): (t, p, o) for t, p, o in positions}
    found: dict[Position, RecordAt] = {}
    try:
        consumer.assign([TopicPartition(t, p, o) for t, p, o in positions])
        done: set[tuple[str, int]] = set()
        deadline = time.monotonic() + timeout
        while len(done) < len(asked) and time.monotonic() < deadline:
            message = consumer.poll(min(0.2, max(0.0, deadline - time.monotonic())))
            if message is None:
                continue
            where = (message.topic() or "", message.partition() or 0)
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    done.add(where)
                continue
            if where in done or where not in asked:
                continue
            done.add(where)
            kind, stamp = message.timestamp()
            raw = message.headers() or []
            pairs = raw.items() if isinstance(raw, dict) else raw
            headers = {k: v for k, v in pairs if isinstance(v, bytes)}
            found[asked[where]] = RecordAt(
                where[0], where[1], message.offset() or 0, stamp if kind else None, headers,
                message.key(), message.value(),
            )  # fmt: skip
    finally:
        consumer.close()
    return found
