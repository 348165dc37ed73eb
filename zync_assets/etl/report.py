"""`zync etl --explain` and `--pending`: what a pass would do, what is still waiting."""

from __future__ import annotations

import datetime as dt

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from zync_assets.etl import classify as cl
from zync_assets.etl.compile import compile_rules
from zync_assets.etl.run import classified_events, staging_pools
from zync_assets.etl.state import read_state
from zync_assets.pools import pool_path
from zync_assets.spec import Spec


def explain_spec(spark: SparkSession, spec: Spec) -> str:
    lines = [f"spec {spec.name} ({spec.path})"]
    for rule in compile_rules(spark, spec):
        r = rule.rule
        lines.append(f"rule {r.number}: {r.type} → {r.out}")
        if r.type == "denorm":
            lines.append(
                f"  left {r.left} / right {r.right}, pairs where {r.join_on[0]} = {r.join_on[1]}"
            )
            lines.append("  pairs one-to-one in source order per join key; unpaired events wait")
            if r.expire_after:
                lines.append(f"  expires unpaired events after {r.expire_after}")
        else:
            lines.append(f"  in {r.input}")
        lines.append(f"  where {r.where or 'true'}")
        lines.append("  sql " + " ".join(r.sql.split()))
    for pool in staging_pools(spec):
        state = read_state(spark, pool_path(pool), spec.name)
        lines.append(f"staging pool {pool}: run {state.run}, cursors {state.cursors or 'none'}, "
                     f"next output offsets {state.next_offsets or 'none'}")  # fmt: skip
    return "\n".join(lines)


def pending_report(spark: SparkSession, spec: Spec) -> list[str]:
    """One line per pending event: where it is, how old, and what it waits for."""
    now = dt.datetime.now(dt.UTC)
    compiled = compile_rules(spark, spec)
    lines = []
    for pool, topics in staging_pools(spec).items():
        rules = [r for r in compiled if r.rule.out in topics]
        classified, _pairs, snap = classified_events(spark, spec, pool, rules, now)
        try:
            lines += _waiting_lines(classified, rules, now)
        finally:
            snap.events.unpersist()  # classified_events caches the routed events
    return lines or ["no pending events"]


def _waiting_lines(classified, rules: list, now: dt.datetime) -> list[str]:
    by_number = {r.number: r.rule for r in rules}
    lines = []
    waiting = classified.where(F.col("__status").isin(list(cl.WAITING_STATES)))
    for row in waiting.orderBy("kafka.topic", "kafka.partition", "kafka.offset").collect():
        rule = by_number[row["__rule"]]
        age = now - row.kafka.timestamp.replace(tzinfo=dt.UTC)
        if row["__status"] == "blocked":
            reason = "blocked behind an earlier pending event with the same key"
        else:
            other = rule.right if row.kafka.topic == rule.left else rule.left
            reason = f"waits for a partner on {other} (rule {rule.number})"
        lines.append(
            f"{row.kafka.topic}[{row.kafka.partition}]@{row.kafka.offset} key "
            f"{row.key} age {str(age).split('.')[0]}: {reason}"
        )
    return lines
