"""Invariants of an ETL run, checked on what the run itself wrote (cost: the run, not history)."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from zync_assets.core.staging_rows import DONE, KIND, OUTPUT, of_kind
from zync_assets.etl.bounds import above_cursors
from zync_assets.etl.run import EtlResult
from zync_assets.lake.pools import pool_path


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str


def pool_checks(spark: SparkSession, result: EtlResult) -> tuple[Check, Check]:
    """Dense output offsets and unique done records, from one read of the pool (one Spark
    action: a run's checks were two reads and two actions, about 1.5 s of a small
    Dagster run that the output topic's step waited for)."""
    if result.run is None:
        return (
            Check("dense_output_offsets", True, "nothing written"),
            Check("no_duplicate_done_records", True, "nothing written"),
        )
    rows = _offsets_by_topic(spark, result)
    outputs = [row for row in rows if row.kind == "output"]
    duplicated = sum(row.duplicated for row in rows if row.kind == "done")
    return _dense(result, outputs), Check(
        "no_duplicate_done_records", duplicated == 0,
        f"{duplicated} events with more than one done record" if duplicated else "unique",
    )  # fmt: skip


def _offsets_by_topic(spark: SparkSession, result: EtlResult) -> list:
    """Per kind and topic: rows, distinct offsets, lowest, highest, offsets held twice.

    Outputs: this run's (numbered per topic, whatever their partition); done records:
    those above the previous cursors (per input partition), where a second one for an
    event would be."""
    kind = F.col(KIND)
    this_run = of_kind(OUTPUT) & (F.col("run") == result.run)
    new_done = of_kind(DONE) & above_cursors(
        result.previous.cursors, list(result.cursors), ends=result.cursors
    )
    per_offset = (
        spark.read.format("delta").load(pool_path(result.pool))
        .where(this_run | new_done)
        .groupBy(kind, F.col("kafka.topic").alias("topic"),
                 F.when(of_kind(DONE), F.col("kafka.partition")).alias("partition"),
                 F.col("kafka.offset").alias("offset"))
        .agg(F.count("*").alias("copies"))
    )  # fmt: skip
    return per_offset.groupBy(KIND, "topic").agg(
        F.sum("copies").alias("n"), F.count("*").alias("distinct"),
        F.min("offset").alias("low"), F.max("offset").alias("high"),
        F.sum(F.when(F.col("copies") > 1, 1).otherwise(0)).alias("duplicated"),
    ).collect()  # fmt: skip


def _dense(result: EtlResult, outputs: list) -> Check:
    """Each output topic got offsets previous-next .. previous-next + n - 1, once each."""
    problems = []
    for row in outputs:
        start = result.previous.next_offsets.get(row.topic, 0)
        if (row.n, row.distinct, row.low, row.high) != (row.n, row.n, start, start + row.n - 1):
            problems.append(
                f"{row.topic}: {row.n} rows, offsets {row.low}..{row.high}, expected from {start}"
            )
    return Check("dense_output_offsets", not problems, "; ".join(problems) or "dense")


def cursors_forward(result: EtlResult) -> Check:
    moved_back = [
        f"{topic}[{partition}] {old} -> {result.cursors.get(topic, {}).get(partition)}"
        for topic, parts in result.previous.cursors.items()
        for partition, old in parts.items()
        if result.cursors.get(topic, {}).get(partition, old) < old
    ]
    return Check("cursors_never_move_back", not moved_back, "; ".join(moved_back) or "forward")


def run_checks(spark: SparkSession, result: EtlResult) -> list[Check]:
    return [*pool_checks(spark, result), cursors_forward(result)]
