"""A newcomer's terminal: the common `zync` commands print only zync's own lines.

No Spark banner, JVM warning, PySpark deprecation, librdkafka retry line or Java stack
trace on exit reaches stderr, with Spark started locally (what a user gets by default)
or through the stack's Spark Connect server; `-v` and ZYNC_DEBUG=1 still show them.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from zync_assets_tests.conftest import Stack, free_port, run_zync

pytestmark = pytest.mark.integration

# What Spark, the JVM, PySpark, librdkafka, log4j and Python's warnings write when left alone.
THIRD_PARTY = re.compile(
    r"WARN|Warning|warnings\.warn|Setting default log level|setLogLevel|incubator|"
    r"GETPID|Coordinator load|%\d\|\d+\.\d+\||log4j|SLF4J|Exception|Traceback|"
    r"^\s+at [\w$.]+\(|Broken pipe|py4j|rdkafka",
    re.MULTILINE,
)


# What the driver JVM prints on stdout when left alone (Delta's VACUUM counts its files).
JVM_STDOUT = re.compile(r"files and directories in a total of")


def spec(tmp_path: Path, topic: str) -> Path:
    path = tmp_path / "quiet.yaml"
    path.write_text(
        f"""
inputs:
  - {{topic: {topic}, pool: QuietRaw}}
outputs:
  - {{topic: {topic}_out, pool: QuietStaging}}
transforms:
  - {{type: stateless, in: {topic}, out: {topic}_out, sql: "in.key AS key, in.value AS value"}}
tables:
  - {{name: quiet_current, source: {topic}_out, keys: [id]}}
"""
    )
    return path


def test_common_commands_print_nothing_third_party(
    stack: Stack, spark_server: str, topic: str, tmp_path: Path
) -> None:
    spec_path = str(spec(tmp_path, topic))
    env = stack.env(ZYNC_LAKE=str(tmp_path / "lake"))
    env.pop("ZYNC_SPARK_MASTER", None)
    connect = {**env, "ZYNC_SPARK_MASTER": spark_server}
    # Three values of one shape, then one with a field more: the driver's Java sender
    # meets, within the run's one pass, a value shape it must register.
    values = [{"id": i, "n": i} for i in range(3)] + [{"id": 9, "n": 9, "note": "new field"}]
    lines = "\n".join(json.dumps({"key": {"id": v["id"]}, "value": v}) for v in values)
    # Local Spark (what a user gets by default) where its JVM could speak: ingest, ETL,
    # to-kafka through the driver's Java sender and the lake tables in one `run`, and
    # VACUUM's counts in `pool maintain`; the stack's Spark Connect server for the other
    # readers (a local JVM's start-up is the same in every command: two of them, not
    # more, each about 30 s on a loaded machine).
    commands: list[tuple[list[str], dict[str, str], str | None]] = [
        (["produce", "--topic", topic], env, lines),
        (["ls"], env, None),
        (["info", "--topic", topic], env, None),
        (["consume", "--topic", topic, "--from-beginning", "--exit-after", "2s"], env, None),
        (["run", spec_path], env, None),
        (["status", spec_path], connect, None),
        (["table", "history", "quiet_current"], connect, None),
        (["etl", spec_path], connect, None),
        (["to-kafka", "--pool", "QuietStaging"], connect, None),
        (["pool", "ls"], env, None),
        (["pool", "maintain", "QuietRaw"], env, None),
    ]
    for args, environment, stdin in commands:
        done = run_zync(
            *args, env=environment, stdin=stdin, timeout=240, cwd=tmp_path, process=True
        )
        assert done.returncode == 0, (args, done.stderr)
        assert not THIRD_PARTY.search(done.stderr), (args, done.stderr)
        assert not JVM_STDOUT.search(done.stdout), (args, done.stdout)
    counted = run_zync(
        "query", "SELECT count(*) AS n FROM QuietRaw", env=connect, cwd=tmp_path, process=True
    )
    assert not THIRD_PARTY.search(counted.stderr), counted.stderr
    assert json.loads(counted.stdout) == {"n": 4}  # the commands did their work


def test_a_dead_broker_is_one_line_and_verbose_shows_the_clients_own_logs(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "ZYNC_KAFKA_BOOTSTRAP": f"127.0.0.1:{free_port()}"}
    quiet = run_zync("info", "--topic", "t", env=env, cwd=tmp_path, timeout=60, process=True)
    assert quiet.returncode == 1
    assert len(quiet.stderr.strip().splitlines()) == 1, quiet.stderr
    assert quiet.stderr.startswith("zync: error: ")

    verbose = run_zync(
        "-v", "info", "--topic", "t", env=env, cwd=tmp_path, timeout=60, process=True
    )
    assert verbose.returncode == 1
    assert "zync.librdkafka" in verbose.stderr  # librdkafka's own words, through zync's logger
    assert verbose.stderr.rstrip().splitlines()[-1] == quiet.stderr.strip()


def test_zync_debug_passes_the_jvms_start_up_lines(stack: Stack, tmp_path: Path) -> None:
    """The filter drops only what it names: with ZYNC_DEBUG=1 the JVM's lines come through."""
    env = stack.env(ZYNC_LAKE=str(tmp_path / "lake"), ZYNC_DEBUG="1")
    env.pop("ZYNC_SPARK_MASTER", None)
    done = run_zync("query", "SELECT 1 AS one", env=env, cwd=tmp_path, process=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"one": 1}
    assert "Using incubator modules" in done.stderr
