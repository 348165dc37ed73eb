"""Row filters on Kafka coordinates: at or above the ETL cursors, below the raw ends."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from zync_assets.core.offsets import Offsets


def above_cursors(cursors: Offsets, topics: list[str], prefix: str = "kafka") -> Column:
    """Rows of `topics` at or above the per-partition cursors (a plain `offset >= min`
    conjunct per topic lets Delta skip whole files by their statistics)."""
    condition = F.lit(False)
    for topic in topics:
        parts = cursors.get(topic, {})
        floor = F.lit(0)
        for partition, cursor in parts.items():
            floor = F.when(F.col(f"{prefix}.partition") == partition, F.lit(cursor)).otherwise(
                floor
            )
        lowest = min(parts.values(), default=0)
        condition = condition | (
            (F.col(f"{prefix}.topic") == topic)
            & (F.col(f"{prefix}.offset") >= lowest)
            & (F.col(f"{prefix}.offset") >= floor)
        )
    return condition


def below_ends(ends: Offsets, prefix: str = "kafka") -> Column:
    """Rows below each topic-partition's end offset (rows of other partitions: none)."""
    condition = F.lit(False)
    for topic, parts in ends.items():
        for partition, end in parts.items():
            condition = condition | (
                (F.col(f"{prefix}.topic") == topic)
                & (F.col(f"{prefix}.partition") == partition)
                & (F.col(f"{prefix}.offset") < end)
            )
    return condition
