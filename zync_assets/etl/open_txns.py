"""Open source transactions and groups: what each still waits for (the pending view,
`zync status`, the dead-letter reasons), and a pass's counts of open and expired ones."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from zync_assets.etl.compile import CompiledRule
from zync_assets.etl.gate import (
    GATED,
    GROUP_SCOPE,
    TXN,
    collection_topic,
    debezium_gated,
    end_collections,
    group_scope,
    order_in_collection,
)
from zync_assets.spark.session import one_of


@dataclass(frozen=True)
class OpenTransaction:
    """A source transaction some of whose members wait in a pass, and what it lacks."""

    id: str  # as Debezium names it
    oldest: dt.datetime  # the Kafka timestamp of its oldest member
    ended: bool  # its END record is in
    counts: dict[str, tuple[int, int | None]]  # gated topic -> (events in, END's count)
    scoped: str = ""  # TXN: the id scoped by its transaction topic or rule
    rule: CompiledRule | None = None  # a `group-by` rule's group: the rule
    size: int = 0  # (groups) its events so far

    @property
    def title(self) -> str:
        return describe(self.scoped)

    def wants(self) -> str:
        """What it waits for, e.g. `shop.public.items 1 of 2 events` or `its END record`."""
        if self.rule is not None:
            return f"complete-when {self.rule.rule.complete_when} ({self.size} event(s) so far)"
        short = [
            f"{topic} {seen} of {want} events"
            for topic, (seen, want) in sorted(self.counts.items())
            if want is not None and seen < want
        ]
        if not self.ended:
            short.insert(0, "its END record")
        return ", ".join(short) or "its events to be released whole"


def describe(scoped: str) -> str:
    """`source transaction 501` or `group 7 of rule 1`, from a TXN id."""
    scope, txn_id = scoped.split("\u0000", 1)
    if scope.startswith(GROUP_SCOPE):
        return f"group {txn_id} of rule {scope.removeprefix(GROUP_SCOPE).rstrip(']')}"
    return f"source transaction {txn_id}"


def open_transactions(gated_events: DataFrame, rules: list[CompiledRule]) -> list[OpenTransaction]:
    """The transactions and groups with members waiting in `gated_events` (gate()'s
    output), oldest first: small jobs, for `zync etl --pending`, `zync status` and the
    dead-letter reasons, not for every pass."""
    found = _open_debezium(gated_events, debezium_gated(rules)) if debezium_gated(rules) else []
    for rule in rules:
        if rule.rule.group_by is not None:
            found.extend(_open_groups(gated_events, rule))
    return sorted(found, key=lambda t: t.oldest)


def _open_groups(gated_events: DataFrame, rule: CompiledRule) -> list[OpenTransaction]:
    rows = (
        gated_events.where(F.col(GATED) & F.col(TXN).startswith(group_scope(rule) + "\u0000"))
        .groupBy(TXN)
        .agg(F.min("kafka.timestamp").alias("oldest"), F.count("*").alias("size"))
        .collect()
    )
    found = []
    for row in rows:
        txn_id, at = row[TXN].split("\u0000", 1)[1], row.oldest.replace(tzinfo=dt.UTC)
        found.append(OpenTransaction(txn_id, at, False, {}, row[TXN], rule, row.size))
    return found


def _open_debezium(gated_events: DataFrame, gated: dict[str, str | None]) -> list[OpenTransaction]:
    members = gated_events.where(F.col(GATED))
    ends = members.where(one_of("kafka.topic", sorted({t for t in gated.values() if t}))).select(
        TXN, F.explode_outer(end_collections()).alias("__c")
    )
    expected = ends.select(
        TXN,
        collection_topic(gated).alias("__topic"),
        F.col("__c.event_count").alias("__want"),
        F.lit(True).alias("__ended"),
    )
    seen = (
        members.where(one_of("kafka.topic", gated))
        .groupBy(TXN, F.col("kafka.topic").alias("__topic"))
        .agg(F.countDistinct(order_in_collection()).alias("__seen"))
    )
    oldest = members.groupBy(TXN).agg(F.min("kafka.timestamp").alias("__oldest"))
    ended = expected.select(TXN, "__ended").distinct()
    rows = (
        seen.join(
            expected.drop("__ended").where(F.col("__topic").isNotNull()), [TXN, "__topic"], "full"
        )
        .join(oldest, TXN)
        .join(ended, TXN, "left")
        .collect()
    )
    found: dict[str, OpenTransaction] = {}
    for row in rows:
        txn_id = row[TXN].split("\u0000", 1)[1]
        at = row["__oldest"].replace(tzinfo=dt.UTC)
        entry = found.setdefault(
            txn_id, OpenTransaction(txn_id, at, bool(row["__ended"]), {}, row[TXN])
        )
        if row["__topic"] is not None:
            entry.counts[row["__topic"]] = (row["__seen"] or 0, row["__want"])
    return list(found.values())


@dataclass(frozen=True)
class TransactionCounts:
    """A pass's source transactions: still open (with the oldest one's first event), and
    expired in it."""

    open: int = 0
    oldest_open: dt.datetime | None = None
    expired: int = 0


def transaction_counts(classified: DataFrame) -> TransactionCounts:
    """One small job over a pass's classified events (`__status` set)."""
    waiting = F.col(GATED) & (F.col("__status") == "waiting")
    expired = F.col(TXN).isNotNull() & (F.col("__status") == "expired")
    row = (
        classified.where(F.col(TXN).isNotNull())
        .agg(
            F.countDistinct(F.when(waiting, F.col(TXN))).alias("open"),
            F.min(F.when(waiting, F.col("kafka.timestamp"))).alias("oldest"),
            F.countDistinct(F.when(expired, F.col(TXN))).alias("expired"),
        )
        .collect()[0]
    )
    oldest = row["oldest"].replace(tzinfo=dt.UTC) if row["oldest"] is not None else None
    return TransactionCounts(row["open"] or 0, oldest, row["expired"] or 0)
