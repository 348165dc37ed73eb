"""Start-up: a one-pass `zync` command with and without the driver's class-data archive.

Each command runs as a user runs it (local Spark, default configuration) over a small
lake; A (with the archive install built) and B (ZYNC_SPARK_CLASS_ARCHIVE=0) take turns,
--runs times each, so the ratio is taken pair by pair on a drifting machine. Measured:
wall seconds, and CPU seconds of the whole machine over the run (the driver JVM is not
a child Python waits for, so its own accounting would miss it); the machine should be
otherwise idle.

Run: `python -m bench.startup_bench` (about 6 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import machine, publish

ZYNC = str(Path(sys.executable).parent / "zync")


def _cpu_seconds() -> float:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    busy = sum(int(v) for i, v in enumerate(fields) if i not in (3, 4))  # less idle, iowait
    return busy / os.sysconf("SC_CLK_TCK")


def _run(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    cpu, started = _cpu_seconds(), time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{command} failed: {done.stderr[-2000:]}")
    time.sleep(2)  # the JVM outlives Python by a moment: its last CPU counts too
    return wall, _cpu_seconds() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    lake = Path(tempfile.mkdtemp(prefix="zync-startup-")) / "lake"
    base = {**os.environ, "ZYNC_LAKE": str(lake)}
    subprocess.run([ZYNC, "query", "SELECT 1"], env=base, capture_output=True, check=True)
    commands = {
        "zync query 'SELECT 1'": [ZYNC, "query", "SELECT 1 AS x"],
        "zync pool ls": [ZYNC, "pool", "ls"],
    }
    rows: list[str] = []
    figures: dict[str, object] = {}
    for name, command in commands.items():
        runs: dict[str, list[tuple[float, float]]] = {"with": [], "without": []}
        for _ in range(args.runs):
            runs["with"].append(_run(command, base))
            runs["without"].append(_run(command, {**base, "ZYNC_SPARK_CLASS_ARCHIVE": "0"}))
        walls = {k: statistics.median(w for w, _ in v) for k, v in runs.items()}
        cpus = {k: statistics.median(c for _, c in v) for k, v in runs.items()}
        ratio = statistics.median(
            a[0] / b[0] for a, b in zip(runs["with"], runs["without"], strict=True)
        )
        key = name.split("'")[0].strip().replace("zync ", "").replace(" ", "_")
        figures |= {f"{key}_wall_s_with": round(walls["with"], 2),
                    f"{key}_wall_s_without": round(walls["without"], 2),
                    f"{key}_cpu_s_with": round(cpus["with"], 1),
                    f"{key}_cpu_s_without": round(cpus["without"], 1),
                    f"{key}_wall_ratio": round(ratio, 2)}  # fmt: skip
        rows.append(f"| `{name}` | {walls['without']:.1f} s | {walls['with']:.1f} s | "
                    f"{ratio:.2f} | {cpus['without']:.1f} s | {cpus['with']:.1f} s |")  # fmt: skip
    figures["runs"] = args.runs
    table = (
        f"\n## Start-up with the driver's class-data archive ({time.strftime('%Y-%m-%d')}, "
        f"{machine()})\n\n"
        "A one-pass command, local Spark, default configuration; medians of "
        f"{args.runs} runs taken in turns (with, without). CPU is the whole machine's over "
        "the run, the driver JVM included.\n\n"
        "| command | wall, without | wall, with | ratio (with/without) | CPU, without | "
        "CPU, with |\n|---|---:|---:|---:|---:|---:|\n" + "\n".join(rows) + "\n"
    )
    publish("startup", table, figures)


if __name__ == "__main__":
    main()
