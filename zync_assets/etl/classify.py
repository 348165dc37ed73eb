"""Which pending events each rule takes, which pairs form, which must wait.

Every pending input event gets one status:

    paired     a denorm event matched one-to-one with a partner (in source order per join key)
    released   a stateless event, free to go
    blocked    a stateless event behind an earlier event of the same Kafka key (same
               topic-partition) that is still waiting: it keeps waiting, so an update
               is never emitted before the create it follows
    waiting    a denorm event without a partner (yet)
    expired    a waiting event older than its rule's `expire-after`
    unmatched  no rule takes it (done, with no output: it would never be taken)
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from zync_assets.etl.compile import CompiledRule, event_struct
from zync_assets.etl.expiry import parse_expiry
from zync_assets.ingest.ranges import Offsets

COORDS = ("topic", "partition", "offset")
WAITING_STATES = ("waiting", "blocked")


def coords(prefix: str = "kafka") -> list[Column]:
    return [F.col(f"{prefix}.{c}").alias(f"__{c}") for c in COORDS]


def position() -> Column:
    """Source order: Kafka timestamp, then topic, partition and offset."""
    return F.struct(
        F.col("kafka.timestamp").alias("ts"),
        F.col("kafka.topic").alias("topic"),
        F.col("kafka.partition").alias("partition"),
        F.col("kafka.offset").alias("offset"),
    )


def route(events: DataFrame, rules: list[CompiledRule]) -> DataFrame:
    """Add `__rule`: the number of the first rule whose topic and `where` match (0: none)."""
    choice = F.lit(0)
    for rule in reversed(rules):
        takes = F.col("kafka.topic").isin(list(rule.topics)) & F.coalesce(rule.where, F.lit(False))
        choice = F.when(takes, F.lit(rule.number)).otherwise(choice)
    chain = F.when(
        F.col("key").isNotNull(),
        F.concat_ws(
            "\u0000", F.col("kafka.topic"), F.col("kafka.partition").cast("string"),
            F.col("key").cast("string"),
        ),
    )  # fmt: skip
    return events.select(
        "*", choice.alias("__rule"), position().alias("__pos"), chain.alias("__chain")
    )


@dataclass(frozen=True)
class Pairs:
    rule: CompiledRule
    frame: DataFrame  # columns: left, right (event structs), __pos (the left's)


def pair(routed: DataFrame, rule: CompiledRule) -> Pairs:
    """One-to-one pairs of the rule's left and right events, in source order per join key."""
    assert rule.rule.left and rule.rule.right
    left_key, right_key = rule.join_keys()
    taken = routed.where(F.col("__rule") == rule.number)

    def side(topic: str, name: str, key: Column) -> DataFrame:
        frame = taken.where(F.col("kafka.topic") == topic).select(
            event_struct().alias(name), F.col("__pos").alias(f"__{name}_pos")
        )
        frame = frame.withColumn("__jk", key).where(F.col("__jk").isNotNull())
        order = Window.partitionBy("__jk").orderBy(f"__{name}_pos")
        return frame.withColumn("__n", F.row_number().over(order))

    lefts = side(rule.rule.left, "left", left_key)
    rights = side(rule.rule.right, "right", right_key)
    joined = lefts.join(rights, ["__jk", "__n"]).select(
        "left", "right", F.col("__left_pos").alias("__pos")
    )
    return Pairs(rule, joined)


def _expiry_condition(rule: CompiledRule, raw_end: Offsets, now: dt.datetime) -> Column:
    if not rule.rule.expire_after:
        return F.lit(False)
    expiry = parse_expiry(rule.rule.expire_after)
    if expiry.seconds is not None:
        cutoff = now - dt.timedelta(seconds=expiry.seconds)
        return F.col("kafka.timestamp") < F.lit(cutoff)
    end = F.lit(None).cast("long")
    for topic, parts in raw_end.items():
        for partition, offset in parts.items():
            here = (F.col("kafka.topic") == topic) & (F.col("kafka.partition") == partition)
            end = F.when(here, F.lit(offset)).otherwise(end)
    later = end - F.col("kafka.offset") - 1  # offsets its partition has moved on since
    return later > F.lit(expiry.offsets)


def classify(
    routed: DataFrame,
    rules: list[CompiledRule],
    pairs: list[Pairs],
    raw_end: Offsets,
    now: dt.datetime,
) -> DataFrame:
    """Add `__status` to every routed event (see the module doc)."""
    paired = None
    for found in pairs:
        both = found.frame.select(*coords("left.kafka")).unionByName(
            found.frame.select(*coords("right.kafka"))
        )
        paired = both if paired is None else paired.unionByName(both)
    flagged = routed.select("*", *coords())
    if paired is not None:
        flagged = flagged.join(
            paired.withColumn("__paired", F.lit(True)), [f"__{c}" for c in COORDS], "left"
        )
    else:
        flagged = flagged.withColumn("__paired", F.lit(None).cast("boolean"))

    kind = {r.number: r.rule.type for r in rules}
    denorm = F.col("__rule").isin([n for n, t in kind.items() if t == "denorm"] or [-1])
    expired = F.lit(False)
    for rule in rules:
        if rule.rule.type == "denorm":
            mine = F.col("__rule") == rule.number
            expired = expired | (mine & _expiry_condition(rule, raw_end, now))
    status = (
        F.when(F.col("__rule") == 0, "unmatched")
        .when(denorm & F.col("__paired").isNotNull(), "paired")
        .when(denorm & expired, "expired")
        .when(denorm, "waiting")
        .otherwise("released")
    )
    flagged = flagged.withColumn("__status", status)
    # A stateless event behind a waiting event of its chain waits too.
    earlier = (
        Window.partitionBy("__chain").orderBy("__offset").rowsBetween(Window.unboundedPreceding, -1)
    )
    waiting_before = F.max((F.col("__status") == "waiting").cast("int")).over(earlier)
    blocked = (
        (F.col("__status") == "released") & F.col("__chain").isNotNull() & (waiting_before == 1)
    )
    return flagged.withColumn(
        "__status", F.when(blocked, F.lit("blocked")).otherwise(F.col("__status"))
    ).drop("__paired")
