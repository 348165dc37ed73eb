"""A view's state in its staging pool: its inputs' rows, kept as row versions.

Each pass writes one row per input row it changed (kind `view`, `status` the view's
output topic, `value` the row, NULL once deleted), in the same commit as the pass's
outputs and done records. A row's current version is its newest: the highest run, and
within a run the highest source offset.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from zync_assets.etl.compile import CompiledRule

VIEW_KIND = "view"  # the staging pool's `kind` of a view's row versions


def row_id(key: str = "key") -> Column:
    """A row's identity within its table: its key as JSON (VARIANTs do not compare)."""
    return F.to_json(F.col(key))


def committed_versions(staging: DataFrame, rule: CompiledRule) -> DataFrame:
    """Every committed version of the view's input rows, with `__topic` and `__id`."""
    mine = staging.where((F.col("kind") == VIEW_KIND) & (F.col("status") == rule.rule.out))
    return mine.withColumn("__topic", F.col("kafka.topic")).withColumn("__id", row_id())


def newest(versions: DataFrame, ids: DataFrame | None = None) -> DataFrame:
    """The current version of each row (deleted rows too, their value NULL); `ids`
    (`__topic`, `__id`): of those rows only, which are looked up before the rows are
    ordered, so the cost follows them and not the whole state."""
    if ids is not None:
        versions = versions.join(F.broadcast(ids.distinct()), ["__topic", "__id"], "left_semi")
    order = Window.partitionBy("__topic", "__id").orderBy(
        F.col("run").desc(), F.col("kafka.offset").desc()
    )
    return (
        versions.withColumn("__n", F.row_number().over(order)).where(F.col("__n") == 1).drop("__n")
    )
