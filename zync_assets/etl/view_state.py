"""A view's state in its staging pool: its inputs' rows, kept as row versions.

Each pass writes one row per input row it changed (kind `view`, `status` the view's
output topic, `value` the row, NULL once deleted), in the same commit as the pass's
outputs and done records. A row's current version is its newest: the highest run, and
within a run the highest source offset.

Only a row's newest version is ever read (its current row), so pool maintenance deletes
the versions a newer one replaced (prune_superseded): the state then grows with the
inputs' rows, not with every change they had. The delete keeps every row's newest
version, whatever commit a pass makes beside it: a pass appends without reading through
Delta's transaction (a blind append), which a delete does not conflict with, and what it
appends is newer than anything the delete removes.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from zync_assets.core.staging_rows import KIND, VIEW, of_kind
from zync_assets.etl.compile import CompiledRule
from zync_assets.spark.session import pinned, unpin


def row_id(key: str = "key") -> Column:
    """A row's identity within its table: its key as JSON (VARIANTs do not compare)."""
    return F.to_json(F.col(key))


def committed_versions(staging: DataFrame, rule: CompiledRule) -> DataFrame:
    """Every committed version of the view's input rows, with `__topic` and `__id`."""
    mine = staging.where(of_kind(VIEW) & (F.col("status") == rule.rule.out))
    return mine.withColumn("__topic", F.col("kafka.topic")).withColumn("__id", row_id())


def newest(versions: DataFrame, ids: DataFrame | None = None) -> DataFrame:
    """The current version of each row (deleted rows too, their value NULL); `ids`
    (`__topic`, `__id`): of those rows only, which are looked up before the rows are
    ordered, so the cost follows them and not the whole state."""
    if ids is not None:
        versions = versions.join(F.broadcast(ids.distinct()), ["__topic", "__id"], "left_semi")
    return _ranked(versions, "__topic", "__id").where(F.col("__n") == 1).drop("__n")


def superseded_versions(staging: DataFrame) -> DataFrame:
    """Every view's row versions that a newer version of the same row replaced: `status`
    (the view), `run` and the event's `__topic`, `__partition`, `__offset`."""
    versions = staging.where(of_kind(VIEW)).select(
        "status", "run", "kafka", F.col("kafka.topic").alias("__topic"), row_id().alias("__id")
    )
    return (
        _ranked(versions, "status", "__topic", "__id")
        .where(F.col("__n") > 1)
        .select(
            "status", "run", "__topic",
            F.col("kafka.partition").alias("__partition"),
            F.col("kafka.offset").alias("__offset"),
        )
    )  # fmt: skip


def _ranked(versions: DataFrame, *row: str) -> DataFrame:
    """`versions` with `__n`: 1 for each row's newest version, 2 for the one it replaced,
    and so on; the columns `row` identify a row."""
    newest_first = Window.partitionBy(*row).orderBy(
        F.col("run").desc(), F.col("kafka.offset").desc()
    )
    return versions.withColumn("__n", F.row_number().over(newest_first))


def prune_superseded(spark: SparkSession, path: str) -> int:
    """Delete the superseded view row versions of the staging pool at `path` (one Delta
    MERGE, only if there are any); how many."""
    gone = pinned(superseded_versions(spark.read.format("delta").load(path)))
    try:
        count = gone.count()
        if count:
            spark.sql(
                f"MERGE INTO delta.`{path}` AS t USING {{gone}} AS s "
                f"ON t.{KIND} = '{VIEW}' AND t.status = s.status AND t.run = s.run "
                "AND t.kafka.topic = s.__topic AND t.kafka.partition = s.__partition "
                "AND t.kafka.offset = s.__offset WHEN MATCHED THEN DELETE",
                gone=gone,
            ).collect()
        return count
    finally:
        unpin(gone)
