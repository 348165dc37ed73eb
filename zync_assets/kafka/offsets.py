"""Low and high watermarks of topic-partitions (metadata calls only, with timeouts)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from zync_assets.core.settings import KafkaSettings
from zync_assets.kafka import clients

# A partition whose leader is moving (a broker restart, a managed service's failover)
# answers ListOffsets with these until the new leader is known, within moments: asked
# again, not reported as an outage. A client that saw the partition before the restart
# holds a leader epoch the restarted broker has not loaded yet (UNKNOWN_LEADER_EPOCH, CI
# 2026-12-03) or an older one (FENCED_LEADER_EPOCH); a new leader not yet caught up says
# OFFSET_NOT_AVAILABLE.
_LEADER_MOVING = {
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_ENOUGH_REPLICAS,
    KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.FENCED_LEADER_EPOCH,
    KafkaError.OFFSET_NOT_AVAILABLE,
}
_ASK_AGAIN_S = 0.25
T = TypeVar("T")


@dataclass(frozen=True)
class PartitionOffsets:
    partition: int
    low: int
    high: int


def watermarks(
    kafka: KafkaSettings, topics: list[str], missing_ok: bool = False
) -> dict[str, list[PartitionOffsets]]:
    """Watermarks of every partition of each topic; a missing topic is an error, or
    (with `missing_ok`) a topic without partitions, e.g. one Debezium has not created yet.

    Three requests whatever the number of topics and partitions (one metadata call, then
    the earliest and the latest offsets of every partition in one ListOffsets each), so a
    sensor tick over a thousand topics costs what one over a single topic does."""
    existing = clients.cluster_metadata(kafka).topics
    if not missing_ok and (missing := [t for t in topics if t not in existing]):
        raise clients.no_such_topic(kafka, missing[0])
    partitions = {t: sorted(existing[t].partitions) if t in existing else [] for t in topics}
    wanted = [TopicPartition(t, p) for t, parts in partitions.items() for p in parts]
    low, high = (
        _list_offsets(kafka, wanted, OffsetSpec.earliest()),
        _list_offsets(kafka, wanted, OffsetSpec.latest()),
    )
    return {
        topic: [PartitionOffsets(p, low[(topic, p)], high[(topic, p)]) for p in parts]
        for topic, parts in partitions.items()
    }


def _list_offsets(
    kafka: KafkaSettings, wanted: list[TopicPartition], spec: OffsetSpec
) -> dict[tuple[str, int], int]:
    """The offsets, asking again while a partition's leader moves, for up to
    CONNECT_TIMEOUT_S; then, or on any other failure, Unavailable."""
    return asking_again(
        lambda: _list_offsets_once(kafka, wanted, spec),
        give_up=lambda error: clients.unreachable(kafka, error.str()),
        for_s=clients.CONNECT_TIMEOUT_S,
    )


def asking_again(
    call: Callable[[], T], give_up: Callable[[KafkaError], Exception], for_s: float
) -> T:
    """`call()`, asked again every _ASK_AGAIN_S while it says a leader moves (raises
    LeaderMoving), for up to `for_s` seconds; then `give_up(the last error)` is raised."""
    deadline = time.monotonic() + for_s
    while True:
        try:
            return call()
        except LeaderMoving as moving:
            if time.monotonic() >= deadline:
                raise give_up(moving.error) from moving
            time.sleep(_ASK_AGAIN_S)


class LeaderMoving(Exception):
    """A request met a partition whose leader is moving (one of _LEADER_MOVING)."""

    def __init__(self, error: KafkaError) -> None:
        super().__init__(error.str())
        self.error = error


def _list_offsets_once(
    kafka: KafkaSettings, wanted: list[TopicPartition], spec: OffsetSpec
) -> dict[tuple[str, int], int]:
    if not wanted:
        return {}
    admin = clients.connected_admin(kafka)
    try:
        futures = admin.list_offsets(
            {tp: spec for tp in wanted}, request_timeout=clients.CONNECT_TIMEOUT_S
        )
        return {
            (tp.topic, tp.partition): future.result(timeout=clients.CONNECT_TIMEOUT_S).offset
            for tp, future in futures.items()
        }
    except KafkaException as exc:
        if exc.args[0].code() in _LEADER_MOVING:
            raise LeaderMoving(exc.args[0]) from exc
        raise clients.unreachable(kafka, exc.args[0].str()) from exc
    except TimeoutError as exc:  # the broker went away between metadata and offsets
        detail = f"no answer to ListOffsets within {clients.CONNECT_TIMEOUT_S:g}s"
        raise clients.unreachable(kafka, detail) from exc


def high_marks(marks: dict[str, list[PartitionOffsets]]) -> dict[str, dict[int, int]]:
    """{topic: {partition: high watermark}}: the end offsets, as cursors are kept."""
    return {topic: {p.partition: p.high for p in parts} for topic, parts in marks.items()}


def topic_offsets(kafka: KafkaSettings, topic: str) -> list[PartitionOffsets]:
    return watermarks(kafka, [topic])[topic]


def group_offsets(kafka: KafkaSettings, group: str) -> dict[tuple[str, int], int]:
    """The offsets consumer group `group` has committed, by (topic, partition); {} for a
    group that has committed none (or does not exist)."""
    admin = clients.connected_admin(kafka)
    try:
        futures = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=clients.CONNECT_TIMEOUT_S
        )
        found = futures[group].result(timeout=clients.CONNECT_TIMEOUT_S)
    except KafkaException as exc:
        raise clients.unreachable(kafka, exc.args[0].str()) from exc
    except TimeoutError as exc:
        detail = f"no answer to OffsetFetch within {clients.CONNECT_TIMEOUT_S:g}s"
        raise clients.unreachable(kafka, detail) from exc
    return {
        (tp.topic, tp.partition): tp.offset
        for tp in found.topic_partitions or []
        if tp.offset >= 0 and tp.error is None
    }
