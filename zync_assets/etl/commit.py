"""An ETL pass's one Delta commit to its staging pool, and the copy of its expired events
to the pool's dead-letter table; each written once per run (Delta transaction ids)."""

from __future__ import annotations

from collections.abc import Collection

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from zync_assets.delta_writes import append_once
from zync_assets.etl.state import app_id
from zync_assets.pools import dead_letter_path, pool_path


def append_pass(
    frame: DataFrame, path: str, spec: str, pool: str, run: int, meta: str,
    merge_schema: bool = False,
) -> None:  # fmt: skip
    append_once(
        frame, path, app_id(spec, pool), run, meta, partition_by="kind", merge_schema=merge_schema,
        conflict=f"another ETL wrote to staging pool {pool} while run {run} of {spec} was "
        "writing; this run wrote nothing: run it again",
    )  # fmt: skip


def _expiry_reason(gated: Collection[str]) -> Column:
    """Why an event expired: its source transaction never completed (an event of a gated
    topic with transaction metadata, or an END record), or its denorm rule found no partner."""
    member = F.col("kafka.topic").isin(list(gated)) & (
        F.expr("try_variant_get(value, '$.transaction.id', 'string')").isNotNull()
        | F.expr("try_variant_get(value, '$.status', 'string') = 'END'")
    )
    return F.when(
        member,
        F.concat(
            F.lit("expired: source transaction "),
            F.coalesce(
                F.expr("try_variant_get(value, '$.transaction.id', 'string')"),
                F.expr("try_variant_get(value, '$.id', 'string')"),
            ),
            F.lit(" did not complete within its rule's expire-after"),
        ),
    ).otherwise(
        F.concat(
            F.lit("expired: rule "),
            F.col("rule").cast("string"),
            F.lit(" found no partner in time"),
        )
    )


def copy_expired(
    spark: SparkSession, pool: str, spec: str, run: int, gated: Collection[str] = ()
) -> None:
    """Copy the run's expired events to `<pool>_dlq` (once: Delta txn per run); `gated`:
    the spec's gated topics and their transaction topics."""
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
            _expiry_reason(gated).alias("reason"),
            F.lit(spec).alias("spec"),
            "run",
        )
    )
    append_once(expired, dead_letter_path(pool), f"zync-etl-expired/{spec}/{pool}", run)
