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

log = logging.getLogger(__name__)

# Every round moves effective positions one chain further. Pairs that cross (two
# events of one key pair with two events of another key in opposite orders) have no
# order that satisfies both keys; after this many rounds the pass stops looking.
MAX_ROUNDS = 32


def chain_link(name: str | None) -> Column:
    """The chain (topic, partition, Kafka key) of an event struct, and its offset in it.
    Events without a key belong to no chain."""
    event = (lambda f: F.col(f"{name}.{f}")) if name else F.col
    chain = F.when(
        event("key").isNotNull(),
        F.concat_ws(
            "\u0000", event("kafka.topic"), event("kafka.partition").cast("string"),
            event("key").cast("string"),
        ),
    )  # fmt: skip
    return F.struct(chain.alias("chain"), event("kafka.offset").alias("offset"))


def with_effective_position(outputs: DataFrame) -> DataFrame:
    """Add `__effective` (struct pos, steps) to outputs that carry `__pos` (their own
    position), `__src` (the coordinates of their source event: unique per output) and
    `__chains` (an array of `chain_link`s)."""
    ided = outputs.withColumn(
        "__id", F.struct(*(F.col(f"__src.{c}") for c in ("topic", "partition", "offset")))
    )
    links = (
        ided.select("__id", F.explode("__chains").alias("__link"))
        .where(F.col("__link.chain").isNotNull())
        .select(
            "__id", F.col("__link.chain").alias("__chain"), F.col("__link.offset").alias("__at")
        )
    )
    own = F.struct(F.col("__pos").alias("pos"), F.lit(0).alias("steps"))
    effective = ided.select("__id", own.alias("__effective"))
    earlier = (
        Window.partitionBy("__chain").orderBy("__at").rowsBetween(Window.unboundedPreceding, -1)
    )
    for _ in range(MAX_ROUNDS):
        before = links.join(effective, "__id").select(
            "__id", F.max("__effective").over(earlier).alias("__before")
        )
        floor = (
            before.where(F.col("__before").isNotNull())
            .groupBy("__id")
            .agg(
                F.max(
                    F.struct(
                        F.col("__before.pos").alias("pos"),
                        (F.col("__before.steps") + 1).alias("steps"),
                    )
                ).alias("__floor")
            )
        )
        raised = effective.join(floor, "__id", "left").select(
            "__id",
            F.greatest("__effective", "__floor").alias("__effective"),
            (F.col("__floor") > F.col("__effective")).alias("__raised"),
        )
        raised = raised.localCheckpoint(eager=True)  # the next round reads it, not its plan
        effective = raised.drop("__raised")
        if raised.where("__raised").isEmpty():
            break
    else:
        log.warning(
            "pairs in this pass cross (two keys each wait on the other); "
            "their outputs are ordered by position"
        )
    return ided.join(effective.select("__id", "__effective"), "__id")


def output_offset(next_offsets: dict[str, int]) -> Column:
    """Dense offsets per output topic (`__topic`) from each topic's next offset, in
    effective order."""
    start = F.lit(0).cast("long")
    for topic, offset in next_offsets.items():
        start = F.when(F.col("__topic") == topic, F.lit(offset)).otherwise(start)
    order = Window.partitionBy("__topic").orderBy("__effective", "__pos", "__id")
    return start + F.row_number().over(order) - 1
