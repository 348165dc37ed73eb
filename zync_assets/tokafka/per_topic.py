"""What every to-kafka run does for each topic, whether it sends a topic alone (sync.py) or
a pool's topics together (together.py): make sure the topic exists, check that staging
continues where the topic stands, say an encoder's refusal in one line, and report."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from zync_assets.core.errors import ZyncError
from zync_assets.core.settings import KafkaSettings
from zync_assets.kafka import clients
from zync_assets.tokafka.encode import Span

# zync_variant_avro (jvm/src) prefixes its refusals so they can be told from Spark's own.
# Spark quotes them as "...: zync to-kafka: <reason>. SQLSTATE: 39000" or on a line of its own.
ENCODER_ERROR = re.compile(r"zync to-kafka: (.*?)(?:\. SQLSTATE|\n|$)")
T = TypeVar("T")


class EncoderRefused(ZyncError):
    """A record does not fit the schemas its chunk was encoded with."""


@dataclass(frozen=True)
class SyncResult:
    pool: str
    topic: str
    sent: int
    first_offset: int  # staging offset of the first record sent (= where the topic stood)
    next_offset: int  # staging offset the next run starts at
    high_water_before: dict[int, int]
    high_water_after: dict[int, int]
    subjects: dict[str, int] = field(default_factory=dict)


Progress = Callable[[str, int, int], None]  # topic, records sent, records to send


def ensure_topic(kafka: KafkaSettings, topic: str, partitions: int | None) -> None:
    existing = clients.cluster_metadata(kafka).topics
    if topic not in existing:
        clients.ensure_topic(kafka, topic, partitions or 1)
        return
    count = len(existing[topic].partitions)
    if partitions is not None and partitions != count:
        raise ZyncError(
            f"topic {topic!r} already has {count} partition(s), not {partitions}; keys would "
            "move between partitions: drop --partitions, or send to a new topic"
        )


def check_continues(pool: str, topic: str, start: int, found: Span) -> None:
    """Staging must hold the records right after the topic's last one, densely."""
    if start > 0 and not found.has_previous:
        raise ZyncError(
            f"topic {topic!r} already holds staging offsets up to {start - 1}, beyond what "
            f"staging pool {pool} has for it; was the pool dropped or rebuilt? "
            "refusing to send (send to a new topic)"
        )
    if found.count == 0:
        return
    expected = found.high - start + 1 if found.high is not None else 0
    if found.low != start or found.count != expected:
        raise ZyncError(
            f"staging pool {pool} has a gap in topic {topic!r}'s offsets: the topic needs "
            f"{start}..{found.high} ({expected} records) and staging has {found.count} of them, "
            f"from {found.low}; refusing to send (the sink would miss records)"
        )


def spark_job(job: Callable[[], T], low: int, high: int | None) -> T:
    """`job`, with a refusal of our encoder said in one line (EncoderRefused)."""
    try:
        return job()
    except ZyncError:
        raise
    except Exception as exc:  # a failed Spark job: say why if our encoder refused a record
        refusal = ENCODER_ERROR.search(str(exc))
        if refusal is None:
            raise
        where = f"{low}..{high - 1}" if high is not None else f"from {low} on"
        raise EncoderRefused(
            f"{refusal.group(1)} (staging offsets {where}); nothing of them was sent"
        ) from exc
