"""One ETL pass of a spec into a staging pool: pending events → outputs + done records.

state    cursors and next output offsets from the staging pool's last ETL commit
read     raw rows at or above the cursors (a pinned raw snapshot), minus those that
         already have a done record at or above the cursors: the pending events
classify route to rules, pair, block, expire (classify.py)
write    output records (numbered densely per output topic, in source order) and one
         done record per consumed event, in ONE Delta commit that also records the
         new cursors; tagged with the run's Delta transaction id
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from zync_assets.delta_writes import append_once
from zync_assets.etl import classify as cl
from zync_assets.etl.bounds import above_cursors, below_ends
from zync_assets.etl.compile import (
    CompiledRule,
    compile_rules,
    event_columns,
    event_struct,
    select_outputs,
)
from zync_assets.etl.order import (
    moved_outputs,
    output_offset,
    with_effective_position,
)
from zync_assets.etl.state import EtlState, app_id, read_state, state_metadata
from zync_assets.ingest.progress import read_progress
from zync_assets.ingest.ranges import Offsets
from zync_assets.pools import dead_letter_path, pool_exists, pool_path
from zync_assets.spark import pinned, unpin
from zync_assets.spec import Spec
from zync_assets.variants import as_variant

KAFKA_TYPE = "struct<topic: string, partition: int, offset: bigint, timestamp: timestamp>"
SOURCE_TYPE = "struct<topic: string, partition: int, offset: bigint>"


@dataclass(frozen=True)
class EtlResult:
    spec: str
    pool: str
    run: int | None  # None: nothing committed
    previous: EtlState = field(default_factory=EtlState)
    read: int = 0
    outputs: dict[str, int] = field(default_factory=dict)
    done: int = 0
    expired: int = 0
    unmatched: int = 0
    pending: int = 0
    cursors: Offsets = field(default_factory=dict)
    raw_seen: Offsets = field(default_factory=dict)  # raw pool end offsets this pass read to
    oldest_pending: dt.datetime | None = None  # Kafka timestamp of the oldest pending event
    note: str = ""


@dataclass(frozen=True)
class _Snapshot:
    """The pending events of one pass and what is needed to classify them."""

    events: DataFrame  # routed (event fields, __rule, __pos, __chain)
    raw_end: Offsets  # per input topic-partition: end offset of the raw snapshot
    state: EtlState


def staging_pools(spec: Spec) -> dict[str, list[str]]:
    """staging pool → the rules' output topics in it."""
    pools: dict[str, list[str]] = {}
    for route in spec.outputs:
        pools.setdefault(route.pool, []).append(route.topic)
    return pools


def run_etl(
    spark: SparkSession,
    spec: Spec,
    now: dt.datetime | None = None,
    pool: str | None = None,
    compiled: list[CompiledRule] | None = None,
) -> list[EtlResult]:
    """One pass per staging pool of the spec (or only `pool`); `compiled`: the spec's rules
    as compile_rules made them (a long-lived caller keeps them; default: compiled here)."""
    compiled = compiled if compiled is not None else compile_rules(spark, spec)
    now = now or dt.datetime.now(dt.UTC)
    results = []
    for name, topics in staging_pools(spec).items():
        if pool is not None and name != pool:
            continue
        rules = [r for r in compiled if r.rule.out in topics]
        if rules:
            results.append(_run_pool(spark, spec, name, rules, now))
    return results


def _input_topics(rules: list[CompiledRule]) -> list[str]:
    return list(dict.fromkeys(t for r in rules for t in r.topics))


def snapshot(spark: SparkSession, spec: Spec, pool: str, rules: list[CompiledRule]) -> _Snapshot:
    state = read_state(pool_path(pool), spec.name)
    topics = _input_topics(rules)
    raw_pool_of = {r.topic: r.pool for r in spec.inputs}
    raw_end: Offsets = {}
    frames = []
    for raw_pool in dict.fromkeys(raw_pool_of[t] for t in topics):
        mine = [t for t in topics if raw_pool_of[t] == raw_pool]
        progress = read_progress(pool_path(raw_pool))
        if progress.version is None:
            continue  # nothing ingested yet
        ends = {t: progress.offsets[t] for t in mine if t in progress.offsets}
        raw_end.update(ends)
        # The newest version, cut at the progress read above: the same rows as that
        # commit's version (ingest only appends), without time travel's fresh snapshot.
        frames.append(
            spark.read.format("delta")
            .load(pool_path(raw_pool))
            .where(
                F.col("dead_letter").isNull()
                & above_cursors(state.cursors, mine)
                & below_ends(ends)
            )
            .select("kafka", "key", "value")
        )
    if not frames:
        empty = spark.createDataFrame([], "kafka " + KAFKA_TYPE + ", key variant, value variant")
        frames = [empty]
    candidates = frames[0]
    for frame in frames[1:]:
        candidates = candidates.unionByName(frame)
    path = pool_path(pool)
    if pool_exists(path):
        done = (
            spark.read.format("delta")
            .load(path)
            .where((F.col("kind") == "done") & above_cursors(state.cursors, topics))
            .select(*cl.coords())
        )
        candidates = candidates.select("*", *cl.coords()).join(
            done, [f"__{c}" for c in cl.COORDS], "left_anti"
        )
    events = candidates.select(*event_columns())
    return _Snapshot(cl.route(events, rules), raw_end, state)


@dataclass(frozen=True)
class Pass:
    """The pending events of one pass, classified, and the pairs that form in it.
    Its frames are pinned (spark.pinned): `release()` it when done."""

    snap: _Snapshot
    routed: DataFrame  # the snapshot's events, pinned
    classified: cl.Classified
    pairs: list[cl.Pairs]

    @property
    def events(self) -> DataFrame:
        return self.classified.events

    def release(self) -> None:
        self.classified.release()
        unpin(self.routed)


def classified_events(
    spark: SparkSession, spec: Spec, pool: str, rules: list[CompiledRule], now: dt.datetime
) -> Pass:
    snap = snapshot(spark, spec, pool, rules)
    routed = pinned(snap.events)
    try:
        pairs = [cl.pair(routed, r) for r in rules if r.rule.type == "denorm"]
        classified = cl.classify(routed, rules, pairs, snap.raw_end, now)
    except BaseException:
        unpin(routed)
        raise
    formed = [cl.still_paired(found, classified.events) for found in pairs]
    return Pass(snap, routed, classified, formed)


def _outputs(
    classified: DataFrame, pairs: list[cl.Pairs], rules: list[CompiledRule], run: int,
    next_offsets: dict[str, int],
) -> DataFrame:  # fmt: skip
    """Output records of this pass, numbered per output topic."""
    produced = []
    carry = ["__pos", "__src"]
    for found in pairs:
        frame = found.frame.select("left", "right", "__pos", F.col("left.kafka").alias("__src"))
        produced.append((found.rule, select_outputs(frame, found.rule.rule.sql, carry)))
    for rule in rules:
        if rule.rule.type != "stateless":
            continue
        frame = classified.where(
            (F.col("__rule") == rule.number) & (F.col("__status") == "released")
        ).select(event_struct().alias("in"), "__pos", F.col("kafka").alias("__src"))
        produced.append((rule, select_outputs(frame, rule.rule.sql, carry)))
    if not produced:
        return None
    parts = [
        out.select(
            F.lit(rule.rule.out).alias("__topic"),
            F.lit(rule.number).alias("rule"),
            as_variant(out, "key").alias("key"),
            as_variant(out, "value").alias("value"),
            *carry,
        )
        for rule, out in produced
    ]
    outputs = parts[0]
    for part in parts[1:]:
        outputs = outputs.unionByName(part)
    moved = moved_outputs(classified)
    return _number(with_effective_position(outputs, moved), run, next_offsets)


def _number(outputs: DataFrame, run: int, next_offsets: dict[str, int]) -> DataFrame:
    offset = output_offset(next_offsets)
    return outputs.select(
        F.lit("output").alias("kind"),
        F.struct(
            F.col("__topic").alias("topic"),
            F.lit(0).alias("partition"),
            offset.cast("long").alias("offset"),
            F.col("__src.timestamp").alias("timestamp"),
        ).alias("kafka"),
        "key",
        "value",
        F.lit(None).cast("string").alias("status"),
        F.col("rule").cast("int"),
        F.lit(run).cast("long").alias("run"),
        F.struct(
            F.col("__src.topic").alias("topic"),
            F.col("__src.partition").alias("partition"),
            F.col("__src.offset").alias("offset"),
        ).alias("source"),
    )


_DONE_STATUS = {
    "paired": "done",
    "released": "done",
    "unmatched": "unmatched",
    "expired": "expired",
}


def _done_records(classified: DataFrame, run: int) -> DataFrame:
    consumed = classified.where(F.col("__status").isin(list(_DONE_STATUS)))
    status = F.lit(None).cast("string")
    for name, label in _DONE_STATUS.items():
        status = F.when(F.col("__status") == name, F.lit(label)).otherwise(status)
    expired = F.col("__status") == "expired"  # an expired event keeps its payload for the DLQ
    return consumed.select(
        F.lit("done").alias("kind"),
        "kafka",
        F.when(expired, F.col("key")).alias("key"),
        F.when(expired, F.col("value")).alias("value"),
        status.alias("status"),
        F.when(F.col("__rule") > 0, F.col("__rule")).cast("int").alias("rule"),
        F.lit(run).cast("long").alias("run"),
        F.lit(None).cast(SOURCE_TYPE).alias("source"),
    )


def _new_cursors(summary: list[cl.Tally], raw_end: Offsets, old: EtlState) -> Offsets:
    """Per input topic-partition: the lowest still-pending offset, else the raw end."""
    cursors: Offsets = {t: dict(parts) for t, parts in old.cursors.items()}
    for topic, parts in raw_end.items():
        for partition, end in parts.items():
            cursors.setdefault(topic, {})[partition] = end
    for row in summary:
        if row.status in cl.WAITING_STATES:
            current = cursors[row.topic][row.partition]
            cursors[row.topic][row.partition] = min(current, row.low)
    return cursors


def _run_pool(
    spark: SparkSession, spec: Spec, pool: str, rules: list[CompiledRule], now: dt.datetime
) -> EtlResult:
    path = pool_path(pool)
    this = classified_events(spark, spec, pool, rules, now)
    classified, pairs, snap = this.events, this.pairs, this.snap
    try:
        summary = this.classified.tally
        counts: dict[str, int] = {}
        for row in summary:
            counts[row.status] = counts.get(row.status, 0) + row.n
        consumed = sum(counts.get(s, 0) for s in _DONE_STATUS)
        pending = sum(counts.get(s, 0) for s in cl.WAITING_STATES)
        seen = {"raw_seen": snap.raw_end, "oldest_pending": _oldest_pending(summary)}
        read = sum(counts.values())
        if consumed == 0:
            return EtlResult(spec.name, pool, None, snap.state, read=read, pending=pending,
                             cursors=snap.state.cursors, note="nothing new to ETL", **seen)  # fmt: skip
        run, attempt = snap.state.run + 1, uuid.uuid4().hex
        per_topic = _outputs_per_topic(summary, rules)
        next_offsets = dict(snap.state.next_offsets)
        outputs = _outputs(classified, pairs, rules, run, next_offsets)
        for topic, n in per_topic.items():
            next_offsets[topic] = next_offsets.get(topic, 0) + n
        records = _done_records(classified, run)
        if outputs is not None:
            records = outputs.unionByName(records)
        cursors = _new_cursors(summary, snap.raw_end, snap.state)
        meta = state_metadata(
            spec.name, run, attempt, cursors, next_offsets,
            outputs=sum(per_topic.values()), done=consumed, expired=counts.get("expired", 0),
            pending=pending,
        )  # fmt: skip
        _append(records, path, spec.name, pool, run, meta)
    finally:
        this.release()
    committed = read_state(path, spec.name)
    if committed.attempt != attempt:
        return EtlResult(spec.name, pool, None, snap.state, read=read, cursors=committed.cursors,
                         raw_seen=snap.raw_end, note=f"another ETL of {spec.name} committed run {run} first; nothing written")  # fmt: skip
    expired = counts.get("expired", 0)
    if expired:
        copy_expired(spark, pool, spec.name, run)
    return EtlResult(
        spec.name, pool, run, snap.state, read=read, outputs=per_topic, done=consumed,
        expired=expired, unmatched=counts.get("unmatched", 0), pending=pending, cursors=cursors,
        **seen,
    )  # fmt: skip


def _oldest_pending(summary: list[cl.Tally]) -> dt.datetime | None:
    times = [row.oldest for row in summary if row.status in cl.WAITING_STATES]
    return min(times) if times else None


def _outputs_per_topic(summary: list[cl.Tally], rules: list[CompiledRule]) -> dict[str, int]:
    by_number = {r.number: r for r in rules}
    per_topic: dict[str, int] = {}
    for row in summary:
        rule = by_number.get(row.rule)
        if rule is None:
            continue
        counted = (row.status == "paired" and row.topic == rule.rule.left) or (
            row.status == "released"
        )
        if counted:
            per_topic[rule.rule.out] = per_topic.get(rule.rule.out, 0) + row.n
    return per_topic


def _append(frame: DataFrame, path: str, spec: str, pool: str, run: int, meta: str) -> None:
    append_once(
        frame, path, app_id(spec, pool), run, meta, partition_by="kind",
        conflict=f"another ETL wrote to staging pool {pool} while run {run} of {spec} was "
        "writing; this run wrote nothing: run it again",
    )  # fmt: skip


def copy_expired(spark: SparkSession, pool: str, spec: str, run: int) -> None:
    """Copy the run's expired events to `<pool>_dlq` (once: Delta txn per run)."""
    expired = (
        spark.read.format("delta")
        .load(pool_path(pool))
        .where("kind = 'done' AND status = 'expired' AND run = " + str(run))
        .select(
            "kafka.topic",
            "kafka.partition",
            "kafka.offset",
            "kafka.timestamp",
            "key",
            "value",
            F.concat(
                F.lit("expired: rule "),
                F.col("rule").cast("string"),
                F.lit(" found no partner in time"),
            ).alias("reason"),
            F.lit(spec).alias("spec"),
            "run",
        )
    )
    append_once(expired, dead_letter_path(pool), f"zync-etl-expired/{spec}/{pool}", run)
