"""kill -9 of a `zync` command at a chosen point of its work, and the proof that it landed.

A kill after a blind sleep can land before the command did anything (Spark still
starting) or after it finished: the test then passes without its fault. Here a kill
waits for a sign of work (a report line, files written but not committed), and says
whether the command was still running when it died.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Killed:
    landed: bool  # the command was still running, and the sign of work was seen
    stdout: str
    stderr: str


def kill_when(
    command: list[str], env: dict[str, str], ready: Callable[[str], bool],
    timeout: float = 300.0, delay: float = 0.0,
) -> Killed:  # fmt: skip
    """Start `command` and kill -9 its process group (the CLI and its Spark JVM) `delay`
    seconds after `ready(stdout so far)` holds. Output goes to files, not pipes: a pipe
    nobody reads stalls a chatty command."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=err, start_new_session=True)
        deadline, seen = time.monotonic() + timeout, False
        while proc.poll() is None and time.monotonic() < deadline:
            out.seek(0)
            if ready(out.read()):
                seen = True
                break
            time.sleep(0.05)
        time.sleep(delay if seen else 0)
        landed = seen and proc.poll() is None
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        out.seek(0)
        err.seek(0)
        return Killed(landed, out.read(), err.read())


def writing(table: Path) -> Callable[[str], bool]:
    """Whether a Delta table has data files (in any partition's folder) it had not when
    this was called, and no commit since: a write is between its files and its commit."""
    before_files, before_log = _data_files(table), _commits(table)

    def ready(_stdout: str) -> bool:
        return bool(_data_files(table) - before_files) and _commits(table) == before_log

    return ready


def _data_files(table: Path) -> set[str]:
    return {
        str(p.relative_to(table)) for p in table.glob("**/*.parquet") if "_delta_log" not in p.parts
    }


def _commits(table: Path) -> set[str]:
    return {p.name for p in (table / "_delta_log").glob("*.json")}
