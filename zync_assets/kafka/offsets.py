"""Low and high watermarks of topic-partitions (metadata calls only, with timeouts)."""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import KafkaException, TopicPartition

from zync_assets.kafka import clients
from zync_assets.settings import KafkaSettings


@dataclass(frozen=True)
class PartitionOffsets:
    partition: int
    low: int
    high: int


def watermarks(
    kafka: KafkaSettings, topics: list[str], missing_ok: bool = False
) -> dict[str, list[PartitionOffsets]]:
    """Watermarks of every partition of each topic; a missing topic is an error, or
    (with `missing_ok`) a topic without partitions, e.g. one Debezium has not created yet."""
    if missing_ok:
        existing = clients.cluster_metadata(kafka).topics
        partitions = {t: sorted(existing[t].partitions) if t in existing else [] for t in topics}
    else:
        partitions = {topic: clients.partitions_of(kafka, topic) for topic in topics}
    consumer = clients.consumer(kafka)
    try:
        return {
            topic: [
                PartitionOffsets(
                    p,
                    *consumer.get_watermark_offsets(
                        TopicPartition(topic, p), timeout=clients.CONNECT_TIMEOUT_S
                    ),
                )
                for p in parts
            ]
            for topic, parts in partitions.items()
        }
    except KafkaException as exc:
        raise clients.unreachable(kafka, exc.args[0].str()) from exc
    finally:
        consumer.close()


def high_marks(marks: dict[str, list[PartitionOffsets]]) -> dict[str, dict[int, int]]:
    """{topic: {partition: high watermark}}: the end offsets, as cursors are kept."""
    return {topic: {p.partition: p.high for p in parts} for topic, parts in marks.items()}


def topic_offsets(kafka: KafkaSettings, topic: str) -> list[PartitionOffsets]:
    return watermarks(kafka, [topic])[topic]
