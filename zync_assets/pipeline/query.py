"""`zync query`: Spark SQL over pools and lake tables, each a view named after it.

`as_of` reads each of them as of a Delta version (a number) or a time (anything else
Delta takes, e.g. `2026-11-25 10:00:00`): time travel within the log's retention.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from zync_assets.core.config import current
from zync_assets.core.errors import ZyncError
from zync_assets.core.staging_rows import KIND
from zync_assets.etl.expired import EXPIRED_SCHEMA
from zync_assets.ingest.dead_letters import DEAD_LETTER_SCHEMA
from zync_assets.lake.pools import (
    DEAD_LETTER_SUFFIX,
    list_pools,
    list_tables,
    pool_path,
    table_path,
)
from zync_assets.spark.catalog import catalog_names


def register_pools(spark: SparkSession, as_of: str | None = None) -> list[str]:
    """Make every pool and lake table a temporary view of the same name (a pool keeps its
    name where a table has it too; the table is then `table_<name>`). With `as_of`, each
    as of that version or time; one that did not exist yet is left out.

    With a catalog (and no `as_of`), the catalog's database is the session's current
    one: its lake tables are read from there by name, and only the tables it does not
    hold yet become views."""
    if as_of is not None:
        check_as_of(as_of)
    pools = list_pools()
    views = {name: pool_path(name) for name in pools}
    in_catalog = _catalog_tables(spark) if as_of is None else set()
    for name in list_tables():
        if name.lower() in in_catalog and name not in views:
            continue
        views[f"table_{name}" if name in views else name] = table_path(name)
    registered = []
    for view in _empty_dead_letters(spark, pools, views):
        registered.append(view)
    for view, path in views.items():
        reader = spark.read.format("delta")
        if as_of is not None:
            reader = reader.option("versionAsOf" if as_of.isdigit() else "timestampAsOf", as_of)
        try:
            frame = reader.load(path)
            frame.schema  # noqa: B018  # resolves the version now: a missing one fails here
        except AnalysisException:
            if as_of is None:
                raise
            continue  # the table has no such version or time (younger, or vacuumed)
        frame.createOrReplaceTempView(f"`{view}`")
        registered.append(view)
    return registered


def _catalog_tables(spark: SparkSession) -> set[str]:
    """The lake tables the catalog holds (lower case: the metastore's names), after making
    its database the session's current one; none without a catalog."""
    catalog = current().catalog
    if not catalog.enabled:
        return set()
    entries = catalog_names(spark, catalog)
    if not entries:
        return set()
    spark.catalog.setCurrentDatabase(catalog.database)
    return {name.lower() for name in entries}


def _empty_dead_letters(spark: SparkSession, pools: list[str], views: dict[str, str]) -> list[str]:
    """`<pool>_dlq` as an empty view for each pool that never had a dead letter, so that
    the documented query answers "none" rather than failing on a missing table."""
    made = []
    for pool in pools:
        name = f"{pool}{DEAD_LETTER_SUFFIX}"
        if pool.endswith(DEAD_LETTER_SUFFIX) or name in views:
            continue
        columns = spark.read.format("delta").load(pool_path(pool)).columns
        schema = EXPIRED_SCHEMA if KIND in columns else DEAD_LETTER_SCHEMA
        spark.createDataFrame([], schema).createOrReplaceTempView(f"`{name}`")
        made.append(name)
    return made


def check_as_of(as_of: str) -> str:
    """`as_of` if it is a version number or an ISO date/time; else a one-line error."""
    try:
        if not as_of.isdigit():
            dt.datetime.fromisoformat(as_of)
    except ValueError:
        raise ZyncError(
            f"--as-of {as_of!r}: give a Delta version (e.g. 12) or a time "
            "(e.g. 2026-11-25 or '2026-11-25 10:00:00')"
        ) from None
    return as_of


def change_feed(spark: SparkSession, path: str, start: int, end: int | None) -> Iterator[dict]:
    """Rows of a table's change data feed from version `start` to `end` (default newest)."""
    reader = spark.read.format("delta").option("readChangeFeed", "true")
    reader = reader.option("startingVersion", start)
    if end is not None:
        reader = reader.option("endingVersion", end)
    try:
        frame = reader.load(path).orderBy("_commit_version")
        yield from _json_rows(frame)
    except AnalysisException as exc:
        raise ZyncError(f"change feed of {path}: {str(exc).strip().splitlines()[0]}") from exc


def run_query(spark: SparkSession, sql: str, as_of: str | None = None) -> Iterator[dict]:
    """Rows of `sql` as JSON-ready dicts (VARIANT columns rendered as JSON)."""
    register_pools(spark, as_of)
    try:
        frame = spark.sql(sql)
    except (ParseException, AnalysisException) as exc:
        raise ZyncError(f"query failed: {str(exc).strip().splitlines()[0]}") from exc
    yield from _json_rows(frame)


def _json_rows(frame: DataFrame) -> Iterator[dict]:
    # Rendered by Spark as DataFrame.toJSON would, but as a frame: toJSON's RDD is local
    # only, and PySpark warns on every call that its return type will change.
    rendered = frame.select(
        F.to_json(F.struct(*[F.col("`" + c.replace("`", "``") + "`") for c in frame.columns]))
    )
    for (line,) in rendered.toLocalIterator():
        yield json.loads(line)
