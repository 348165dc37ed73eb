"""The pipeline on a Spark standalone cluster (`ZYNC_SPARK_MASTER=spark://…`): a master and
two one-core workers started from PySpark's distribution. Each `zync` command is the
driver; the workers' executors decode, transform, encode and write. Results must be what
local mode gives: zync's exact invoice table, every offset once, every output once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from zync_assets_tests.conftest import (
    ZYNC,
    Cluster,
    Stack,
    assert_each_offset_once,
    produce_many,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

INVOICES = Path(__file__).parent.parent / "etl_specs" / "invoices.yaml"


# The invoice demo runs on the cluster with its lake on S3: test_object_store.py (ingest,
# ETL, to-kafka and lake tables on the executors, zync's exact result). Many events over
# both executors, every offset once: the executor-kill test below (400,000 messages) and
# the ingest kill test's cluster case. The ETL over tens of thousands of events on the
# cluster had a test of its own (6-7 minutes of the suite, nearly all of it the cluster's
# fixed cost per command); ETL's result does not depend on where its tasks run, which
# the S3 demo shows on the executors.


def on_cluster(stack: Stack, cluster: Cluster, lake: Path) -> dict[str, str]:
    return stack.env(ZYNC_LAKE=str(lake), ZYNC_SPARK_MASTER=cluster.url)


def master_state(cluster: Cluster) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.ui_port}/json/", timeout=5) as answer:
        return json.load(answer)


def apps_run(cluster: Cluster) -> set[str]:
    state = master_state(cluster)
    return {app["id"] for app in state["activeapps"] + state["completedapps"]}


def _executor_running_a_task(cluster: Cluster, app_id: str) -> int | None:
    """The PID of an executor of `app_id` that has started a task (its log, in the worker's
    work folder, says `Running task`), if one has."""
    for log in sorted(cluster.state.glob(f"spark-cluster/worker-*/{app_id}/*/stderr")):
        if "Running task" not in log.read_text(errors="replace"):
            continue
        executor = log.parent.name
        found = subprocess.run(
            ["pgrep", "-f", f"CoarseGrainedExecutorBackend.*--executor-id {executor} .*{app_id}"],
            capture_output=True, text=True,
        )  # fmt: skip
        if pids := [int(pid) for pid in found.stdout.split()]:
            return pids[0]
    return None


def test_an_executor_killed_mid_ingest_costs_a_retry_not_an_offset(
    spark, stack: Stack, spark_cluster: Cluster, topic: str, tmp_path: Path
) -> None:
    """kill -9 of one worker's executor while its tasks read and write: Spark runs the lost
    tasks again elsewhere; the command succeeds and the pool holds every offset once."""
    count = 200_000  # the kill comes with the first running task: most of it is still to do
    produce_many(stack, topic, count)
    lake = tmp_path / "lake"
    command = [ZYNC, "from-kafka", "-t", topic, "-p", "Lost", "--once"]
    ingest = subprocess.Popen(command, env=on_cluster(stack, spark_cluster, lake),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline, victim = time.monotonic() + 120, None
    while victim is None and time.monotonic() < deadline and ingest.poll() is None:
        active = master_state(spark_cluster)["activeapps"]
        victim = _executor_running_a_task(spark_cluster, active[0]["id"]) if active else None
        time.sleep(0.5)
    assert victim is not None, "no executor of the ingest was seen running a task"
    assert ingest.poll() is None, "the ingest finished before the kill"
    os.kill(victim, signal.SIGKILL)
    out, err = ingest.communicate(timeout=600)
    assert ingest.returncode == 0, err
    assert "run 1:" in out
    assert_each_offset_once(spark, lake, "Lost", count)
