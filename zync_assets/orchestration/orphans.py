"""Runs whose worker process died (kill -9, the kernel's OOM killer) stay STARTED in
Dagster's storage for ever: the default run launcher cannot check a worker's health, so
run monitoring cannot either. A pool's sensor waits while a run of its pool is active,
so one such run would stop the pool for good. The sensor asks here first: a run whose
worker is gone is marked failed — nothing is lost, zync's commits are atomic and the
next run redoes what was not committed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from dagster import DagsterEventType, DagsterInstance
from dagster._core.launcher import DefaultRunLauncher
from dagster._core.storage.dagster_run import RunRecord

# The code server's engine event when it starts a run worker.
_WORKER_STARTED = re.compile(r"Started process for run \(pid: (\d+)\)")


def worker_pid(instance: DagsterInstance, run_id: str) -> int | None:
    for entry in instance.all_logs(run_id, of_type=DagsterEventType.ENGINE_EVENT):
        if (found := _WORKER_STARTED.search(entry.message or "")) is not None:
            return int(found.group(1))
    return None


def process_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie — dead, not yet reaped by its parent — does not)."""
    if Path("/proc/self/stat").exists():  # Linux: the process state says it
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state != "Z"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def fail_orphaned_runs(instance: DagsterInstance, records: list[RunRecord]) -> list[str]:
    """Mark failed the runs among `records` whose worker process is gone; their ids.
    Only for the default launcher: its workers run on this machine."""
    if not isinstance(instance.run_launcher, DefaultRunLauncher):
        return []
    failed = []
    for record in records:
        run = record.dagster_run
        pid = worker_pid(instance, run.run_id)
        if pid is not None and not process_alive(pid):
            instance.report_run_failed(
                run,
                f"its run worker (pid {pid}) is gone (killed, or out of memory); nothing it "
                "had not committed is lost: the next run does it again",
            )
            failed.append(run.run_id)
    return failed
