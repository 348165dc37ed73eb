"""The copy of a run's expired events to its staging pool's dead-letter table
(`<pool>_dlq`), each with why it expired; written once per run (a Delta transaction id).

Why, by what the event waited for:
- a denorm rule's partner: `expired: rule 1 found no partner in time`;
- a Debezium source transaction: which of its parts never arrived, e.g. `expired: source
  transaction 501:10 did not complete within its rule's expire-after: shop.public.items
  1 of 2 events` (or `its END record`);
- a `txn` rule's group: `expired: group 10001 of rule 1 did not complete within its
  expire-after (1h): complete-when bool_or(...) stayed false over its 2 event(s)`, or,
  for an event its `group-by` put in no group, that the group-by was null.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.window import WindowSpec

from zync_assets.core.events import event_columns
from zync_assets.core.staging_rows import DONE, of_kind
from zync_assets.etl.compile import CompiledRule
from zync_assets.etl.gate import GATED, GROUP_SCOPE, TXN, member_of
from zync_assets.etl.open_txns import open_transactions
from zync_assets.lake.delta_writes import append_once
from zync_assets.lake.pools import dead_letter_path, pool_path

# A staging pool's `<pool>_dlq`: the events that waited too long, as the ETL read them.
EXPIRED_SCHEMA = (
    "topic string, partition int, offset bigint, timestamp timestamp, key variant, "
    "value variant, reason string, spec string, run bigint"
)


def copy_expired(
    spark: SparkSession, pool: str, spec: str, run: int, rules: list[CompiledRule]
) -> None:
    """Copy run `run`'s expired events of `spec` to `<pool>_dlq`, once."""
    expired = (
        spark.read.format("delta")
        .load(pool_path(pool))
        .where(of_kind(DONE) & (F.col("status") == "expired") & (F.col("run") == run))
        .select(*event_columns(), F.coalesce("rule", F.lit(0)).alias("__rule"))
    )
    members = expired.withColumn(TXN, member_of(rules))
    reasons = _transaction_reasons(spark, members, rules)
    if reasons is not None:
        members = members.join(reasons, TXN, "left")
    else:
        members = members.withColumn("__wants", F.lit(None).cast("string"))
    rows = members.select(
        "kafka.topic",
        "kafka.partition",
        "kafka.offset",
        "kafka.timestamp",
        "key",
        "value",
        _reason(rules, members).alias("reason"),
        F.lit(spec).alias("spec"),
        F.lit(run).cast("long").alias("run"),
    )
    append_once(rows, dead_letter_path(pool), f"zync-etl-expired/{spec}/{pool}", run)


def _transaction_reasons(
    spark: SparkSession, members: DataFrame, rules: list[CompiledRule]
) -> DataFrame | None:
    """TXN -> `__wants`: what each expired Debezium transaction lacked (its members all
    expire in one run, so they are all here)."""
    found = open_transactions(members.withColumn(GATED, F.col(TXN).isNotNull()), rules)
    if not found:
        return None
    rows = [(t.scoped, t.wants()) for t in found]
    return spark.createDataFrame(rows, f"{TXN} string, __wants string")


def _reason(rules: list[CompiledRule], members: DataFrame) -> Column:
    size = F.count("*").over(_by_group())
    reason = F.concat(
        F.lit("expired: rule "), F.col("__rule").cast("string"), F.lit(" found no partner in time")
    )
    for rule in rules:
        r = rule.rule
        mine = F.col("__rule") == rule.number
        if r.group_by is not None:
            group = F.expr(r.group_by).cast("string")
            open_group = F.concat(
                F.lit("expired: group "), group,
                F.lit(f" of rule {r.number} did not complete within its expire-after "
                      f"({r.expire_after}): complete-when {r.complete_when} stayed false over "
                      "its "), size.cast("string"), F.lit(" event(s)"),
            )  # fmt: skip
            no_group = F.lit(
                f"expired: rule {r.number}'s group-by {r.group_by} is null for this event: "
                "it belongs to no group"
            )
            reason = (
                F.when(mine & F.col(TXN).isNull(), no_group)
                .when(mine, open_group)
                .otherwise(reason)
            )
    source_txn = F.coalesce(
        F.expr("try_variant_get(value, '$.transaction.id', 'string')"),
        F.expr("try_variant_get(value, '$.id', 'string')"),
    )
    debezium = F.concat(
        F.lit("expired: source transaction "), source_txn,
        F.lit(" did not complete within its rule's expire-after"),
        F.when(F.col("__wants").isNotNull(), F.concat(F.lit(": "), F.col("__wants")))
        .otherwise(F.lit("")),
    )  # fmt: skip
    gated = F.col(TXN).isNotNull() & ~F.col(TXN).startswith(GROUP_SCOPE)
    return F.when(gated, debezium).otherwise(reason)


def _by_group() -> WindowSpec:
    return Window.partitionBy(TXN)
