"""`zync status` on a project with data: answered from the passes' records, or recounted.

The invoice demo's spec over a private stack: its four batches and one undecodable
message (a dead letter), then `zync run` once. After that, in turns, --runs times:
- *caught up*: an ETL pass has read everything ingested, so its commit's record of what
  it held back is current and status answers from commit files, without a JVM;
- *behind*: batch 4's changes ingested again but not yet transformed, so status must classify
  the pending events again with Spark, as every status call did before passes recorded
  their figures.
Beside them, `zync status` in a folder with no project (one line, exit 1) and `zync
--help`: the CLI's own start-up. The commands that move the project between the two
(`zync etl`, `zync from-kafka`) are not timed. Local Spark, default configuration, as a user runs it; wall seconds, and CPU
seconds of the whole machine (the JVM is no child Python waits for).

Run: `python -m bench.status_bench` (about 5 minutes on 2 cores).
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

from bench.common import bench_stack, machine, publish
from bench.startup_bench import _cpu_seconds, _run

ZYNC = str(Path(sys.executable).parent / "zync")
SPEC = Path(__file__).resolve().parent.parent / "etl_specs" / "invoices.yaml"


def _zync(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run([ZYNC, *args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"zync {' '.join(args)} failed: {done.stderr[-2000:]}")
    return done.stdout


def _timed(command: list[str], env: dict[str, str], cwd: str, code: int) -> tuple[float, float]:
    """Wall and machine CPU seconds of a command that must exit with `code` (no JVM)."""
    cpu, started = _cpu_seconds(), time.perf_counter()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != code:
        raise RuntimeError(f"{command} exited {done.returncode}: {done.stderr[-2000:]}")
    return wall, _cpu_seconds() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from zync_assets.demo.invoices import produce_batch, reset
    from zync_assets.kafka.produce import send

    with bench_stack() as (kafka, registry):
        lake = Path(tempfile.mkdtemp(prefix="zync-status-")) / "lake"
        env = {**os.environ, "ZYNC_LAKE": str(lake)}
        reset(kafka)
        for batch in range(1, 5):
            produce_batch(batch, kafka, registry)
        send(kafka, "Invoices", [(None, b"not avro")])  # a dead letter in raw/Raw
        _zync("run", str(SPEC), "--no-dagster", env=env)
        status = [ZYNC, "status", str(SPEC), "--format", "json"]
        runs: dict[str, list[tuple[float, float]]] = {
            "caught_up": [], "behind": [], "outside": [], "help": []
        }  # fmt: skip
        outside = {k: v for k, v in env.items() if k != "ZYNC_SPECS"}
        for _ in range(args.runs):
            runs["outside"].append(_timed([ZYNC, "status"], outside, tempfile.mkdtemp(), 1))
            runs["help"].append(_timed([ZYNC, "--help"], env, tempfile.mkdtemp(), 0))
            _zync("etl", str(SPEC), env=env)
            runs["caught_up"].append(_run(status, env))
            produce_batch(4, kafka, registry)  # its changes again: work for the next pass
            _zync("from-kafka", str(SPEC), "--once", env=env)
            runs["behind"].append(_run(status, env))
    walls = {k: statistics.median(w for w, _ in v) for k, v in runs.items()}
    cpus = {k: statistics.median(c for _, c in v) for k, v in runs.items()}
    ratio = statistics.median(
        a[0] / b[0] for a, b in zip(runs["caught_up"], runs["behind"], strict=True)
    )
    figures = {
        "status_s": round(walls["caught_up"], 2),
        "status_behind_s": round(walls["behind"], 2),
        "status_cpu_s": round(cpus["caught_up"], 1),
        "status_behind_cpu_s": round(cpus["behind"], 1),
        "status_wall_ratio": round(ratio, 3),
        "status_outside_s": round(walls["outside"], 2),
        "help_s": round(walls["help"], 2),
        "runs": args.runs,
    }
    table = (
        f"\n## `zync status` with data ({time.strftime('%Y-%m-%d')}, {machine()})\n\n"
        "The invoice demo's spec after its four batches and a dead letter; local Spark, "
        f"default configuration; medians of {args.runs} runs taken in turns. *Caught up*: "
        "the last ETL pass read everything ingested, so status reads its record; "
        "*behind*: batch 4's changes ingested again, not yet transformed, so status recounts with "
        "Spark (what every status call did before). CPU is the whole machine's.\n\n"
        "| project | wall | CPU |\n|---|---:|---:|\n"
        f"| caught up (no JVM) | {walls['caught_up']:.2f} s | {cpus['caught_up']:.1f} s |\n"
        f"| behind (Spark) | {walls['behind']:.2f} s | {cpus['behind']:.1f} s |\n"
        f"| no project here (one line) | {walls['outside']:.2f} s | {cpus['outside']:.1f} s |\n"
        f"| `zync --help` | {walls['help']:.2f} s | {cpus['help']:.1f} s |\n\n"
        f"Ratio of the two, pair by pair: {ratio:.3f}.\n"
    )
    publish("status", table, figures)


if __name__ == "__main__":
    main()
