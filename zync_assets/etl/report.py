"""`zync etl --explain` and `--pending`: what a pass would do, what is still waiting."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from zync_assets.etl import classify as cl
from zync_assets.etl.compile import compile_rules
from zync_assets.etl.gate import TXN
from zync_assets.etl.open_txns import OpenTransaction, describe, open_transactions
from zync_assets.etl.pending import classified_events
from zync_assets.etl.state import read_state
from zync_assets.lake.pools import pool_path
from zync_assets.specs.model import Spec


def explain_spec(spark: SparkSession, spec: Spec) -> str:
    lines = [f"spec {spec.name} ({spec.path})"]
    for rule in compile_rules(spark, spec):
        r = rule.rule
        lines.append(f"rule {r.number}: {r.type} → {', '.join(r.output_topics)}")
        if r.type == "denorm":
            assert r.join_on is not None  # a denorm rule has one (specs/model.py)
            lines.append(
                f"  left {r.left} / right {r.right}, pairs where {r.join_on[0]} = {r.join_on[1]}"
            )
            lines.append("  pairs one-to-one in source order per join key; unpaired events wait")
            if r.expire_after:
                lines.append(f"  expires unpaired events after {r.expire_after}")
        elif r.type == "txn":
            lines.append(f"  inputs {', '.join(r.inputs)}, grouped by "
                         f"{r.group_by or 'their Debezium source transaction'}")  # fmt: skip
            if r.group_by:
                lines.append(f"  a group is transformed once, when {r.complete_when} holds"
                             + (f"; open groups expire after {r.expire_after}"
                                if r.expire_after else ""))  # fmt: skip
        elif r.type == "view":
            named = ", ".join(f"{name} = {topic}" for name, topic in r.relations)
            lines.append(f"  inputs {named}: each a table of its current rows (key, after)")
            lines.append(f"  keyed by {', '.join(r.key)}; sends each row that is new or changed "
                         "and a tombstone for each row gone, once per pass")  # fmt: skip
        else:
            lines.append(f"  in {r.input}")
        if r.gate:
            lines.append(
                f"  gate: transaction — its events wait for their source transaction's END "
                f"on {r.transaction_topic} and all its events"
                + (f"; open transactions expire after {r.expire_after}" if r.expire_after else "")
            )
        lines.append(f"  where {r.where or 'true'}")
        lines.append("  sql " + " ".join(r.sql.split()))
    for pool in spec.staging_pools():
        state = read_state(pool_path(pool), spec.name)
        lines.append(f"staging pool {pool}: run {state.run}, cursors {state.cursors or 'none'}, "
                     f"next output offsets {state.next_offsets or 'none'}")  # fmt: skip
    return "\n".join(lines)


@dataclass(frozen=True)
class Waiting:
    """One pending event: where it is, since when, and what it waits for."""

    topic: str
    partition: int
    offset: int
    key: str
    timestamp: dt.datetime
    reason: str

    def line(self, now: dt.datetime) -> str:
        age = str(now - self.timestamp).split(".")[0]
        where = f"{self.topic}[{self.partition}]@{self.offset}"
        return f"{where} key {self.key} age {age}: {self.reason}"


@dataclass(frozen=True)
class PendingView:
    """What waits in one staging pool: each event, and each open source transaction."""

    events: list[Waiting]
    transactions: list[OpenTransaction]  # gated specs only, oldest first


def pending_view(spark: SparkSession, spec: Spec, pool: str) -> PendingView:
    """The events of `spec` that are pending in staging pool `pool`, oldest offsets first,
    and the source transactions they wait for."""
    now = dt.datetime.now(dt.UTC)
    topics = spec.staging_pools()[pool]
    rules = [r for r in compile_rules(spark, spec) if r.rule.out in topics]
    this = classified_events(spark, spec, pool, rules, now)
    try:
        transactions = open_transactions(this.routed, rules)
        by_id = {t.scoped: t for t in transactions}
        return PendingView(_waiting(this.events, rules, by_id), transactions)
    finally:
        this.release()


def waiting_events(spark: SparkSession, spec: Spec, pool: str) -> list[Waiting]:
    return pending_view(spark, spec, pool).events


def pending_report(spark: SparkSession, spec: Spec) -> list[str]:
    """One line per open source transaction (its age and what it lacks), then one per
    pending event: where it is, how old, and what it waits for."""
    now = dt.datetime.now(dt.UTC)
    lines = []
    for pool in spec.staging_pools():
        view = pending_view(spark, spec, pool)
        for txn in view.transactions:
            age = str(now - txn.oldest).split(".")[0]
            lines.append(f"open {txn.title} age {age}: waits for {txn.wants()}")
        lines.extend(w.line(now) for w in view.events)
    return lines or ["no pending events"]


def _waiting(
    classified: DataFrame, rules: list, transactions: dict[str, OpenTransaction]
) -> list[Waiting]:
    by_number = {r.number: r.rule for r in rules}
    found = []
    waiting = classified.where(F.col("__status").isin(list(cl.WAITING_STATES)))
    for row in waiting.orderBy("kafka.topic", "kafka.partition", "kafka.offset").collect():
        rule = by_number.get(row["__rule"])
        if row["__held"] == cl.HELD_BY_TRANSACTION:
            reason = _transaction_reason(row, transactions)
        elif row["__status"] == "blocked" and row["__held"] == cl.HELD_BY_PARTNER:
            p = row["__partner"]
            reason = (
                f"paired with {p.topic}[{p.partition}]@{p.offset}, which is blocked behind "
                "an earlier pending event with its key"
            )
        elif row["__status"] == "blocked":
            reason = "blocked behind an earlier pending event with the same key"
        else:
            assert rule is not None  # only a denorm rule's events wait for a partner
            other = rule.right if row.kafka.topic == rule.left else rule.left
            reason = f"waits for a partner on {other} (rule {rule.number})"
        timestamp = row.kafka.timestamp.replace(tzinfo=dt.UTC)
        k = row.kafka
        found.append(Waiting(k.topic, k.partition, k.offset, str(row.key), timestamp, reason))
    return found


def _transaction_reason(row: Row, transactions: dict[str, OpenTransaction]) -> str:
    title = describe(row[TXN])
    if row["__status"] == "waiting":
        open_one = transactions.get(row[TXN])
        wants = open_one.wants() if open_one else "its END record and events"
        return f"waits for {title}: {wants}"
    return (
        f"{title} is complete but waits whole: another of its events "
        "still waits (for a partner, or behind an earlier pending event with its key)"
    )
