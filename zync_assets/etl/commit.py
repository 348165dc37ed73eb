"""An ETL pass's one Delta commit to its staging pool, and the copy of its expired events
to the pool's dead-letter table; each written once per run (Delta transaction ids)."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from zync_assets.delta_writes import append_once
from zync_assets.etl.state import app_id
from zync_assets.pools import dead_letter_path, pool_path


def append_pass(frame: DataFrame, path: str, spec: str, pool: str, run: int, meta: str) -> None:
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
