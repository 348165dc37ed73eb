"""`zync query`: Spark SQL over pools, each pool a table named after it."""

from __future__ import annotations

import json
from collections.abc import Iterator

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import SparkSession

from zync_assets.errors import ZyncError
from zync_assets.pools import list_pools, pool_path


def register_pools(spark: SparkSession) -> list[str]:
    """Make every pool of the lake a temporary view of the same name."""
    names = list_pools()
    for name in names:
        spark.read.format("delta").load(pool_path(name)).createOrReplaceTempView(f"`{name}`")
    return names


def run_query(spark: SparkSession, sql: str) -> Iterator[dict]:
    """Rows of `sql` as JSON-ready dicts (VARIANT columns rendered as JSON)."""
    register_pools(spark)
    try:
        frame = spark.sql(sql)
    except (ParseException, AnalysisException) as exc:
        raise ZyncError(f"query failed: {str(exc).strip().splitlines()[0]}") from exc
    for line in frame.toJSON().toLocalIterator():
        # An RDD of strings locally; through Spark Connect, a frame of one string column.
        yield json.loads(line if isinstance(line, str) else line[0])
