"""Offset ranges to ingest: from a pool's recorded progress up to observed end offsets."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

# topic -> partition -> offset
Offsets = dict[str, dict[int, int]]


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Offsets [start, end) of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def plan_ranges(progress: Offsets, low: Offsets, end: Offsets) -> list[OffsetRange]:
    """Ranges from each partition's progress (or its low watermark if new) to `end`.

    Partitions with nothing new are left out.
    """
    ranges = []
    for topic, partitions in sorted(end.items()):
        for partition, end_offset in sorted(partitions.items()):
            start = progress.get(topic, {}).get(partition, low.get(topic, {}).get(partition, 0))
            if end_offset > start:
                ranges.append(OffsetRange(topic, partition, start, end_offset))
    return ranges


def advance(progress: Offsets, ranges: list[OffsetRange]) -> Offsets:
    """Progress after `ranges` are committed."""
    result = {topic: dict(parts) for topic, parts in progress.items()}
    for r in ranges:
        result.setdefault(r.topic, {})[r.partition] = r.end
    return result


def spark_offsets_json(ranges: list[OffsetRange], which: str) -> str:
    """startingOffsets/endingOffsets JSON for Spark's Kafka source."""
    data: dict[str, dict[str, int]] = {}
    for r in ranges:
        data.setdefault(r.topic, {})[str(r.partition)] = getattr(r, which)
    return json.dumps(data)


def offsets_to_json(offsets: Mapping[str, Mapping[int, int]]) -> dict[str, dict[str, int]]:
    return {
        t: {str(p): o for p, o in sorted(parts.items())} for t, parts in sorted(offsets.items())
    }


def offsets_from_json(data: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in data.items()}


def offsets_from_metadata(value: object) -> Offsets:
    """Offsets recorded in Dagster metadata: a JSON value, or the JSON text that
    materializations recorded before it was typed (an instance keeps both kinds)."""
    data = json.loads(value) if isinstance(value, str) else value
    if not isinstance(data, Mapping):
        raise ValueError(f"expected offsets as {{topic: {{partition: offset}}}}, got {value!r}")
    return offsets_from_json(data)


def lag(progress: Offsets, end: Offsets) -> int:
    return sum(
        max(0, e - progress.get(t, {}).get(p, 0))
        for t, parts in end.items()
        for p, e in parts.items()
    )
