"""Many small lake tables' passes in one Spark job: each table's new version written whole,
then committed by the driver with Delta's transaction API (no job per table).

A MERGE costs a table's pass a dozen Spark jobs and a second or two of planning whatever
its rows, so a pass over sixty touched tables took a minute. For a small table (below
`REWRITE_BELOW_BYTES`) it is cheaper to write its whole new state: its stored rows folded
with the pass's changes exactly as the MERGE would fold them (merge.py's source, the same
"newer sequence wins" and TOAST rules). Every touched table's new rows, its change-feed
rows and its change-log rows are planned here and written by ONE job
(zync.spark.TableFiles); then each table gets one driver-side commit
(zync.spark.TableCommit) that removes the files of the version the pass read, adds the new
ones and the change-feed files, and records the pass's Delta txn (zync-table/<name>, run)
and metadata, as the MERGE's commit does. So a table is exactly once the same way:

- killed after the write and before a commit: the table is where it was; its next pass
  writes the run again under a new attempt, and after that commit the earlier attempt's
  files (named zync-r<run>-<attempt>) are deleted;
- a rival writer committed since the pass read the table: the commit is refused
  (TableCommit.Conflict) and the pass's files deleted; the next pass reads the new state.

The path needs the driver's JVM (a local session); elsewhere, and for SCD2 tables,
truncates, rebuilds and big tables, a pass MERGEs (apply.py). A pass that widens a
column's type reads the stored rows through Delta (their files hold the old type).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

from py4j.protocol import Py4JJavaError
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from zync_assets.core.errors import ConcurrentWriter
from zync_assets.lake.pools import pool_exists, table_changes_path, table_path
from zync_assets.spark.functions import java_class
from zync_assets.spark.session import session_conf
from zync_assets.tables.changes import DELETE, SEQUENCE
from zync_assets.tables.columns import UNAVAILABLE

_log = logging.getLogger(__name__)
# A table smaller than this is written whole each pass instead of MERGEd: rewriting a few
# MiB costs its pass milliseconds of the one shared job, where a MERGE costs a second.
REWRITE_BELOW_BYTES = 16 * 2**20
CHANGE_TYPE = "_change_type"  # Delta's change feed column
CHANGE_FOLDER = "_change_data"  # where Delta keeps a table's change-feed files
_NO_NAME = "\0"  # deleteOrphans keeps the files whose names start with it: none
FILES_CLASS = "zync.spark.TableFiles"
COMMIT_CLASS = "zync.spark.TableCommit"
# The shared job's plans: without adaptive execution (an adaptive plan runs its stages as
# jobs of their own), without broadcast joins (each broadcast is a job), one shuffle
# partition (a small table's rows are one task's work, and one file).
_PLANNING = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    "spark.sql.shuffle.partitions": "1",
}


@dataclass(frozen=True)
class Output:
    """Rows to write under a table's root, in files whose names start with `name`; with a
    `changes` folder, the rows whose last column (`_change_type`) is set go there, the
    others (less that column) to the root."""

    root: str
    changes: str
    frame: DataFrame
    name: str


@dataclass(frozen=True)
class Rewrite:
    """One table's pass, planned: its new version and change feed (`rows`, replacing every
    file of `read_version`), and the rows its change log takes (`log`, committed as run
    `run` of `log_app`)."""

    name: str
    path: str
    read_version: int
    rows: DataFrame  # its rows and change-feed rows (new_version)
    app_id: str
    run: int
    attempt: str
    metadata: str
    log: DataFrame | None = None
    log_path: str = ""
    log_app: str = ""

    @property
    def prefix(self) -> str:
        return f"zync-r{self.run}-"

    @property
    def mine(self) -> str:
        return f"{self.prefix}{self.attempt}"


def can_rewrite(spark: SparkSession) -> bool:
    """Whether this session can run the path (a local session: the driver's JVM)."""
    return getattr(spark, "_jvm", None) is not None


def read_stored(spark: SparkSession, path: str) -> tuple[int, DataFrame]:
    """The Delta table at `path`: its newest version, and that version's rows read from
    its files directly where its checksum lists them and none has a deletion vector (a
    Delta scan's planning costs Spark jobs for each table read), else through Delta."""
    found = java_class(spark._jvm, COMMIT_CLASS).stored(spark._jsparkSession, path)
    version = found.version()
    if not found.listed():
        return version, spark.read.format("delta").option("versionAsOf", version).load(path)
    schema = StructType.fromJson(json.loads(found.schema()))
    paths = list(found.paths())
    if not paths:
        return version, spark.createDataFrame([], schema)
    return version, spark.read.schema(schema).parquet(*paths)


def new_version(
    stored: DataFrame | None, source: DataFrame, keys: list[str], data: list[str],
    types: dict[str, str],
) -> DataFrame:  # fmt: skip
    """A table's rows after the pass, and its change-feed rows (those with a
    `_change_type`), from its `stored` rows (None: a new table) and the MERGE's `source`
    (merge.merge_source: per key its newest change, a row or a delete, with the columns it
    left out); `types`: the table's columns (its sequence included), in its order. Each
    joined key gives its rows through one explode: the fold is computed once for both."""
    meta = [SEQUENCE]
    new = source.select(
        *keys,
        F.struct(*(F.col(f"`{c}`") for c in [*data, *meta, DELETE, UNAVAILABLE])).alias("__s"),
    )
    if stored is None:
        joined = new.withColumn("__t", F.lit(None).cast(_struct_of(types, [*data, *meta])))
    else:
        old = stored.select(
            *keys, F.struct(*(F.col(f"`{c}`") for c in [*data, *meta])).alias("__t")
        )
        joined = old.join(new, keys, "full_outer")
    had, got = F.col("__t").isNotNull(), F.col("__s").isNotNull()
    newer = F.coalesce(F.col(f"__s.{SEQUENCE}") > F.col(f"__t.{SEQUENCE}"), F.lit(False))
    wins = got & (~had | newer)  # the MERGE's WHEN MATCHED AND s > t / WHEN NOT MATCHED
    deleted = F.col(f"__s.{DELETE}")

    def after(name: str) -> Column:
        if name in keys:
            return F.col(f"`{name}`")
        if name == SEQUENCE:
            return F.when(wins, F.col(f"__s.{SEQUENCE}")).otherwise(F.col(f"__t.{SEQUENCE}"))
        kept = had & F.array_contains(F.col(f"__s.{UNAVAILABLE}"), name)  # TOAST: stored value
        fresh = F.when(kept, F.col(f"__t.`{name}`")).otherwise(F.col(f"__s.`{name}`"))
        return F.when(wins, fresh).otherwise(F.col(f"__t.`{name}`"))

    def before(name: str) -> Column:
        return F.col(f"`{name}`") if name in keys else F.col(f"__t.`{name}`")

    def image(kind: str | None, value: Callable[[str], Column]) -> Column:
        return F.struct(
            *(value(n).cast(t).alias(n) for n, t in types.items()),
            F.lit(kind).cast("string").alias(CHANGE_TYPE),
        )

    updated = wins & ~deleted & had
    images = [  # (when, the row it gives): the version's row, then the change feed's
        ((wins & ~deleted) | (~wins & had), image(None, after)),
        (wins & ~deleted & ~had, image("insert", after)),
        (updated, image("update_preimage", before)),
        (updated, image("update_postimage", after)),
        (wins & deleted & had, image("delete", before)),
    ]
    rows = F.filter(F.array(*(F.when(when, row) for when, row in images)), lambda r: r.isNotNull())
    return (
        joined.select(F.explode(rows).alias("__r")).select("__r.*")
        .coalesce(1).sortWithinPartitions(*keys)
    )  # fmt: skip


def _struct_of(types: dict[str, str], names: list[str]) -> str:
    return "struct<" + ", ".join(f"`{n}`: {types[n]}" for n in names) + ">"


def rewrite_tables(spark: SparkSession, rewrites: list[Rewrite]) -> dict[str, Exception | None]:
    """Write every table's new files in one Spark job, then commit each table (its change
    log first); per table, None or what stopped its commit. A failed write job is raised:
    the caller applies those tables one by one instead (so the failure is one table's)."""
    if not rewrites:
        return {}
    outputs: list[Output] = []
    places: list[tuple[int, int]] = []  # per rewrite: its rows' output, its log's (or -1)
    for item in rewrites:
        places.append((len(outputs), len(outputs) + 1 if item.log is not None else -1))
        outputs.append(Output(item.path, CHANGE_FOLDER, item.rows, item.mine))
        if item.log is not None:
            outputs.append(Output(item.log_path, "", item.log.coalesce(1), item.mine))
    files = java_class(spark._jvm, FILES_CLASS)
    with session_conf(spark, _PLANNING):
        written = files.write(
            spark._jsparkSession,
            [o.frame._jdf for o in outputs], [o.root for o in outputs],
            [o.changes for o in outputs], [o.name for o in outputs],
        )  # fmt: skip
    return {
        item.name: _commit(spark, item, written, *place)
        for item, place in zip(rewrites, places, strict=True)
    }


def _commit(
    spark: SparkSession, item: Rewrite, written: object, data: int, log: int
) -> Exception | None:
    """Table `item`'s commits: its change log's rows (if any), then its new version; and
    then the files of its run's other attempts, which no commit holds, deleted."""
    commit = java_class(spark._jvm, COMMIT_CLASS)
    session = spark._jsparkSession
    try:
        if log >= 0:
            commit.commit(session, item.log_path, -1, written, log, False, item.log_app,
                          item.run, item.metadata)  # fmt: skip
        commit.commit(session, item.path, item.read_version, written, data, True, item.app_id,
                      item.run, item.metadata)  # fmt: skip
    except Py4JJavaError as exc:
        if _conflict(exc):  # nothing of this attempt was committed: its files are garbage
            discard_attempt(spark, item.name, item.run, item.attempt)
            return ConcurrentWriter(
                f"another writer changed table {item.name} while run {item.run} was written; "
                "this pass wrote nothing: the next one applies its events"
            )
        return exc
    # The run's files no version holds (an earlier attempt's); change-feed files are held
    # by commits, not versions: those of other attempts. The pass is committed: a file
    # that cannot be deleted now is garbage for VACUUM, not a failure of the pass.
    try:
        commit.deleteOrphans(session, item.path, [""], item.prefix, _NO_NAME)
        commit.deleteOrphans(session, item.path, [CHANGE_FOLDER], item.prefix, item.mine)
        if log >= 0:
            commit.deleteOrphans(session, item.log_path, [""], item.prefix, _NO_NAME)
    except Py4JJavaError as exc:
        _log.warning("table %s: run %s committed; its orphan files stay: %s", item.name,
                     item.run, exc.java_exception)  # fmt: skip
    return None


def discard_attempt(spark: SparkSession, name: str, run: int, attempt: str) -> None:
    """Delete the files a pass of table `name` wrote and did not commit (its shared job
    failed part way)."""
    commit = java_class(spark._jvm, COMMIT_CLASS)
    session = spark._jsparkSession
    mine = f"zync-r{run}-{attempt}"
    for root, folders in (
        (table_path(name), ["", CHANGE_FOLDER]),
        (table_changes_path(name), [""]),
    ):
        if pool_exists(root):
            commit.deleteOrphans(session, root, folders, mine, _NO_NAME)


def _conflict(exc: Py4JJavaError) -> bool:
    """Whether a commit was refused because another writer committed first."""
    name = exc.java_exception.getClass().getName()
    return name.endswith("TableCommit$Conflict") or "Concurrent" in name
