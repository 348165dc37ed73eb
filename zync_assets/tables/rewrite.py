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

import datetime as dt
import logging
import zlib
from dataclasses import dataclass

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, SparkSession

from zync_assets.core.errors import ConcurrentWriter
from zync_assets.lake.pools import pool_exists, table_changes_path, table_path
from zync_assets.spark.functions import java_class
from zync_assets.spark.session import session_conf, union_all
from zync_assets.tables.changes import ROW
from zync_assets.tables.rewrite_plan import Table, planned_rows

_log = logging.getLogger(__name__)
# A table smaller than this is written whole each pass instead of MERGEd: rewriting a few
# MiB costs its pass milliseconds of the one shared job, where a MERGE costs a second.
REWRITE_BELOW_BYTES = 16 * 2**20
CHECKPOINTS_EVERY = 100  # a table's checkpoint interval: this to twice it (checkpoint_interval)
CHANGE_FOLDER = "_change_data"  # where Delta keeps a table's change-feed files
_NO_NAME = "\0"  # deleteOrphans keeps the files whose names start with it: none
FILES_CLASS = "zync.spark.TableFiles"
COMMIT_CLASS = "zync.spark.TableCommit"
# The shared job's plan without adaptive execution: an adaptive plan runs its shuffle's
# first stage as a job of its own.
_PLANNING = {"spark.sql.adaptive.enabled": "false"}


@dataclass(frozen=True)
class Rewrite:
    """One table's pass, planned for the shared job: the table (`schema`, its files' columns
    as Spark JSON, in order; `keys` and `data` columns with their types; `documents`: its
    JSON columns, whose document null stays a VARIANT null), its `stored` rows (None: a new
    table) replaced by the new version (every file of `read_version` removed), the pool's
    `events` frame holding the table's (topic `topic`), and its change log: what it holds
    (`log_stored`, None: nothing yet) and, when `logs`, where the pass's deletes go (its
    schema `log_schema`), committed as run `run` of `log_app`."""

    name: str
    path: str
    topic: str
    read_version: int
    schema: str
    keys: dict[str, str]
    data: dict[str, str]
    documents: frozenset[str]
    stored: DataFrame | None
    events: DataFrame  # the pool's change events (changes.change_events, with TOPIC)
    app_id: str
    run: int
    attempt: str
    metadata: str
    log_stored: DataFrame | None = None
    logs: bool = False
    log_path: str = ""
    log_app: str = ""
    log_schema: str = ""
    bulk: bool = False  # a new table's inserts, each key once: written as they come

    @property
    def prefix(self) -> str:
        return f"zync-r{self.run}-"

    @property
    def mine(self) -> str:
        return f"{self.prefix}{self.attempt}"


def can_rewrite(spark: SparkSession) -> bool:
    """Whether this session can run the path (a local session: the driver's JVM)."""
    return getattr(spark, "_jvm", None) is not None


def read_stored(spark: SparkSession, path: str) -> tuple[int, str, DataFrame]:
    """The Delta table at `path`: its newest version, its schema (Spark's JSON), and that
    version's rows read from exactly the files its checksum lists where it lists them and
    none has a deletion vector (a Delta scan's planning costs Spark jobs for each table
    read, a DataFrame of the files' paths 10 ms), else through Delta."""
    found = java_class(spark._jvm, COMMIT_CLASS).stored(spark._jsparkSession, path)
    version, schema = found.version(), found.schema()
    if not found.listed():
        return version, schema, spark.read.format("delta").option("versionAsOf", version).load(path)
    return version, schema, DataFrame(found.rows(), spark)


def rewrite_tables(
    spark: SparkSession, rewrites: list[Rewrite], now: dt.datetime
) -> dict[str, Exception | None]:
    """Write every table's new files in one Spark job, then commit each table (its change
    log first); per table, None or what stopped its commit. A failed write job is raised:
    the caller applies those tables one by one instead (so the failure is one table's)."""
    if not rewrites:
        return {}
    logged = [item for item in rewrites if item.logs]
    log_output = {item.name: len(rewrites) + n for n, item in enumerate(logged)}
    tables = [
        Table(item.topic, item.keys, list(item.data), item.documents, item.stored,
              item.log_stored, log_output.get(item.name, -1), item.run, item.bulk)
        for item in rewrites
    ]  # fmt: skip
    files = java_class(spark._jvm, FILES_CLASS)
    with session_conf(spark, _PLANNING):
        rows = planned_rows(spark, tables, _events(rewrites), now)
        written = files.writeRows(
            spark._jsparkSession, rows._jdf,
            [i.path for i in rewrites] + [i.log_path for i in logged],
            [CHANGE_FOLDER] * len(rewrites) + [""] * len(logged),
            [i.mine for i in rewrites] + [i.mine for i in logged],
            [i.schema for i in rewrites] + [i.log_schema for i in logged],
            [",".join(sorted(i.documents)) for i in rewrites] + [ROW] * len(logged),
        )  # fmt: skip
    return {
        item.name: _commit(spark, item, written, index, log_output.get(item.name, -1))
        for index, item in enumerate(rewrites)
    }


def checkpoint_interval(path: str) -> int:
    """Commits between the Delta checkpoints of the table at `path`: 100 to 199, by its
    name, so that tables committed by every pass checkpoint in different passes (Delta's 10
    for all of them made every tenth pass checkpoint every table, with Spark jobs for each:
    a 60-table pass took 38 s instead of 12). A table keeps the interval it has."""
    return (
        CHECKPOINTS_EVERY
        + zlib.crc32(path.rstrip("/").rsplit("/", 1)[-1].encode()) % CHECKPOINTS_EVERY
    )


def _events(rewrites: list[Rewrite]) -> DataFrame:
    """The pool events the rewrites read: one frame where they share one (a group's)."""
    frames: dict[int, DataFrame] = {id(item.events): item.events for item in rewrites}
    return union_all(list(frames.values()))


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
                          item.run, item.metadata, checkpoint_interval(item.log_path))  # fmt: skip
        commit.commit(session, item.path, item.read_version, written, data, True, item.app_id,
                      item.run, item.metadata, checkpoint_interval(item.path))  # fmt: skip
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
