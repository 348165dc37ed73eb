"""Install's step that writes the local Spark driver's class-data archive (spark_archive)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession

from zync_assets.spark.archive import archive_path
from zync_assets.spark.session import spark_jars, spark_session


def _workload(spark: SparkSession, where: Path) -> None:
    """What most zync passes do, small: write, merge into and read a Delta table with a
    VARIANT column, read its history, group and join."""
    table = str(where / "t")
    rows = "SELECT id, CAST(id AS STRING) AS s, parse_json(to_json(named_struct('n', id))) AS v"
    spark.sql(f"{rows} FROM range(100)").write.format("delta").save(table)
    spark.sql(
        f"MERGE INTO delta.`{table}` t USING ({rows} FROM range(50, 150)) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    frame = spark.read.format("delta").load(table)
    frame.where("variant_get(v, '$.n', 'bigint') > 5").groupBy("s").count().collect()
    frame.alias("a").join(frame.alias("b"), "id").selectExpr("max(a.s)").collect()
    spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()


def build() -> Path | None:
    """Build the archive for the current Java and jars unless it exists; its path."""
    target = archive_path(spark_jars())
    if target is None or target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.partial")
    with tempfile.TemporaryDirectory(prefix="zync-class-data-") as where:
        spark = spark_session("zync-class-data", dump_class_archive=partial)
        _workload(spark, Path(where))
        spark.stop()
        # The JVM writes the archive as it exits, which it does once its stdin closes.
        gateway = SparkContext._gateway
        if gateway is None:  # not a local driver (a Spark Connect master): nothing to archive
            return None
        gateway.proc.stdin.close()
        gateway.proc.wait(timeout=600)
    if not partial.is_file():
        return None
    os.replace(partial, target)
    for stale in target.parent.glob("spark-*.jsa"):  # built for other jars or another Java
        if stale != target:
            stale.unlink()
    return target


if __name__ == "__main__":
    built = build()
    print(f"Spark class archive: {built}" if built else "Spark class archive: not built")
    sys.exit(0 if built else 1)
