"""Where an output topic stands: the staging offset of the last record committed to it.

The last record each to-kafka transaction writes to a partition carries two headers,
`zync.pool` and `zync.offset` (its staging offset); other records may (see KafkaSender
in jvm/src for which). Kafka offsets cannot be used for this: transaction markers and
aborted batches occupy offsets too. So the position is read from the last
committed record of each partition (a read_committed consumer over the tail).
A record without the headers, or from another pool, is not ours: the topic is
refused rather than guessed at.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from zync_assets.core.errors import Unavailable, ZyncError
from zync_assets.core.settings import KafkaSettings
from zync_assets.kafka import clients
from zync_assets.kafka.failures import is_transient
from zync_assets.kafka.offsets import PartitionOffsets

POOL_HEADER = "zync.pool"
OFFSET_HEADER = "zync.offset"
_FIRST_WINDOW = 64


@dataclass(frozen=True)
class TopicPosition:
    next_offset: int  # the first staging offset not yet in the topic
    high_water_marks: dict[int, int]  # per partition


def pool_header(pool: str) -> tuple[str, bytes]:
    return (POOL_HEADER, pool.encode())


def offset_header(offset: int) -> tuple[str, bytes]:
    return (OFFSET_HEADER, b"%d" % offset)


def staging_offset_of(message: Message, pool: str) -> int:
    """The staging offset a record was sent from; a ZyncError if it is not ours."""
    found = dict(message.headers() or [])
    where = f"topic {message.topic()!r} partition {message.partition()} offset {message.offset()}"
    if OFFSET_HEADER not in found:
        raise ZyncError(
            f"{where} was not written by `zync to-kafka` (no {OFFSET_HEADER} header); "
            "refusing to add to a topic with foreign records: send to a new topic"
        )
    owner = _text(found.get(POOL_HEADER))
    if owner != pool:
        raise ZyncError(
            f"{where} was written from staging pool {owner!r}, not {pool!r}; "
            "one output topic takes records from one staging pool"
        )
    return int(_text(found[OFFSET_HEADER]))


def _text(header: str | bytes | None) -> str:
    return header.decode() if isinstance(header, bytes) else header or ""


def topic_position(
    kafka: KafkaSettings, topic: str, pool: str, partitions: list[PartitionOffsets]
) -> TopicPosition:
    """Read the tail of each partition; the highest staging offset found, plus one."""
    return TopicPosition(
        topic_positions(kafka, pool, {topic: partitions})[topic],
        {p.partition: p.high for p in partitions},
    )


def topic_positions(
    kafka: KafkaSettings, pool: str, marks: dict[str, list[PartitionOffsets]]
) -> dict[str, int]:
    """Each topic's first staging offset not yet in it. One consumer reads the last
    window of every partition at once (a mirror's pool has dozens of topics: one fetch
    round, not one consumer each); a partition whose window holds no committed record
    (a long aborted batch) is read back further on its own."""
    # The end of a partition shows as an empty fetch, which the broker holds for
    # fetch.wait.max.ms (500 ms by default) in case records arrive: not worth waiting for.
    consumer = clients.consumer(
        kafka, **{"isolation.level": "read_committed", "fetch.wait.max.ms": 10}
    )
    try:
        parts = {(t, p.partition): p for t, ps in marks.items() for p in ps if p.high > p.low}
        starts = {key: max(p.low, p.high - _FIRST_WINDOW) for key, p in parts.items()}
        last = _read_spans(consumer, kafka, starts)
        found = {topic: -1 for topic in marks}
        for (topic, partition), part in parts.items():
            message = last.get((topic, partition))
            if message is None and starts[(topic, partition)] > part.low:
                earlier = PartitionOffsets(partition, part.low, starts[(topic, partition)])
                message = _last_committed(consumer, kafka, topic, earlier)
            if message is not None:
                found[topic] = max(found[topic], staging_offset_of(message, pool))
        return {topic: offset + 1 for topic, offset in found.items()}
    finally:
        consumer.close()


def _read_spans(
    consumer: Consumer, kafka: KafkaSettings, starts: dict[tuple[str, int], int]
) -> dict[tuple[str, int], Message]:
    """The last record of each partition from its start to its end (read_committed), all
    partitions assigned at once; a partition with none there is left out."""
    if not starts:
        return {}
    consumer.assign([TopicPartition(t, p, start) for (t, p), start in starts.items()])
    last: dict[tuple[str, int], Message] = {}
    behind = set(starts)
    while behind:
        message = consumer.poll(clients.CONNECT_TIMEOUT_S)
        if message is None:
            # Nothing came back, not even the end of the partition: the broker is away
            # (a restart, a leader moving). Nothing was sent yet, so a continuous
            # to-kafka retries the pass rather than stopping.
            topic, partition = next(iter(behind))
            raise Unavailable(
                f"reading the end of {topic!r} partition {partition} timed out after "
                f"{clients.CONNECT_TIMEOUT_S:g}s; is Kafka at {kafka.bootstrap_servers} healthy?"
            )
        key = (message.topic() or "", message.partition() or 0)
        error = message.error()
        if error is None:
            last[key] = message
        elif error.code() == KafkaError._PARTITION_EOF:
            behind.discard(key)
        else:
            kind = Unavailable if is_transient(error.str()) else ZyncError
            raise kind(f"reading the end of {key[0]!r} partition {key[1]}: {error.str()}")
    return last


def _last_committed(
    consumer: Consumer, kafka: KafkaSettings, topic: str, part: PartitionOffsets
) -> Message | None:
    """The last committed record of a partition, reading back in growing windows
    (aborted batches and markers are skipped by read_committed)."""
    window = _FIRST_WINDOW
    end = part.high
    while end > part.low:
        start = max(part.low, end - window)
        last = _read_span(consumer, kafka, topic, part.partition, start)
        if last is not None:
            return last
        end, window = start, window * 4
    return None


def _read_span(
    consumer: Consumer, kafka: KafkaSettings, topic: str, partition: int, start: int
) -> Message | None:
    """The last record from `start` to the partition's end (read_committed)."""
    return _read_spans(consumer, kafka, {(topic, partition): start}).get((topic, partition))
