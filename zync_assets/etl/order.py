"""The order in which one ETL pass numbers its output records.

Source order is each event's position: Kafka timestamp, then topic, partition and
offset (a pair takes the position of its left event, as in zync). One rule overrides
it: an event's output never precedes the output of an earlier event of the same
Kafka key (topic, partition, key: its *chain*) written in the same pass. Across
passes that holds already, because an event behind a pending one of its chain is
blocked (classify.py) and later passes number after earlier ones.

So each output gets an *effective position*: the largest of its own position and,
for every chain it belongs to (a pair belongs to two), the effective positions of
the outputs of earlier events of that chain, one step later. Transitively: a payment
update that waited behind a payment create follows the create's pair, which itself
follows the output of an earlier event of the order's key. Outputs are numbered by
(effective position, steps, own position).
"""

from __future__ import annotations

import logging

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from zync_assets.spark.session import looked_up

log = logging.getLogger(__name__)

# Every round moves effective positions one chain further. Pairs that cross (two
# events of one key pair with two events of another key in opposite orders) have no
# order that satisfies both keys; after this many rounds the pass stops looking.
MAX_ROUNDS = 32


def moved_outputs(classified: DataFrame) -> DataFrame | None:
    """`__id` (an output's source coordinates) → `__effective` (struct pos, steps) of the
    pass's outputs that move later than their own position, or None if none does.

    Reads only the classified events (`__status`, `__chain`, `__output`, `__output_pos`),
    not the outputs: a rule's SQL runs once, in the write. The usual pass, where no
    output moves, costs one job over the cached events."""
    links = classified.where(
        F.col("__status").isin("paired", "released") & F.col("__chain").isNotNull()
    ).select(
        F.col("__output").alias("__id"),
        "__chain",
        F.col("kafka.offset").alias("__at"),
        F.struct(F.col("__output_pos").alias("pos"), F.lit(0).alias("steps")).alias("__effective"),
    )
    if _raised(links).isEmpty():
        return None
    effective = links.select("__id", "__effective").dropDuplicates(["__id"])
    links = links.drop("__effective")
    moved = None
    for _ in range(MAX_ROUNDS):
        raised = (
            _raised(links.join(effective, "__id"))
            .groupBy("__id")
            .agg(F.max("__floor").alias("__effective"))
            .localCheckpoint(eager=True)  # the next round reads it, not its plan
        )
        if raised.isEmpty():
            return moved
        moved = (
            raised if moved is None else moved.join(raised, "__id", "left_anti").unionByName(raised)
        )
        moved = moved.localCheckpoint(eager=True)
        effective = effective.join(raised, "__id", "left_anti").unionByName(raised)
        effective = effective.localCheckpoint(eager=True)
    log.warning(
        "outputs of this pass still moved after %d rounds (pairs that cross, two keys each "
        "waiting on the other, have no order that keeps both): the rest keep the order found so far",
        MAX_ROUNDS,
    )
    return moved


def _raised(links: DataFrame) -> DataFrame:
    """Links whose output must move after an earlier output of the chain: `__floor` is
    that output's effective position, one step later."""
    earlier = (
        Window.partitionBy("__chain").orderBy("__at").rowsBetween(Window.unboundedPreceding, -1)
    )
    before = F.max("__effective").over(earlier)
    floor = F.struct(before.pos.alias("pos"), (before.steps + 1).alias("steps"))
    return (
        links.select("*", F.when(before.isNotNull(), floor).alias("__floor"))
        .where(F.col("__floor") > F.col("__effective"))
        .select("__id", "__floor")
    )


def with_effective_position(outputs: DataFrame, moved: DataFrame | None) -> DataFrame:
    """Add `__id` and `__effective` to outputs carrying `__src` (source coordinates) and
    `__pos` (own position)."""
    ided = outputs.withColumn(
        "__id", F.struct(*(F.col(f"__src.{c}").alias(c) for c in ("topic", "partition", "offset")))
    )
    own = F.struct(F.col("__pos").alias("pos"), F.lit(0).alias("steps"))
    if moved is None:
        return ided.withColumn("__effective", own)
    return ided.join(moved, "__id", "left").withColumn(
        "__effective", F.coalesce(F.col("__effective"), own)
    )


def output_offset(next_offsets: dict[str, int]) -> Column:
    """Dense offsets per output topic (`__topic`) from each topic's next offset, in
    effective order (`__tie`: the order of a group's several outputs, groups.py)."""
    start = looked_up(next_offsets, F.col("__topic"), F.lit(0))
    order = Window.partitionBy("__topic").orderBy("__effective", "__pos", "__id", "__tie")
    return start + F.row_number().over(order) - 1
