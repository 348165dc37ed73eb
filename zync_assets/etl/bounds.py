"""Row filters on Kafka coordinates: at or above the ETL cursors, below the raw ends.

Each is one SQL expression whose size does not grow with the partitions: the per-partition
offsets are a map literal looked up by `topic:partition` (a chain of comparisons per
partition made a whole database's filter longer than the 64 KB a generated Java method may
hold, and Spark then printed the compiler's stack trace and ran it interpreted).
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from zync_assets.core.offsets import Offsets
from zync_assets.spark.session import sql_literal

# Up to this many topics, a filter also says each topic's lowest offset on its own (a
# conjunct Delta skips whole files by); beyond, one lowest offset for all of them.
_SKIPPING_TOPICS = 32


def above_cursors(
    cursors: Offsets, topics: list[str], prefix: str = "kafka", ends: Offsets | None = None
) -> Column:
    """Rows of `topics` at or above the per-partition cursors (0 where none), with plain
    `offset >= lowest` conjuncts that let Delta skip whole files by their statistics.
    `ends`: the partitions the rows may be in; one without a cursor (a partition added to
    the topic, or first written, since the cursors) makes its topic's lowest offset 0."""
    if not topics:
        return F.lit(False)
    lowest = {t: _lowest(cursors.get(t, {}), (ends or {}).get(t, {})) for t in topics}
    if len(topics) <= _SKIPPING_TOPICS:
        per_topic = " OR ".join(
            f"({prefix}.topic = {sql_literal(t)} AND {prefix}.offset >= {low})"
            for t, low in lowest.items()
        )
    else:
        per_topic = (
            f"array_contains({_strings(topics)}, {prefix}.topic) AND "
            f"{prefix}.offset >= {min(lowest.values())}"
        )
    floors = {f"{t}:{p}": c for t in topics for p, c in cursors.get(t, {}).items()}
    exact = f"{prefix}.offset >= coalesce(try_element_at({_map(floors)}, {_place(prefix)}), 0)"
    return F.expr(f"({per_topic}) AND {exact}")


def _lowest(cursors: dict[int, int], ends: dict[int, int]) -> int:
    """The lowest offset a topic's rows above `cursors` can have, in partitions `ends`."""
    if any(p not in cursors for p in ends):
        return 0
    return min(cursors.values(), default=0)


def below_ends(ends: Offsets, prefix: str = "kafka") -> Column:
    """Rows below each topic-partition's end offset (rows of other partitions: none)."""
    limits = {f"{t}:{p}": end for t, parts in ends.items() for p, end in parts.items()}
    if not limits:
        return F.lit(False)
    return F.expr(
        f"coalesce({prefix}.offset < try_element_at({_map(limits)}, {_place(prefix)}), false)"
    )


def _place(prefix: str) -> str:
    """A row's `topic:partition` (a Kafka topic name holds no colon)."""
    return f"concat({prefix}.topic, ':', CAST({prefix}.partition AS string))"


def _map(offsets: dict[str, int]) -> str:
    if not offsets:
        return "CAST(map() AS map<string,bigint>)"
    pairs = ", ".join(f"{sql_literal(k)}, CAST({v} AS bigint)" for k, v in offsets.items())
    return f"map({pairs})"


def _strings(values: list[str]) -> str:
    return f"array({', '.join(sql_literal(v) for v in values)})"
