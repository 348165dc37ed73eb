"""The SparkSession zync uses: Delta enabled, jars from the local cache, never resolved online.

`ZYNC_SPARK_MASTER` picks the master (default `local[*]`); an `sc://` URL connects
through Spark Connect instead. Properties come from the package's spark-defaults.conf,
with the project's `resources/spark.conf` (or `$ZYNC_SPARK_CONF`) over them.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from zync_assets.core.config import current
from zync_assets.core.errors import ZyncError
from zync_assets.core.locations import CHECKOUT_ROOT, jars_dir
from zync_assets.jars import FETCH_HINT, functions_jar
from zync_assets.lake.store import is_object_store, lake_keys, lake_uri, spark_conf_for_lake
from zync_assets.spark.archive import dump_options, java_options
from zync_assets.spark.catalog import metastore_conf
from zync_assets.spark.functions import quiet_query_errors, register_functions
from zync_assets.spark.jvm import start_driver_jvm

# Java options that halve JVM start-up on small machines (C1 only). A long-lived session
# (`zync run --follow`) goes without: C2's code runs its passes about 1.5x faster once warm
# (a 60-table lake pass 14 s against 22 s). ZYNC_SPARK_FAST_START=0 turns them off for any
# command, `always` on for every session (a process whose sessions live minutes, as the
# test suite's workers: C2's compiler threads cost them more than its code saved).
# C1 alone reserves a 48 MiB code cache, which a pass over dozens of lake tables (a plan
# each) filled: the JVM then stops compiling and runs interpreted ("CodeCache is full.
# Compiler has been disabled"), and a pass over 60 tables took minutes. Tiered's size
# keeps compiling; it is reserved, not used, until code fills it.
_FAST_START_OPTS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
# The driver's collector, unless spark.driver.extraJavaOptions names one (two collectors
# are an error at the JVM's start): the serial one. On 2 cores G1's concurrent threads
# compete with the passes, and its regions and remembered sets held the heap near its
# 2g: a long-lived session over a 60-table pass peaked at 2,867 MiB with G1 and 1,533
# MiB with it, at the same pass time (docs/operations.md, "Memory"); the suite's workers
# spent a quarter less CPU.
_COLLECTOR_OPTS = "-XX:+UseSerialGC"
_COLLECTOR_CHOSEN = re.compile(r"-XX:[+-]Use\w*GC\b")
SPARK_LOG4J2 = Path(__file__).resolve().parent / "log4j2-spark.properties"
SPARK_DEFAULTS = Path(__file__).resolve().parent / "spark-defaults.conf"


def read_spark_conf(path: Path) -> dict[str, str]:
    """`key value` lines; `#` starts a comment."""
    conf = {}
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split(None, 1)
        if len(parts) != 2:
            raise ZyncError(f"{path}:{number}: expected `key value`, got {raw.strip()!r}")
        conf[parts[0]] = parts[1].strip()
    return conf


def spark_conf() -> dict[str, str]:
    """zync's Spark properties: the package's defaults (Delta's extension and catalog,
    small-machine settings), then the project's own file over them."""
    conf = read_spark_conf(SPARK_DEFAULTS)
    if (project_file := spark_conf_file()) is not None:
        conf |= read_spark_conf(project_file)
    return conf


def spark_conf_file() -> Path | None:
    if os.environ.get("ZYNC_SPARK_CONF"):
        return Path(os.environ["ZYNC_SPARK_CONF"])
    for candidate in (Path("resources/spark.conf"), CHECKOUT_ROOT / "resources" / "spark.conf"):
        if candidate.is_file():
            return candidate
    return None


def spark_jars() -> list[str]:
    """Delta Lake, the Kafka source, Avro (the jar cache), and zync's own functions (in the
    package); with an S3 lake, hadoop-aws and the AWS SDK modules it needs too (only then:
    executors fetch every jar in the list from the driver)."""
    folder = jars_dir() / "spark"
    jars = sorted(str(p) for p in folder.glob("*.jar"))
    if not any("delta-spark" in Path(j).name for j in jars):
        raise ZyncError(f"the Delta Lake jars are missing from {folder}; {FETCH_HINT}")
    return [*jars, *_object_store_jars(), str(functions_jar())]


def _object_store_jars() -> list[str]:
    if not is_object_store(lake_uri()):
        return []
    folder = jars_dir() / "s3"
    jars = sorted(str(p) for p in folder.glob("*.jar"))
    if not any("hadoop-aws" in Path(j).name for j in jars):
        raise ZyncError(
            f"the S3 jars (hadoop-aws) are missing from {folder}; fetch them with `zync jars "
            "--s3` (in a checkout: scripts/install.sh)"
        )
    return jars


def default_parallelism(spark: SparkSession) -> int:
    """How many tasks keep every core busy: the driver's count locally, the server's
    `spark.default.parallelism` through Spark Connect (which has no SparkContext)."""
    if getattr(spark, "_jsc", None) is not None:
        return spark.sparkContext.defaultParallelism
    configured = spark.conf.get("spark.default.parallelism", None)
    return int(configured) if configured else os.cpu_count() or 2


def analyzed_plan(frame: DataFrame) -> str:
    """The frame's analysed logical plan, as Spark prints it."""
    if getattr(frame, "_jdf", None) is not None:
        return frame._jdf.queryExecution().analyzed().toString()
    explained = frame._explain_string(extended=True)  # type: ignore[operator]  # Connect
    analyzed = explained.split("== Analyzed Logical Plan ==", 1)[-1]
    return analyzed.split("== Optimized Logical Plan ==", 1)[0]


def select_over(frame: DataFrame, select_list: str) -> DataFrame:
    """`SELECT <select_list> FROM frame`, as SQL a user wrote. The frame is a query
    parameter, not a temporary view: through Spark Connect a frame is analysed again at
    each action, after a view dropped by its maker would be gone."""
    escaped = select_list.replace("{", "{{").replace("}", "}}")  # literal braces in the SQL
    return frame.sparkSession.sql(f"SELECT {escaped} FROM {{frame}}", frame=frame)


def union_all(frames: list[DataFrame]) -> DataFrame:
    """The frames' rows together (by column name); at least one frame. Unioned as a
    balanced tree: each union is analysed whole, so a chain of 480 (a 240-table pass's
    sources) cost 12 s of planning where the tree costs under 1."""
    while len(frames) > 1:
        pairs = [frames[i : i + 2] for i in range(0, len(frames), 2)]
        frames = [pair[0].unionByName(pair[1]) if len(pair) == 2 else pair[0] for pair in pairs]
    return frames[0]


def sql_literal(value: str | int) -> str:
    """`value` as a Spark SQL literal."""
    if isinstance(value, int):
        return str(value)
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def looked_up(table: Mapping[str, str | int], key: Column, default: Column) -> Column:
    """`table[key]`, else `default`: one map literal, where a CASE WHEN per entry made a
    plan (and its generated code) that grew with the entries (a mirror's topics). Written
    as SQL text: a literal per entry built through py4j cost 0.7 s of a 240-topic pass."""
    if not table:
        return default
    pairs = ", ".join(f"{sql_literal(k)}, {sql_literal(v)}" for k, v in table.items())
    return F.coalesce(F.try_element_at(F.expr(f"map({pairs})"), key), default)


def one_of(column: str, values: Iterable[str | int]) -> Column:
    """`column IN (values)` (a column's SQL name), as SQL text: PySpark's isin builds a
    literal per value through py4j (a 240-topic pass's topic lists cost 0.2 s)."""
    listed = ", ".join(sql_literal(v) for v in values)
    return F.expr(f"{column} IN ({listed})") if listed else F.lit(False)


def pinned(frame: DataFrame) -> DataFrame:
    """`frame`, computed at its first action and kept for the actions after it.

    A local checkpoint, not a cache: a cache keeps the plan it was made from, and after
    every write to a table Spark re-plans each cache whose plan reads that table (the
    write command's recache). An ETL pass, whose caches read its staging pool, paid
    about 2.5 s per commit for that. A checkpoint's plan is its rows: no write touches it.
    """
    return frame.localCheckpoint(eager=False, storageLevel=StorageLevel.MEMORY_AND_DISK)


def unpin(frame: DataFrame) -> None:
    """Free a pinned frame's rows now. Through Spark Connect the server frees them once
    the client drops its last reference to the frame (and the JVM collects it)."""
    if getattr(frame, "_jdf", None) is not None:
        frame._jdf.queryExecution().analyzed().rdd().unpersist(False)


@contextmanager
def pins() -> Iterator[Callable[[DataFrame], DataFrame]]:
    """`pin(frame)` (pinned) for the frames a block reads more than once; each freed when
    the block ends."""
    held: list[DataFrame] = []

    def pin(frame: DataFrame) -> DataFrame:
        held.append(pinned(frame))
        return held[-1]

    try:
        yield pin
    finally:
        for frame in held:
            unpin(frame)


def spark_session(
    app_name: str = "zync", long_lived: bool = False, dump_class_archive: Path | None = None,
    conf: Mapping[str, str] | None = None, fast_start: bool | None = None,
) -> SparkSession:  # fmt: skip
    """The process's SparkSession (created on first use, then shared). A local driver maps
    install's class-data archive (spark_archive); `dump_class_archive` writes one instead.
    `conf`: Spark properties read over zync's (spark_conf(), then the configuration's);
    its `spark.master`, if any, wins over the configuration's. A Spark Connect server
    keeps its own properties. `fast_start`: C1's code only (None: for a session that is
    not `long_lived`, unless ZYNC_SPARK_FAST_START is 0; `always` there: every session)."""
    given = dict(conf or {})
    config = current()
    master = given.pop("spark.master", None) or config.spark_master
    if master.startswith("sc://"):
        from zync_assets.spark.connect import connect_session

        return connect_session(master, app_name)
    if master.startswith("spark://"):
        _require_standalone_master(master)
    conf = spark_conf() | dict(config.spark_conf) | given
    jars = spark_jars()
    if fast_start is None:
        fast_start = fast_start_asked(os.environ.get("ZYNC_SPARK_FAST_START", "1"), long_lived)
    opts = driver_java_options(
        conf.get("spark.driver.extraJavaOptions", ""), fast_start,
        dump_options(dump_class_archive) if dump_class_archive else _archive_options(jars),
    )  # fmt: skip
    lake = lake_uri()
    # A long-lived session may run the lake tables in a loop beside the warehouse path
    # (`zync run --tables-loop`): FAIR lets each loop's jobs run beside the other's
    # (in_scheduler_pool), not after them. Jobs in no pool share one FIFO pool, as before.
    fair = {"spark.scheduler.mode": "FAIR"} if long_lived else {}
    # The properties of spark_conf() win over those zync derives (S3 settings, scheduling,
    # the catalog's metastore).
    catalog = metastore_conf(config.catalog, lake) if config.catalog.enabled else {}
    if "spark.driver.extraClassPath" in catalog and conf.get("spark.driver.extraClassPath"):
        catalog["spark.driver.extraClassPath"] += ":" + conf.pop("spark.driver.extraClassPath")
    conf = spark_conf_for_lake(lake) | fair | catalog | conf
    conf |= {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.jars": ",".join(jars),
        "spark.driver.extraJavaOptions": " ".join(o for o in opts if o),
    }
    start_driver_jvm(conf)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    hadoop = session.sparkContext._jsc.hadoopConfiguration()
    for key, value in lake_keys(lake).items():
        hadoop.set(key, value)
    if master.startswith("local") and os.environ.get("ZYNC_SPARK_LOCAL_FS") != "hadoop":
        _use_shellless_local_files(session)
    session.sparkContext.setLogLevel("ERROR")
    register_functions(session)
    quiet_query_errors()
    return session


def fast_start_asked(value: str, long_lived: bool) -> bool:
    """Whether ZYNC_SPARK_FAST_START=`value` gives a session C1's code only: 1 (the
    default) a session that is not long-lived, 0 none, `always` every one."""
    if value not in ("0", "1", "always"):
        raise ZyncError(
            f"ZYNC_SPARK_FAST_START={value!r}: use 1 (the default: C1's code for one-pass "
            "commands), 0 (never) or always (long-lived sessions too)"
        )
    return value == "always" or (value == "1" and not long_lived)


def driver_java_options(own: str, fast_start: bool, archive: str) -> list[str]:
    """The local driver's Java options: the fast start's (if asked), the serial collector
    unless the user's own options (`own`, spark.driver.extraJavaOptions) name a collector,
    the class-data `archive`'s, zync's logging, then the user's own."""
    return [
        _FAST_START_OPTS if fast_start else "",
        "" if _COLLECTOR_CHOSEN.search(own) else _COLLECTOR_OPTS,
        archive,
        f"-Dlog4j2.configurationFile={SPARK_LOG4J2}",
        own,
    ]


def _require_standalone_master(master: str) -> None:
    """A standalone master none of whose addresses answers is one line now: Spark's own
    client retries for a minute, then leaves a stopped context and an internal error."""
    for address in master.removeprefix("spark://").split(","):
        host, colon, port = address.rpartition(":")
        if not colon:
            host, port = address, "7077"  # Spark's standalone master's default port
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
            return
        except (OSError, ValueError):
            continue
    raise ZyncError(
        f"no Spark master answers at {master} (ZYNC_SPARK_MASTER): start it (`zync stack up "
        "--spark-workers 2` starts a local one), or unset ZYNC_SPARK_MASTER to run Spark in "
        "this process"
    )


def lane_session(spark: SparkSession) -> SparkSession:
    """A second session on `spark`'s JVM for a loop of stages running beside the first
    (pipeline/run.py's lake tables lane): the same executors, lake and pins, and its own SQL
    conf, so one loop's small_work settings never flip the other's in the middle of a job."""
    if is_remote(spark):
        from zync_assets.spark.connect import connect_session

        return connect_session(current().spark_master, "zync", new=True)
    session = spark.newSession()
    register_functions(session)  # a new session starts with Spark's built-in functions only
    return session


def end_lane_session(session: SparkSession) -> None:
    """Let go of a session `lane_session` made. Through Spark Connect it is released on
    the server and its channel closed now: left to the interpreter's exit, PySpark's
    `__del__` closes the gRPC channel after gRPC's threads are gone and the process never
    exits. A local one needs nothing (stopping it would stop the shared JVM's context)."""
    if is_remote(session):
        session.stop()


def in_scheduler_pool(spark: SparkSession, pool: str) -> None:
    """Schedule the calling thread's jobs in Spark's scheduler pool `pool`: a long-lived
    local session schedules FAIR (spark_session), so two loops' jobs share the cores
    instead of one waiting for the other's tasks. Through Spark Connect, its server
    schedules."""
    if not is_remote(spark):
        spark.sparkContext.setLocalProperty("spark.scheduler.pool", pool)


def scheduler_pool(spark: SparkSession) -> str | None:
    """The scheduler pool of the calling thread's jobs (None: the default, or Spark
    Connect, whose server schedules)."""
    if is_remote(spark):
        return None
    return spark.sparkContext.getLocalProperty("spark.scheduler.pool")


# Hadoop's local file system, less a child process per call: without Hadoop's native
# library (PySpark ships none) it runs `chmod` for each file and folder it creates and
# `readlink` twice for each rename through a FileContext (each Delta commit), about 30 ms
# each on two cores: over a second of a lake table's 2.3 s pass (jvm/src/zync/spark/
# ShelllessRawLocalFileSystem.java). Set once the driver runs: the launcher reads its
# jars through the file system before zync's jar is on its class path. Local masters
# only, where the executors share the driver's JVM. ZYNC_SPARK_LOCAL_FS=hadoop keeps
# Hadoop's own (to compare).
_LOCAL_FILES = {
    "fs.file.impl": "zync.spark.LocalFileSystem",
    "fs.AbstractFileSystem.file.impl": "zync.spark.LocalFs",
}


def local_files_conf() -> dict[str, str]:
    """The Spark properties that give a JVM zync's local file system from its start (the
    stack's Spark Connect server: zync's jar goes on its class path too), unless
    ZYNC_SPARK_LOCAL_FS=hadoop."""
    if os.environ.get("ZYNC_SPARK_LOCAL_FS") == "hadoop":
        return {}
    return {f"spark.hadoop.{key}": value for key, value in _LOCAL_FILES.items()}


def _use_shellless_local_files(session: SparkSession) -> None:
    """Point the session's Hadoop configuration at zync's local file system, and drop the
    cached one Spark's start-up made (FileSystem.get would keep returning it)."""
    jvm = session.sparkContext._jvm
    assert jvm is not None
    hadoop = session.sparkContext._jsc.hadoopConfiguration()
    for key, value in _LOCAL_FILES.items():
        hadoop.set(key, value)
    jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), hadoop).close()


def is_remote(spark: SparkSession) -> bool:
    """Whether `spark` is a Spark Connect session (no JVM in this process)."""
    return getattr(spark, "_jsparkSession", None) is None


def _archive_options(jars: list[str]) -> str:
    """Install's class-data archive for the driver, unless ZYNC_SPARK_CLASS_ARCHIVE=0."""
    return java_options(jars) if os.environ.get("ZYNC_SPARK_CLASS_ARCHIVE", "1") != "0" else ""


# For passes over a few thousand rows, compiling code costs more than it saves: Spark's
# whole-stage and expression code generation (a fresh compile for each pass, whose
# literals differ), adaptive re-planning and shuffle fan-out are off while one runs.
# Measured on 2 cores: a pass of the invoice spec over a few events 25-30% faster.
_SMALL_WORK = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
}


@contextmanager
def session_conf(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """Run the block with `settings` in the session's SQL conf; restore them after."""
    saved: dict[str, str | None] = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


# A stage with at most this many rows to do runs with _SMALL_WORK's settings
# (interpreted, not compiled); a bigger one with the session's own.
SMALL_PASS_ROWS = 20_000


def small_work(spark: SparkSession) -> AbstractContextManager[None]:
    """Run the block with the settings that suit a small pass."""
    return session_conf(spark, _SMALL_WORK)


def sized_work(spark: SparkSession, rows: int | None) -> AbstractContextManager[None]:
    """small_work's settings for a stage with at most SMALL_PASS_ROWS rows to do (None:
    not known), else the session's own."""
    return small_work(spark) if rows is not None and rows <= SMALL_PASS_ROWS else nullcontext()
