"""Ingest under kill -9 and with two concurrent writers: every offset exactly once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from zync_assets_tests.conftest import (
    ZYNC,
    Stack,
    assert_each_offset_once,
    pool_offsets,
    produce_many,
    run_zync,
)
from zync_assets_tests.support.kills import kill_when

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.parametrize("where", ["local", "cluster"])
def test_kill_9_at_random_points_then_resume_loses_and_doubles_nothing(
    spark, stack: Stack, topic: str, tmp_path: Path, where: str, request: pytest.FixtureRequest
) -> None:
    """The driver killed (on a cluster, its executors die with it: the master sees the
    application end) at a random point of the work after each run's first commit: in
    the middle of reading, decoding or writing the next batch, or of committing it."""
    count = 30_000
    produce_many(stack, topic, count, every_bad=997)  # dead letters take part too
    lake = tmp_path / "lake"
    env = stack.env(ZYNC_LAKE=str(lake))
    if where == "cluster":
        env["ZYNC_SPARK_MASTER"] = request.getfixturevalue("spark_cluster").url
    command = [ZYNC, "from-kafka", "--topic", topic, "--pool", "Crash",
               "--max-records", "3000", "--interval", "0s", "--exit-after", "1s"]  # fmt: skip
    rng = random.Random(7)
    # One landed kill: each is at a random point, and more of them prove the same property
    # again (the soak kills many times over: test_soak.py).
    killed = kill_when(command, env, lambda out: "run " in out, delay=rng.uniform(0, 3))
    assert killed.landed, f"the ingest ended before its kill: {killed.stdout}{killed.stderr}"
    assert "run " in killed.stdout  # a commit went in: this run's kill cut the next
    assert 0 < len(pool_offsets(spark, lake, "Crash", killed=True)) < count  # cut short
    # The rest in one commit (small ones were for the kills), by a local driver: what a
    # killed cluster driver left must be what any driver resumes from.
    resume = {k: v for k, v in env.items() if k != "ZYNC_SPARK_MASTER"}
    done = run_zync("from-kafka", "--topic", topic, "--pool", "Crash", "--once", env=resume,
                    timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert_each_offset_once(spark, lake, "Crash", count)


def test_two_concurrent_writers_never_duplicate(
    spark, stack: Stack, topic: str, tmp_path: Path
) -> None:
    count = 40_000
    produce_many(stack, topic, count)
    lake = tmp_path / "lake"
    env = stack.env(ZYNC_LAKE=str(lake))
    command = [ZYNC, "from-kafka", "--topic", topic, "--pool", "Twice", "--once"]
    writers = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True) for _ in range(2)]  # fmt: skip
    outcomes = [(w.wait(timeout=600), *w.communicate()) for w in writers]
    for code, out, err in outcomes:
        if code != 0:  # the loser fails with one clear line...
            assert code == 1 and "another writer" in err, err
        else:  # ...or finds the work done
            assert "run 1:" in out or "another writer" in out or "nothing new" in out, out
    assert_each_offset_once(spark, lake, "Twice", count)


def test_ctrl_c_finishes_the_current_commit_and_exits_cleanly(
    spark, stack: Stack, topic: str, tmp_path: Path
) -> None:
    produce_many(stack, topic, 20_000)
    lake = tmp_path / "lake"
    command = [ZYNC, "from-kafka", "--topic", topic, "--pool", "Stop", "--interval", "1s"]
    proc = subprocess.Popen(command, env=stack.env(ZYNC_LAKE=str(lake)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None
    first = proc.stdout.readline()  # the first commit's report line
    assert "run 1:" in first, first
    proc.send_signal(signal.SIGINT)
    code = proc.wait(timeout=120)
    assert code == 0, proc.stderr.read() if proc.stderr else ""
    assert_each_offset_once(spark, lake, "Stop", 20_000)


def _driver_jvm(pid: int) -> int:
    """The pid of the local Spark driver JVM that zync process `pid` started."""
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    for child in children.stdout.split():
        if "java" in Path(f"/proc/{child}/cmdline").read_text():
            return int(child)
    raise AssertionError(f"zync {pid} has no Spark JVM child")


def test_the_spark_jvm_killed_mid_pass_is_one_line_and_resume_loses_nothing(
    spark, stack: Stack, topic: str, tmp_path: Path
) -> None:
    """Not zync's process: only its JVM dies (the kernel's OOM killer picks the largest)."""
    count = 20_000
    produce_many(stack, topic, count)
    lake = tmp_path / "lake"
    env = stack.env(ZYNC_LAKE=str(lake))
    command = [ZYNC, "from-kafka", "--topic", topic, "--pool", "JvmKill",
               "--max-records", "4000", "--interval", "0s", "--exit-after", "2s"]  # fmt: skip
    rng = random.Random(5)
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None
    proc.stdout.readline()  # a commit is in: the JVM is busy with the next
    time.sleep(rng.uniform(0, 2))
    os.kill(_driver_jvm(proc.pid), signal.SIGKILL)
    _out, err = proc.communicate(timeout=120)
    lines = [line for line in err.splitlines() if not line.startswith("spark ready")]
    assert proc.returncode == 1, err
    assert len(lines) == 1 and "Spark's driver JVM stopped during the pass" in lines[0], err
    done = run_zync("from-kafka", "--topic", topic, "--pool", "JvmKill", "--once", env=env,
                    timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert_each_offset_once(spark, lake, "JvmKill", count)
