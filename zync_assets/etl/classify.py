"""Which pending events each rule takes, which pairs form, which must wait.

Every pending input event gets one status:

    paired     a denorm event matched one-to-one with a partner (in source order per join key)
    released   a stateless event, free to go; an event of a complete group (`txn` rules)
    blocked    an event behind an earlier pending event of the same Kafka key (same
               topic-partition): it keeps waiting, so an update is never emitted before
               the create it follows. A denorm event whose partner is blocked is blocked
               too (`__held` says which: `key` or `partner`); the pair forms later.
    waiting    a denorm event without a partner (yet)
    expired    a waiting event older than its rule's `expire-after`; an event of an
               open transaction or group past it; an event a `group-by` puts in no group
    unmatched  no rule takes it (done, with no output: it would never be taken)
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from zync_assets.core.events import event_struct
from zync_assets.core.offsets import Offsets
from zync_assets.etl.compile import CompiledRule
from zync_assets.etl.gate import GATED, TXN, TXN_EXPIRED, TXN_POS
from zync_assets.spark.session import one_of, pinned, unpin
from zync_assets.specs.expiry import parse_expiry

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
        takes = one_of("kafka.topic", rule.topics) & F.coalesce(rule.where, F.lit(False))
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
class Classified:
    """The routed events with their `__status`, their tally, and the pinned frame they are
    read from: `release()` it when the pass is done."""

    events: DataFrame
    cache: DataFrame
    tally: list[Tally]  # per input topic-partition, status and rule

    def release(self) -> None:
        unpin(self.cache)


@dataclass(frozen=True)
class Pairs:
    rule: CompiledRule
    frame: DataFrame  # columns: left, right (event structs), __pos (the left's)


def pair(routed: DataFrame, rule: CompiledRule) -> Pairs:
    """One-to-one pairs of the rule's left and right events, in source order per join key."""
    assert rule.rule.left and rule.rule.right
    left_key, right_key = rule.join_keys()
    taken = routed.where((F.col("__rule") == rule.number) & ~F.col(GATED))

    def side(topic: str, name: str, key: Column) -> DataFrame:
        frame = taken.where(F.col("kafka.topic") == topic).select(
            event_struct().alias(name),
            F.col("__pos").alias(f"__{name}_pos"),
            F.col(TXN_POS).alias(f"__{name}_txn_pos"),
            F.col(TXN).alias(f"__{name}_txn"),
        )
        frame = frame.withColumn("__jk", key).where(F.col("__jk").isNotNull())
        order = Window.partitionBy("__jk").orderBy(f"__{name}_pos")
        return frame.withColumn("__n", F.row_number().over(order))

    lefts = side(rule.rule.left, "left", left_key)
    rights = side(rule.rule.right, "right", right_key)
    joined = lefts.join(rights, ["__jk", "__n"]).select(
        "left",
        "right",
        F.coalesce("__left_txn_pos", "__left_pos").alias("__pos"),
        F.coalesce("__left_txn", "__right_txn").alias(TXN),  # the output's (tokafka/cuts.py)
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
) -> Classified:
    """Add `__status` (see the module doc) and `__held` to every routed event, and
    `__output` / `__output_pos`: the source coordinates and position of the output the
    event would take part in (a pair's: its left event's)."""
    paired = None
    for found in pairs:
        output = [
            _coord_struct("left.kafka").alias("__output"),
            F.col("__pos").alias("__output_pos"),
        ]
        both = found.frame.select(
            *coords("left.kafka"), _coord_struct("right.kafka").alias("__partner"), *output
        ).unionByName(
            found.frame.select(
                *coords("right.kafka"), _coord_struct("left.kafka").alias("__partner"), *output
            )
        )
        paired = both if paired is None else paired.unionByName(both)
    flagged = routed.select("*", *coords())
    if paired is not None:
        flagged = flagged.join(paired, [f"__{c}" for c in COORDS], "left")
    else:
        flagged = flagged.select(
            "*",
            F.lit(None).cast(_COORD_TYPE).alias("__partner"),
            F.lit(None).cast(_COORD_TYPE).alias("__output"),
            F.lit(None).alias("__output_pos"),
        )
    kind = {r.number: r.rule.type for r in rules}
    grouping = F.col("__rule").isin([n for n, t in kind.items() if t == "txn"] or [-1])
    group_output = F.when(grouping & F.col(TXN_POS).isNotNull(), _coord_struct(TXN_POS))
    flagged = flagged.withColumn(
        "__output", F.coalesce("__output", group_output, _coord_struct("kafka"))
    ).withColumn("__output_pos", F.coalesce("__output_pos", TXN_POS, "__pos"))

    denorm = F.col("__rule").isin([n for n, t in kind.items() if t == "denorm"] or [-1])
    by_group = [r.number for r in rules if r.rule.group_by]
    expired = F.lit(False)
    for rule in rules:
        if rule.rule.type == "denorm":
            mine = F.col("__rule") == rule.number
            expired = expired | (mine & _expiry_condition(rule, raw_end, now))
    status = (
        F.when(F.col(GATED) & F.col(TXN_EXPIRED), "expired")
        .when(F.col(GATED), "waiting")
        .when(F.col("__rule") == 0, "unmatched")
        .when(F.col("__rule").isin(by_group or [-1]) & F.col(TXN).isNull(), "expired")  # no group
        .when(denorm & F.col("__partner").isNotNull(), "paired")
        .when(denorm & expired, "expired")
        .when(denorm, "waiting")
        .otherwise("released")
    )
    flagged = flagged.withColumn("__status", status).withColumn(
        "__held", F.when(F.col(GATED), F.lit(HELD_BY_TRANSACTION)).cast("string")
    )
    held = _hold_back(flagged)
    if not any(r.rule.transactional for r in rules):
        return held
    return _keep_transactions_whole(held)


_COORD_TYPE = "struct<topic: string, partition: int, offset: bigint>"
HELD_BY_KEY = "key"  # an earlier event of its own Kafka key is pending
HELD_BY_PARTNER = "partner"  # its partner is held back by the partner's own key
HELD_BY_TRANSACTION = "transaction"  # its source transaction is not complete, or not whole
_CONSUMED = ("released", "paired", "unmatched")


def _coord_struct(prefix: str) -> Column:
    return F.struct(*(F.col(f"{prefix}.{c}").alias(c) for c in COORDS))


def _hold_back(flagged: DataFrame) -> Classified:
    """Per-key order: an event behind a pending (waiting or blocked) event of its own
    Kafka key is blocked, whether it is stateless or one side of a pair, so its output
    can never precede the output of the event it waits behind (in this pass or a later
    one). A pair with one side blocked does not form: its other side is blocked too,
    which may hold back the later events of that side's key, and so on. Each round of
    this fixpoint only adds blocked events, so it ends: in one round unless pairs break.
    The tally of each round is the check, so the usual pass runs one job here.
    """
    earlier = (
        Window.partitionBy("__chain").orderBy("__offset").rowsBetween(Window.unboundedPreceding, -1)
    )
    current, cached = flagged, list[DataFrame]()
    while True:
        holding = F.col("__status").isin(*WAITING_STATES).cast("int")
        behind = F.max(holding).over(earlier) == 1
        stops = F.col("__status").isin("released", "paired") & F.col("__chain").isNotNull() & behind
        step = pinned(current.withColumn("__stops", stops))
        rows = _tally(step, "__stops")  # reads all of `step`: every row is now pinned
        _release(cached)
        if not any(row.stops and row.status == "paired" for row in rows):
            final = _block(step, F.col("__stops"), HELD_BY_KEY).drop("__stops")
            return Classified(final, step, _fold(rows))
        broken = step.where(F.col("__stops") & (F.col("__status") == "paired")).select(
            *coords("__partner"), F.lit(True).alias("__partner_held")
        )
        marked = _block(
            step.join(broken, [f"__{c}" for c in COORDS], "left"), F.col("__stops"), HELD_BY_KEY
        )
        partner_held = F.col("__partner_held").isNotNull() & (F.col("__status") == "paired")
        current = _block(marked, partner_held, HELD_BY_PARTNER).drop("__stops", "__partner_held")
        current = pinned(current)
        cached = [step, current]


def _keep_transactions_whole(held: Classified) -> Classified:
    """A complete transaction one of whose members the per-key rule held back is held
    back whole: no output of it goes before all of them can. Blocking its members may hold
    back later events of their keys, break their pairs, and so split other transactions:
    repeat until no transaction is split (each round only adds blocked events)."""
    while True:
        events = held.events
        split = (
            events.where(F.col(TXN).isNotNull())
            .groupBy(TXN)
            .agg(
                F.max(F.col("__status").isin(*WAITING_STATES).cast("int")).alias("__waits"),
                F.max(F.col("__status").isin(*_CONSUMED).cast("int")).alias("__goes"),
            )
            .where((F.col("__waits") == 1) & (F.col("__goes") == 1))
            .select(TXN, F.lit(True).alias("__split"))
        )
        if split.isEmpty():
            return held
        stopped = events.join(split, TXN, "left").withColumn(
            "__split",
            F.coalesce(F.col("__split") & F.col("__status").isin(*_CONSUMED), F.lit(False)),
        )
        partners = stopped.where(F.col("__split") & (F.col("__status") == "paired")).select(
            *coords("__partner"), F.lit(True).alias("__partner_split")
        )
        marked = _block(
            stopped.join(partners, [f"__{c}" for c in COORDS], "left"),
            F.col("__split"),
            HELD_BY_TRANSACTION,
        )
        partner_split = F.col("__partner_split").isNotNull() & (F.col("__status") == "paired")
        current = _block(marked, partner_split, HELD_BY_PARTNER).drop("__split", "__partner_split")
        again = _hold_back(current)
        held.release()
        held = again


@dataclass(frozen=True)
class Tally:
    """The events of one input topic-partition with one status and rule."""

    topic: str
    partition: int
    status: str
    rule: int
    n: int
    low: int  # lowest offset
    oldest: dt.datetime | None  # earliest Kafka timestamp
    stops: bool = False  # (while classifying) held back by its key in this round


def _tally(frame: DataFrame, stops: str) -> list[Tally]:
    rows = (
        frame.groupBy("kafka.topic", "kafka.partition", "__status", "__rule", stops)
        .agg(
            F.count("*").alias("n"),
            F.min("kafka.offset").alias("low"),
            F.min("kafka.timestamp").alias("oldest"),
        )
        .collect()
    )
    return [
        Tally(
            r.topic, r.partition, r["__status"], r["__rule"], r.n, r.low, r.oldest, bool(r[stops])
        )
        for r in rows
    ]


def _fold(rows: list[Tally]) -> list[Tally]:
    """A round's tally with the events its key held back counted as blocked."""
    folded: dict[tuple, Tally] = {}
    for row in rows:
        status = "blocked" if row.stops else row.status
        key = (row.topic, row.partition, status, row.rule)
        seen = folded.get(key)
        if seen is None:
            folded[key] = Tally(
                row.topic, row.partition, status, row.rule, row.n, row.low, row.oldest
            )
        else:
            oldest = min((t for t in (seen.oldest, row.oldest) if t is not None), default=None)
            folded[key] = Tally(*key, seen.n + row.n, min(seen.low, row.low), oldest)
    return list(folded.values())


def _release(frames: list[DataFrame]) -> None:
    for frame in frames:
        unpin(frame)


def _block(frame: DataFrame, condition: Column, held: str) -> DataFrame:
    return frame.withColumn(
        "__held", F.when(condition, F.lit(held)).otherwise(F.col("__held"))
    ).withColumn("__status", F.when(condition, F.lit("blocked")).otherwise(F.col("__status")))


def still_paired(found: Pairs, classified: DataFrame) -> Pairs:
    """The rule's pairs that form in this pass (neither side held back)."""
    formed = classified.where(F.col("__status") == "paired").select(*coords())
    left = found.frame.select("*", *coords("left.kafka"))
    kept = left.join(formed, [f"__{c}" for c in COORDS], "left_semi").drop(
        *(f"__{c}" for c in COORDS)
    )
    return Pairs(found.rule, kept)
