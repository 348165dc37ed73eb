"""Which events wait for their group: `gate: transaction` rules (and `txn` rules with
`complete-when: debezium-transaction`) wait until their source transaction is complete,
so that the outputs of one source transaction land together; `txn` rules with a
`group-by` wait until their group's `complete-when` aggregate holds.

Debezium (with `provide.transaction.metadata=true`) writes a BEGIN and an END record per
source transaction to `<topic.prefix>.transaction`; END names the transaction's `id` and,
per data collection (`public.invoices`, the topic `<topic.prefix>.public.invoices`), its
`event_count`. Each data event carries `transaction{id, total_order,
data_collection_order}`.

A transaction is *complete* in a pass when its END record is pending in it and, for every
data collection of a gated topic that END names, the pass holds events of the transaction
with `event_count` distinct `data_collection_order`s (a copy Debezium sent again after a
restart does not count twice). Collections of topics the spec does not gate are not
waited for. Until then every *member* — its events on gated topics, whatever rule takes
them, and its END record — is gated: it waits (and holds its partition's cursor). Once
complete, the members are classified as usual, and their outputs take the position of
the END record (the transaction's commit) in the pass's numbering.

Debezium's PostgreSQL connector names a transaction `<txId>:<LSN>`, with the LSN of its
BEGIN in BEGIN and in the events but the LSN of its commit in END (seen with Debezium
3.6): ids of that shape are matched on the txId. Other connectors' ids match whole.

Rules for what has no transaction metadata: an event without a `transaction` block (one
written before the connector provided it, or a tombstone) is not gated; BEGIN records are
done at once (`unmatched`).

A `group-by` group (ids scoped `transforms[<n>]`) is complete when `complete-when`,
aggregated over its events pending in the pass, is true; its position is its latest
event's. An event the rule takes whose `group-by` is null has no group (classify.py
expires it).

A transaction whose oldest member is older than the smallest `expire-after` of the rules
gated by its transaction topic (a group: older than its rule's) expires whole: every
member present goes to the dead-letter table.
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from zync_assets.etl.compile import CompiledRule
from zync_assets.spark.session import one_of
from zync_assets.specs.expiry import parse_expiry

TXN = "__txn"  # the transaction a member belongs to (topic-scoped id), else null
GATED = "__gated"  # a member of a transaction not (yet) complete
TXN_POS = "__txn_pos"  # a complete transaction's END position: where its outputs go
TXN_EXPIRED = "__txn_expired"  # a gated member of a transaction past its expiry
_COLLECTIONS = "array<struct<data_collection: string, event_count: bigint>>"


def gate(routed: DataFrame, rules: list[CompiledRule], now: dt.datetime) -> DataFrame:
    """`routed` with TXN, GATED, TXN_POS and TXN_EXPIRED (see the module doc)."""
    gated = debezium_gated(rules)
    grouped = [r for r in rules if r.rule.group_by]
    if not gated and not grouped:
        return routed.select(
            "*",
            F.lit(None).cast("string").alias(TXN),
            F.lit(False).alias(GATED),
            F.lit(None).cast(routed.schema["__pos"].dataType).alias(TXN_POS),
            F.lit(False).alias(TXN_EXPIRED),
        )
    members = routed.withColumn(TXN, member_of(rules))
    complete = None
    if gated:
        complete = _complete_transactions(members, gated)
    for rule in grouped:
        found = _complete_groups(members, rule)
        complete = found if complete is None else complete.unionByName(found)
    assert complete is not None
    marked = (
        members.join(complete, TXN, "left")
        .select(
            "*",
            (F.col(TXN).isNotNull() & F.col("__end_pos").isNull()).alias(GATED),
            F.col("__end_pos").alias(TXN_POS),
        )
        .drop("__end_pos")
    )
    return _with_expiry(marked, rules, now)


def debezium_gated(rules: list[CompiledRule]) -> dict[str, str | None]:
    """Gated topic -> its Debezium transaction topic."""
    return {t: r.rule.transaction_topic for r in rules if r.rule.gate for t in r.topics}


GROUP_SCOPE = "transforms["


def group_scope(rule: CompiledRule) -> str:
    """The scope of a `group-by` rule's group ids: two rules may group by equal values."""
    return f"{GROUP_SCOPE}{rule.number}]"


def _complete_transactions(members: DataFrame, gated: dict[str, str | None]) -> DataFrame:
    """TXN, __end_pos of the Debezium transactions whose END and events are all in."""
    ends = members.where(
        F.col(TXN).isNotNull() & one_of("kafka.topic", sorted({t for t in gated.values() if t}))
    ).select(TXN, F.col("__pos").alias("__end_pos"), end_collections().alias("__c"))
    expected = (
        ends.select(TXN, F.explode_outer("__c").alias("__c"))
        .select(
            TXN,
            collection_topic(gated).alias("__topic"),
            F.col("__c.event_count").alias("__count"),
        )
        .where(F.col("__topic").isNotNull())
    )
    seen = (
        members.where(F.col(TXN).isNotNull() & one_of("kafka.topic", gated))
        .groupBy(TXN, F.col("kafka.topic").alias("__topic"))
        .agg(F.countDistinct(order_in_collection()).alias("__seen"))
    )
    short = (
        expected.join(seen, [TXN, "__topic"], "left")
        .where(F.coalesce("__seen", F.lit(0)) < F.col("__count"))
        .select(TXN)
        .distinct()
    )
    complete = ends.select(TXN, "__end_pos").join(short, TXN, "left_anti")
    return complete.dropDuplicates([TXN])  # an END Debezium sent twice


def _complete_groups(members: DataFrame, rule: CompiledRule) -> DataFrame:
    """TXN, __end_pos of a `group-by` rule's groups whose `complete-when` holds: at the
    position of their latest event (the one that completed it, as zync's design has it)."""
    assert rule.rule.complete_when is not None
    return (
        members.where(F.col(TXN).startswith(group_scope(rule) + "\u0000"))
        .groupBy(TXN)
        .agg(
            F.expr(rule.rule.complete_when).alias("__complete"),
            F.max("__pos").alias("__end_pos"),
        )
        .where(F.coalesce(F.col("__complete"), F.lit(False)))
        .select(TXN, "__end_pos")
    )


def member_of(rules: list[CompiledRule]) -> Column:
    """A data event's transaction on a gated topic; an END record's on its transaction
    topic; the group of an event a `group-by` rule takes (`__rule`). Ids are scoped by the
    transaction topic (two connectors may reuse one) or by the rule."""
    gated = debezium_gated(rules)
    grouped = [r for r in rules if r.rule.group_by]
    topic = F.col("kafka.topic")
    member = F.lit(None).cast("string")
    for rule in grouped:
        assert rule.rule.group_by is not None
        value = F.expr(rule.rule.group_by).cast("string")
        scoped = F.when(value.isNotNull(), F.concat(F.lit(group_scope(rule) + "\u0000"), value))
        member = F.when(F.col("__rule") == rule.number, scoped).otherwise(member)
    for data_topic, txn_topic in gated.items():
        data_id = F.expr("try_variant_get(value, '$.transaction.id', 'string')")
        member = F.when(topic == data_topic, _scoped(txn_topic, data_id)).otherwise(member)
    status = F.expr("try_variant_get(value, '$.status', 'string')")
    end_id = F.expr("try_variant_get(value, '$.id', 'string')")
    for txn_topic in set(gated.values()):
        is_end = (topic == txn_topic) & (status == "END")
        member = F.when(is_end, _scoped(txn_topic, end_id)).otherwise(member)
    return member


def _scoped(txn_topic: str | None, txn_id: Column) -> Column:
    key = F.when(
        txn_id.rlike(r"^[0-9]+:[0-9]+$"), F.regexp_extract(txn_id, r"^([0-9]+):", 1)
    ).otherwise(txn_id)
    return F.when(txn_id.isNotNull(), F.concat(F.lit(f"{txn_topic}\u0000"), key))


def end_collections() -> Column:
    return F.expr(f"try_variant_get(value, '$.data_collections', '{_COLLECTIONS}')")


def collection_topic(gated: dict[str, str | None]) -> Column:
    """The gated topic of an END's data collection (`<prefix>.<data_collection>`), else
    null: collections the spec does not gate are not waited for."""
    topic = F.lit(None).cast("string")
    for data_topic, txn_topic in gated.items():
        assert txn_topic is not None
        prefix = txn_topic.removesuffix("transaction")
        name = F.concat(F.lit(prefix), F.col("__c.data_collection"))
        scope = F.col(TXN).startswith(f"{txn_topic}\u0000")
        topic = F.when(scope & (name == data_topic), F.lit(data_topic)).otherwise(topic)
    return topic


def order_in_collection() -> Column:
    return F.expr("try_variant_get(value, '$.transaction.data_collection_order', 'bigint')")


def _with_expiry(marked: DataFrame, rules: list[CompiledRule], now: dt.datetime) -> DataFrame:
    """TXN_EXPIRED: gated, and the transaction's oldest member is older than the smallest
    `expire-after` of the rules its transaction topic gates."""
    bounds: dict[str, float] = {}  # scope -> seconds
    for rule in rules:
        scope = rule.rule.transaction_topic if rule.rule.gate else None
        scope = group_scope(rule) if rule.rule.group_by else scope
        if scope and rule.rule.expire_after:
            seconds = parse_expiry(rule.rule.expire_after).seconds
            assert seconds is not None  # specs/rules.py: a transaction or group expires by time
            bounds[scope] = min(bounds.get(scope, seconds), seconds)
    if not bounds:
        return marked.withColumn(TXN_EXPIRED, F.lit(False))
    cutoff = F.lit(None).cast("timestamp")
    for scope, seconds in bounds.items():
        at = F.lit(now - dt.timedelta(seconds=seconds))
        cutoff = F.when(F.col(TXN).startswith(f"{scope}\u0000"), at).otherwise(cutoff)
    oldest = marked.where(F.col(GATED)).groupBy(TXN).agg(F.min("kafka.timestamp").alias("__oldest"))
    return (
        marked.join(oldest, TXN, "left")
        .withColumn(
            TXN_EXPIRED, F.col(GATED) & F.coalesce(F.col("__oldest") < cutoff, F.lit(False))
        )
        .drop("__oldest")
    )
