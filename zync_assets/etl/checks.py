"""Invariants of an ETL run, checked on what the run itself wrote (cost: the run, not history)."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from zync_assets.etl.bounds import above_cursors
from zync_assets.etl.run import EtlResult
from zync_assets.pools import pool_path


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str


def dense_outputs(spark: SparkSession, result: EtlResult) -> Check:
    """Each output topic got offsets previous-next .. previous-next + n - 1, once each."""
    if result.run is None:
        return Check("dense_output_offsets", True, "nothing written")
    rows = (
        spark.read.format("delta").load(pool_path(result.pool))
        .where(f"kind = 'output' AND run = {result.run}")
        .groupBy("kafka.topic")
        .agg(F.count("*").alias("n"), F.countDistinct("kafka.offset").alias("distinct"),
             F.min("kafka.offset").alias("low"), F.max("kafka.offset").alias("high"))
        .collect()
    )  # fmt: skip
    problems = []
    for row in rows:
        start = result.previous.next_offsets.get(row.topic, 0)
        if (row.n, row.distinct, row.low, row.high) != (row.n, row.n, start, start + row.n - 1):
            problems.append(
                f"{row.topic}: {row.n} rows, offsets {row.low}..{row.high}, expected from {start}"
            )
    return Check("dense_output_offsets", not problems, "; ".join(problems) or "dense")


def unique_done(spark: SparkSession, result: EtlResult) -> Check:
    """No input event got a second done record (compared above the previous cursors)."""
    if result.run is None:
        return Check("no_duplicate_done_records", True, "nothing written")
    topics = list(result.cursors)
    done = (
        spark.read.format("delta").load(pool_path(result.pool))
        .where((F.col("kind") == "done") & above_cursors(result.previous.cursors, topics))
    )  # fmt: skip
    duplicates = (
        done.groupBy("kafka.topic", "kafka.partition", "kafka.offset")
        .count()
        .where("count > 1")
        .count()
    )
    return Check(
        "no_duplicate_done_records", duplicates == 0,
        f"{duplicates} events with more than one done record" if duplicates else "unique",
    )  # fmt: skip


def cursors_forward(result: EtlResult) -> Check:
    moved_back = [
        f"{topic}[{partition}] {old} -> {result.cursors.get(topic, {}).get(partition)}"
        for topic, parts in result.previous.cursors.items()
        for partition, old in parts.items()
        if result.cursors.get(topic, {}).get(partition, old) < old
    ]
    return Check("cursors_never_move_back", not moved_back, "; ".join(moved_back) or "forward")


def run_checks(spark: SparkSession, result: EtlResult) -> list[Check]:
    return [dense_outputs(spark, result), unique_done(spark, result), cursors_forward(result)]
