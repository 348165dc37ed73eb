"""The shared SparkSession has Delta Lake and VARIANT support from the local jar cache."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_delta_table_write_and_read(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    spark.createDataFrame([(1, "a"), (2, "b")], "id long, s string").write.format("delta").save(
        path
    )
    spark.createDataFrame([(3, "c")], "id long, s string").write.format("delta").mode(
        "append"
    ).save(path)
    rows = spark.read.format("delta").load(path).orderBy("id").collect()
    assert [(r.id, r.s) for r in rows] == [(1, "a"), (2, "b"), (3, "c")]
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    assert len(history) == 2


def test_variant_keeps_a_missing_field_apart_from_a_null_one(spark) -> None:
    row = spark.sql(
        """select variant_get(v, '$.a', 'int') as a,
                  variant_get(v, '$.gone', 'int') as gone,
                  cast(v:a as string) as a_text,
                  is_variant_null(variant_get(v, '$.n')) as n_is_null,
                  variant_get(v, '$.gone') is null as gone_missing
           from (select parse_json('{"a": 1, "n": null}') as v)"""
    ).first()
    assert (row.a, row.gone, row.a_text, row.n_is_null, row.gone_missing) == (
        1, None, "1", True, True,
    )  # fmt: skip


def test_a_local_driver_maps_its_classes_from_installs_archive(tmp_path: Path) -> None:
    """scripts/install.sh built the class-data archive for this Java and these jars; a
    `zync` command's driver loads most of its classes from it, not from the jars."""
    from zync_assets.spark.archive import archive_path
    from zync_assets.spark.session import spark_jars
    from zync_assets_tests.conftest import zync_ok

    archive = archive_path(spark_jars())
    assert archive is not None and archive.is_file(), f"install built no archive: {archive}"
    loads = tmp_path / "class-load.log"
    conf = tmp_path / "spark.conf"
    conf.write_text(f"spark.driver.extraJavaOptions -Xlog:class+load=info:file={loads}\n")
    env = {**os.environ, "ZYNC_SPARK_CONF": str(conf), "ZYNC_LAKE": str(tmp_path / "lake")}
    assert zync_ok("query", "SELECT 1 AS x", env=env).strip() == '{"x": 1}'
    lines = loads.read_text().splitlines()
    shared = sum("shared objects file (top)" in line for line in lines)
    assert shared > len(lines) / 2, f"{shared} of {len(lines)} classes from the archive"


def test_the_archive_is_named_by_its_java_and_jars(tmp_path: Path) -> None:
    """A changed jar finds no archive (and the driver starts as before), never a stale one."""
    from zync_assets.spark.archive import archive_path

    jar = tmp_path / "a.jar"
    jar.write_bytes(b"one")
    before = archive_path([str(jar)])
    jar.write_bytes(b"two, longer")
    assert archive_path([str(jar)]) != before
    assert archive_path([str(jar)]) == archive_path([str(jar)])


class _Stopped(BaseException):
    """What pytest-timeout raises: not an Exception, so py4j does not close its connection."""


def _stop_in(seconds: float) -> None:
    import signal

    def stop(_signum: int, _frame: object) -> None:
        raise _Stopped

    signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)


def test_a_call_stopped_midway_leaves_the_session_usable_once_its_connection_is_dropped(
    spark,
) -> None:
    from py4j.protocol import Py4JError

    from zync_assets_tests.support.py4j_sync import drop_thread_connection

    jvm = spark._jvm
    kept = []  # as pytest keeps a failed test's traceback, and with it py4j's connection

    def stopped_sleep() -> None:
        _stop_in(0.3)
        with pytest.raises(_Stopped) as stopped:
            jvm.java.lang.Thread.sleep(1500)  # stopped while py4j waits for its answer
        kept.append(stopped)

    stopped_sleep()
    with pytest.raises(Py4JError, match="does not exist in the JVM"):
        jvm.java.lang.Integer.valueOf(7)  # the fault landed: this reads the sleep's answer
    drop_thread_connection(spark)
    stopped_sleep()
    drop_thread_connection(spark)
    assert jvm.java.lang.Integer.valueOf(7) == 7
    assert spark.range(3).count() == 3


def test_a_projects_spark_conf_is_read_over_zyncs_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The package carries what every session needs (Delta's extension and catalog); a
    project's file only says what it changes."""
    from zync_assets.spark.session import spark_conf

    own = tmp_path / "spark.conf"
    own.write_text("spark.driver.memory 6g\nspark.sql.shuffle.partitions 16\n")
    monkeypatch.setenv("ZYNC_SPARK_CONF", str(own))
    conf = spark_conf()
    assert conf["spark.driver.memory"] == "6g" and conf["spark.sql.shuffle.partitions"] == "16"
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    monkeypatch.delenv("ZYNC_SPARK_CONF")
    monkeypatch.chdir(tmp_path)  # no resources/ here: the checkout's file overrides nothing
    assert spark_conf()["spark.driver.memory"] == "2g"


def test_a_driver_runs_the_serial_collector_unless_its_own_options_name_one() -> None:
    """The serial collector by default (G1 held a long-lived driver's heap near its 2g on
    2 cores); a user's own collector wins, as the JVM refuses two."""
    from zync_assets.spark.session import driver_java_options

    for fast_start in (True, False):
        options = " ".join(driver_java_options("-Dx=1", fast_start, "-XX:SharedArchiveFile=a"))
        assert options.count("-XX:+UseSerialGC") == 1, options
        assert ("-XX:TieredStopAtLevel=1" in options) is fast_start, options
        assert options.endswith("-Dx=1"), "the user's own options come last, to win"
    own = " ".join(driver_java_options("-XX:+UseG1GC -Xss4m", False, ""))
    assert "SerialGC" not in own and own.endswith("-XX:+UseG1GC -Xss4m"), own
    assert "SerialGC" not in " ".join(driver_java_options("-XX:+UseZGC", True, ""))


def test_fast_start_takes_its_three_values_and_refuses_others_in_one_line() -> None:
    from zync_assets.core.errors import ZyncError
    from zync_assets.spark.session import fast_start_asked

    assert fast_start_asked("1", False) and not fast_start_asked("1", True)
    assert not fast_start_asked("0", False)
    assert fast_start_asked("always", True)
    with pytest.raises(ZyncError) as refused:
        fast_start_asked("yes", False)
    assert str(refused.value).startswith("ZYNC_SPARK_FAST_START='yes': use 1")
    assert "\n" not in str(refused.value)


def test_dagsters_spark_resource_is_dagster_pysparks_with_zyncs_session(tmp_path: Path) -> None:
    """A host configures zync's Spark as it configures dagster-pyspark's: `spark_config`,
    read over zync's properties; the session still has Delta and zync's functions."""
    import subprocess
    import sys

    script = """
from dagster_pyspark import LazyPySparkResource
from zync_assets.orchestration.resources import SparkResource

resource = SparkResource(spark_config={"spark.sql.shuffle.partitions": 7})
assert isinstance(resource, LazyPySparkResource)
spark = resource.spark_session
print(spark.conf.get("spark.sql.shuffle.partitions"), spark.conf.get("spark.sql.extensions"))
print(spark.sql("SELECT zync_schema_id(X'0000000007') AS id").first().id)
"""
    env = {**os.environ, "ZYNC_LAKE": str(tmp_path / "lake")}
    env.pop("ZYNC_SPARK_MASTER", None)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["7", "io.delta.sql.DeltaSparkSessionExtension", "7"]


# A `chmod` or `readlink` that notes each call in a log, then does the real one.
SPY = '#!/bin/sh\necho "$(basename "$0") $*" >> "{log}"\nexec {real} "$@"\n'
COMMITS = """
import sys
from zync_assets.spark.session import spark_session
spark = spark_session("zync-test")
for mode in ("errorifexists", "append"):
    spark.range(3).write.format("delta").mode(mode).save(sys.argv[1])
print(spark.read.format("delta").load(sys.argv[1]).count())
"""


def _commit_twice(tmp_path: Path, local_fs: str) -> tuple[list[str], Counter]:
    """Two Delta commits by a zync session with `local_fs`: the chmod and readlink calls
    its JVM made on the table's files (Spark's start-up runs chmod on its jars' copies
    either way), and the table's files' modes (by name, less their unique ids)."""
    import re
    import shutil
    import subprocess
    import sys

    spies, log, table = (
        tmp_path / f"bin-{local_fs}",
        tmp_path / f"{local_fs}.log",
        tmp_path / local_fs,
    )
    spies.mkdir()
    for name in ("chmod", "readlink"):
        real = shutil.which(name)
        assert real is not None
        (spies / name).write_text(SPY.format(log=log, real=real))
        (spies / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{spies}:{os.environ['PATH']}", "ZYNC_SPARK_LOCAL_FS": local_fs}
    done = subprocess.run([sys.executable, "-c", COMMITS, str(table)], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0 and done.stdout.split()[-1] == "6", done.stderr[-2000:]
    calls = [c for c in (log.read_text().splitlines() if log.exists() else []) if str(table) in c]
    uuid = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
    modes = Counter(
        (uuid.sub("…", str(p.relative_to(table))), p.stat().st_mode) for p in table.rglob("*")
    )
    return calls, modes


def test_a_local_lakes_commits_start_no_chmod_or_readlink_and_leave_the_same_files(
    tmp_path: Path,
) -> None:
    """zync's local file system (jvm/src/zync/spark/ShelllessRawLocalFileSystem.java):
    Hadoop's, less a child process per created file and per commit's rename; the same
    files with the same modes as Hadoop's own leaves."""
    hadoops, hadoop_modes = _commit_twice(tmp_path, "hadoop")
    assert any(c.startswith("chmod ") for c in hadoops), hadoops  # the spies see Hadoop's
    assert any(c.startswith("readlink ") for c in hadoops), hadoops
    zyncs, zync_modes = _commit_twice(tmp_path, "zync")
    assert zyncs == []
    assert zync_modes == hadoop_modes
