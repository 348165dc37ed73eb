"""to-kafka under kill -9 and a rival process: every staging record exactly once, in order."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bench.tokafka_bench import write_staging
from zync_assets.tokafka.position import OFFSET_HEADER
from zync_assets_tests.conftest import ZYNC, Stack, read_topic, run_zync

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_kill_9_during_a_large_sync_then_resume_sends_each_record_once_in_order(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    count = 160_000
    write_staging(spark, "Big", topic, count)
    env = stack.env(ZYNC_LAKE=str(lake))
    command = [ZYNC, "to-kafka", "--pool", "Big", "--transaction-size", "16000"]
    rng = random.Random(11)
    for _ in range(5):
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)  # fmt: skip
        time.sleep(rng.uniform(11, 16))  # Spark starts in ~8s: kills land in survey or sends
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    done = run_zync(*command[1:], env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    records = read_topic(stack, topic, decode=False)  # read_committed: aborted batches hidden
    assert [int(r.headers[OFFSET_HEADER]) for r in records] == list(range(count))
    sample = read_topic(stack, topic)[::50_000]
    assert [r.key for r in sample] == [{"ID": i} for i in range(0, count, 50_000)]


def test_a_second_to_kafka_fences_the_first_and_nothing_doubles(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    count = 120_000
    write_staging(spark, "Race", topic, count)
    env = stack.env(ZYNC_LAKE=str(lake))
    command = [ZYNC, "to-kafka", "--pool", "Race", "--transaction-size", "12000"]
    first = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    time.sleep(3)  # the second starts while the first is working
    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    _, err = first.communicate(timeout=600)
    results = [(first.returncode, err), (second.returncode, second.stderr)]
    assert any(code == 0 for code, _ in results), results
    for code, stderr in results:  # a loser says what happened, in one line
        assert code == 0 or "took over (this producer was fenced)" in stderr, stderr
    finish = run_zync(*command[1:], env=env, timeout=600)
    assert finish.returncode == 0, finish.stderr
    records = read_topic(stack, topic, decode=False)
    assert [int(r.headers[OFFSET_HEADER]) for r in records] == list(range(count))
