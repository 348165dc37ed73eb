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


def watermarks(kafka: KafkaSettings, topics: list[str]) -> dict[str, list[PartitionOffsets]]:
    """Watermarks of every partition of each topic; a clear error for a missing topic."""
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


def topic_offsets(kafka: KafkaSettings, topic: str) -> list[PartitionOffsets]:
    return watermarks(kafka, [topic])[topic]
