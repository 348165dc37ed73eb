"""What one ETL pass reads, and where it leaves the cursors.

snapshot  the raw rows at or above the staging pool's cursors, cut at each raw pool's
          ingest progress (read once: every later read of the pass sees the same rows),
          minus the events that already have a done record: the pending events, routed
          to their rules
cursors   after the pass: per input topic-partition, the lowest offset still pending,
          else the end of the snapshot
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from zync_assets.core.events import event_columns
from zync_assets.core.offsets import Offsets
from zync_assets.core.staging_rows import DONE, of_kind
from zync_assets.etl import classify as cl
from zync_assets.etl.bounds import above_cursors, below_ends
from zync_assets.etl.compile import CompiledRule
from zync_assets.etl.state import EtlState, pass_figures, read_state
from zync_assets.lake.pools import pool_exists, pool_path
from zync_assets.lake.progress import read_progress
from zync_assets.spark.session import union_all
from zync_assets.specs.model import Spec

KAFKA_TYPE = "struct<topic: string, partition: int, offset: bigint, timestamp: timestamp>"


@dataclass(frozen=True)
class Snapshot:
    """The pending events of one pass and what is needed to classify them."""

    events: DataFrame  # routed (event fields, __rule, __pos, __chain)
    raw_end: Offsets  # per input topic-partition: end offset of the raw snapshot
    state: EtlState


def _input_topics(rules: list[CompiledRule]) -> list[str]:
    """The rules' topics, and the transaction topics of gated rules (gate.py)."""
    topics = (t for r in rules for t in (*r.topics, r.rule.transaction_topic) if t)
    return list(dict.fromkeys(topics))


@dataclass(frozen=True)
class Reach:
    """Where one pass starts and ends, read from commit files (no Spark job): the staging
    pool's ETL state (its cursors) and, per raw pool holding the pass's topics, the
    offsets ingest had committed to when the pass began."""

    state: EtlState
    ends: dict[str, Offsets]  # raw pool -> its topics' end offsets

    @property
    def raw_end(self) -> Offsets:
        return {t: parts for ends in self.ends.values() for t, parts in ends.items()}

    @property
    def done_ahead(self) -> bool:
        """Whether an event the pass reads may have a done record already. Only one the
        last committed pass left pending can: it lies above the cursors and below where
        that pass read to (its recorded `raw_seen`); a later event no pass has read. So
        while the cursors stand where the last pass read to, the pass need not read the
        done records at all. A pass committed before passes recorded `raw_seen`: may."""
        figures = pass_figures(self.state)
        if figures is None:
            return True
        cursors, seen = self.state.cursors, figures.raw_seen
        return any(
            cursors.get(topic, {}).get(partition, 0) < seen.get(topic, {}).get(partition, 0)
            for topic, parts in self.raw_end.items()
            for partition in parts
        )

    def size(self, view_topics: set[str]) -> int:
        """The rows a pass may read: its backlog and, for a view over `view_topics`, the
        view's stored row versions it joins it with. Those are at most one per event its
        inputs ever had: every event the raw pools hold of them (end offsets, added up)."""
        return self.backlog + self.held(view_topics)

    def held(self, view_topics: set[str] | tuple[str, ...]) -> int:
        """At most how many row versions a view over `view_topics` holds: one per event
        its inputs ever had (the raw pools' end offsets, added up)."""
        return sum(
            end for topic, parts in self.raw_end.items() if topic in view_topics
            for end in parts.values()
        )  # fmt: skip

    @property
    def backlog(self) -> int:
        """Raw events between the cursors and the ends: at most what the pass reads."""
        cursors = self.state.cursors
        return sum(
            max(end - cursors.get(topic, {}).get(partition, 0), 0)
            for topic, parts in self.raw_end.items()
            for partition, end in parts.items()
        )


def reach(spec: Spec, pool: str, rules: list[CompiledRule]) -> Reach:
    state = read_state(pool_path(pool), spec.name)
    topics = _input_topics(rules)
    raw_pool_of = {r.topic: r.pool for r in spec.inputs}
    ends: dict[str, Offsets] = {}
    for raw_pool in dict.fromkeys(raw_pool_of[t] for t in topics):
        progress = read_progress(pool_path(raw_pool))
        if progress.version is None:
            continue  # nothing ingested yet
        mine = [t for t in topics if raw_pool_of[t] == raw_pool]
        ends[raw_pool] = {t: progress.offsets[t] for t in mine if t in progress.offsets}
    return Reach(state, ends)


def snapshot(
    spark: SparkSession, spec: Spec, pool: str, rules: list[CompiledRule], where: Reach
) -> Snapshot:
    state, topics = where.state, _input_topics(rules)
    frames = [
        # The newest version, cut at the progress `reach` read: the same rows as that
        # commit's version (ingest only appends), without time travel's fresh snapshot.
        spark.read.format("delta")
        .load(pool_path(raw_pool))
        .where(
            F.col("dead_letter").isNull()
            & above_cursors(state.cursors, list(ends), ends=ends)
            & below_ends(ends)
        )
        .select("kafka", "key", "value")
        for raw_pool, ends in where.ends.items()
    ]
    if not frames:
        empty = spark.createDataFrame([], "kafka " + KAFKA_TYPE + ", key variant, value variant")
        frames = [empty]
    candidates = union_all(frames)
    path = pool_path(pool)
    if where.done_ahead and pool_exists(path):
        done = (
            spark.read.format("delta")
            .load(path)
            .where(of_kind(DONE) & above_cursors(state.cursors, topics, ends=where.raw_end))
            .select(*cl.coords())
        )
        candidates = candidates.select("*", *cl.coords()).join(
            done, [f"__{c}" for c in cl.COORDS], "left_anti"
        )
    events = candidates.select(*event_columns())
    return Snapshot(cl.route(events, rules), where.raw_end, state)


def history(
    spark: SparkSession, spec: Spec, topics: tuple[str, ...], raw_end: Offsets
) -> DataFrame:
    """Every event of `topics` in the raw pools below `raw_end` (a pass's snapshot ends),
    done or not, with its fields: what a view is rebuilt from (views.py)."""
    raw_pool_of = {r.topic: r.pool for r in spec.inputs}
    frames = []
    for raw_pool in dict.fromkeys(raw_pool_of[t] for t in topics):
        ends = {t: raw_end[t] for t in topics if raw_pool_of[t] == raw_pool and t in raw_end}
        if ends:
            frames.append(
                spark.read.format("delta")
                .load(pool_path(raw_pool))
                .where(F.col("dead_letter").isNull() & below_ends(ends))
                .select("kafka", "key", "value")
            )
    if not frames:
        frames = [spark.createDataFrame([], "kafka " + KAFKA_TYPE + ", key variant, value variant")]
    return union_all(frames).select(*event_columns())


def new_cursors(summary: list[cl.Tally], raw_end: Offsets, old: EtlState) -> Offsets:
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
