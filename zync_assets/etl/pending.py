"""The pending events of one ETL pass, classified: routed, paired, released, blocked or
expired (classify.py), with the pairs that form among them. Their frames are pinned for
the pass's several reads."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from zync_assets.etl import classify as cl
from zync_assets.etl.compile import CompiledRule
from zync_assets.etl.gate import gate
from zync_assets.etl.snapshot import Reach, Snapshot, reach, snapshot
from zync_assets.spark.session import pinned, unpin
from zync_assets.specs.model import Spec


@dataclass(frozen=True)
class Pass:
    """The pending events of one pass, classified, and the pairs that form in it.
    Its frames are pinned (spark.pinned): `release()` it when done."""

    snap: Snapshot
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
    spark: SparkSession,
    spec: Spec,
    pool: str,
    rules: list[CompiledRule],
    now: dt.datetime,
    where: Reach | None = None,
) -> Pass:
    """`where`: the pass's reach, if the caller read it already (default: read here)."""
    snap = snapshot(spark, spec, pool, rules, where or reach(spec, pool, rules))
    routed = pinned(gate(snap.events, rules, now))
    try:
        pairs = [cl.pair(routed, r) for r in rules if r.rule.type == "denorm"]
        classified = cl.classify(routed, rules, pairs, snap.raw_end, now)
    except BaseException:
        unpin(routed)
        raise
    formed = [cl.still_paired(found, classified.events) for found in pairs]
    return Pass(snap, routed, classified, formed)


def oldest_pending(summary: list[cl.Tally]) -> dt.datetime | None:
    times = [
        row.oldest for row in summary if row.status in cl.WAITING_STATES and row.oldest is not None
    ]
    return min(times) if times else None
