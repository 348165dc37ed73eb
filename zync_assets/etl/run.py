"""One ETL pass of a spec into a staging pool: pending events → outputs + done records.

state     cursors and next output offsets from the staging pool's last ETL commit (state.py)
read      raw rows at or above the cursors (a pinned raw snapshot), minus those that
          already have a done record at or above the cursors: the pending events (snapshot.py)
classify  route to rules, pair, block, expire (pending.py, classify.py)
number    output records, numbered densely per output topic in source order, and one done
          record per consumed event (records.py)
commit    all of them in ONE Delta commit that also records the new cursors (snapshot.py),
          tagged with the run's Delta transaction id (commit.py)
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from zync_assets.core.offsets import Offsets
from zync_assets.etl import classify as cl
from zync_assets.etl.commit import append_pass
from zync_assets.etl.compile import CompiledRule, compile_rules
from zync_assets.etl.expired import copy_expired
from zync_assets.etl.groups import group_outputs
from zync_assets.etl.mirror_toast import with_toasted_values
from zync_assets.etl.mirror_truncates import truncate_tombstones
from zync_assets.etl.open_txns import TransactionCounts, transaction_counts
from zync_assets.etl.pending import classified_events, oldest_pending
from zync_assets.etl.records import DONE_STATUS, done_records, output_records, outputs_per_topic
from zync_assets.etl.snapshot import Reach, history, new_cursors, reach
from zync_assets.etl.state import EtlState, figures_metadata, read_state, state_metadata
from zync_assets.etl.views import ViewOutputs, view_outputs
from zync_assets.lake.pools import pool_path
from zync_assets.spark.session import sized_work, union_all
from zync_assets.specs.ingested import mirrored
from zync_assets.specs.model import Spec


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
    transactions: TransactionCounts = field(default_factory=TransactionCounts)  # gated specs
    note: str = ""


def run_etl(
    spark: SparkSession,
    spec: Spec,
    now: dt.datetime | None = None,
    pool: str | None = None,
    compiled: list[CompiledRule] | None = None,
    rebuild: frozenset[str] = frozenset(),
) -> list[EtlResult]:
    """One pass per staging pool of the spec (or only `pool`); `compiled`: the spec's rules
    as compile_rules made them (a long-lived caller keeps them; default: compiled here);
    `rebuild`: output topics of views to make again from the raw pools (views.py)."""
    spec.require_views(rebuild)
    spec = mirrored(spec)
    if compiled is None or any(rule not in [c.rule for c in compiled] for rule in spec.transforms):
        compiled = compile_rules(spark, spec)  # none given, or a mirror has new topics
    now = now or dt.datetime.now(dt.UTC)
    results = []
    for name in spec.staging_pools():
        if pool is not None and name != pool:
            continue
        mine = spec.rules_of(name)
        rules = [r for r in compiled if r.rule in mine]
        if rules:
            results.append(_run_pool(spark, spec, name, rules, now, rebuild))
    return results


def _new_views(state: EtlState, views: list[str]) -> set[str]:
    """Views the pool's commits do not know yet, though earlier passes read its inputs:
    each starts from the whole history in the raw pools, as a rebuild does (a view's
    inputs are read from the cursors, where earlier rules left them)."""
    if state.run == 0:
        return set()  # the first pass reads everything from the start anyway
    return set(views) - set(state.details.get("views", []))


def _run_pool(
    spark: SparkSession, spec: Spec, pool: str, rules: list[CompiledRule], now: dt.datetime,
    rebuild: frozenset[str] = frozenset(),
) -> EtlResult:  # fmt: skip
    """The pass, with the Spark settings its size suits (spark.sized_work): a pass over a
    few events skips code generation and shuffle fan-out, which cost more than they save
    there. Its size is the raw events between the cursors and the ends, and, with a view,
    the view's stored row versions it joins them with (Reach.size): 10,000 changes to a
    view of 1,000,000 rows are no small pass (interpreted, in one partition, it took 1.6
    times as long). A view made again from the raw pools reads their whole history, of a
    size not known beforehand."""
    where = reach(spec, pool, rules)
    views = [r.rule.out for r in rules if r.rule.type == "view"]
    remakes = (rebuild & set(views)) or _new_views(where.state, views)
    size = where.size({t for r in rules if r.rule.type == "view" for t in r.topics})
    with sized_work(spark, None if remakes else size):
        return _transform(spark, spec, pool, rules, now, where, rebuild)


def _transform(
    spark: SparkSession, spec: Spec, pool: str, rules: list[CompiledRule], now: dt.datetime,
    where: Reach, rebuild: frozenset[str],
) -> EtlResult:  # fmt: skip
    path = pool_path(pool)
    this = classified_events(spark, spec, pool, rules, now, where)
    classified, pairs, snap = this.events, this.pairs, this.snap
    releases: list[Callable[[], None]] = []
    try:
        summary = this.classified.tally
        counts: dict[str, int] = {}
        for row in summary:
            counts[row.status] = counts.get(row.status, 0) + row.n
        consumed = sum(counts.get(s, 0) for s in DONE_STATUS)
        pending = sum(counts.get(s, 0) for s in cl.WAITING_STATES)
        whole = any(r.rule.transactional for r in rules)  # a `txn` column joins older pools
        seen: dict[str, Any] = {  # the same in each result below
            "raw_seen": snap.raw_end,
            "oldest_pending": oldest_pending(summary),
            "transactions": transaction_counts(classified) if whole else TransactionCounts(),
        }
        read = sum(counts.values())
        views = sorted(r.rule.out for r in rules if r.rule.type == "view")
        rebuilding = (rebuild & set(views)) | _new_views(snap.state, views)
        if consumed == 0 and not rebuilding:
            return EtlResult(spec.name, pool, None, snap.state, read=read, pending=pending,
                             cursors=snap.state.cursors, note="nothing new to ETL", **seen)  # fmt: skip
        run, attempt = snap.state.run + 1, uuid.uuid4().hex
        per_topic = outputs_per_topic(summary, rules)
        yielded, states = [], []

        def past(topics: tuple[str, ...]) -> DataFrame:  # the topics' events so far
            return history(spark, spec, topics, snap.raw_end)

        for made in (
            group_outputs(classified, rules, spec.path),
            view_outputs(
                spark,
                classified,
                rules,
                run,
                path,
                spec.path,
                frozenset(rebuilding),
                past,
                where.held,
            ),
            truncate_tombstones(classified, rules, past, summary),
        ):
            if made is None:
                continue
            releases.append(made.release)
            yielded.append(made.frame)
            states += [made.state] if isinstance(made, ViewOutputs) else []
            for topic, n in made.per_topic.items():
                per_topic[topic] = per_topic.get(topic, 0) + n
        next_offsets = dict(snap.state.next_offsets)
        outputs = output_records(
            classified, pairs, rules, run, next_offsets, yielded,
            mirrored=lambda rows: with_toasted_values(rows, past),
        )  # fmt: skip
        for topic, n in per_topic.items():
            next_offsets[topic] = next_offsets.get(topic, 0) + n
        records = union_all([done_records(classified, run), *states])
        if outputs is not None:
            records = outputs.unionByName(records, allowMissingColumns=True)  # `txn`
        cursors = new_cursors(summary, snap.raw_end, snap.state)
        transactions: TransactionCounts = seen["transactions"]
        figures = figures_metadata(
            snap.state, pending=pending, oldest_pending=seen["oldest_pending"],
            open_transactions=transactions.open,
            oldest_open_transaction=transactions.oldest_open,
            expired=counts.get("expired", 0), raw_seen=snap.raw_end,
        )  # fmt: skip
        meta = state_metadata(
            spec.name, run, attempt, cursors, next_offsets,
            outputs=sum(per_topic.values()), done=consumed, expired=counts.get("expired", 0),
            views=views, **figures,
        )  # fmt: skip
        append_pass(records, path, spec.name, pool, run, meta, merge_schema=whole)
    finally:
        this.release()
        for release in releases:
            release()
    committed = read_state(path, spec.name)
    if committed.attempt != attempt:
        return EtlResult(spec.name, pool, None, snap.state, read=read, cursors=committed.cursors,
                         raw_seen=snap.raw_end, note=f"another ETL of {spec.name} committed run {run} first; nothing written")  # fmt: skip
    expired = counts.get("expired", 0)
    if expired:
        copy_expired(spark, pool, spec.name, run, rules)
    return EtlResult(
        spec.name, pool, run, snap.state, read=read, outputs=per_topic, done=consumed,
        expired=expired, unmatched=counts.get("unmatched", 0), pending=pending, cursors=cursors,
        **seen,
    )  # fmt: skip
