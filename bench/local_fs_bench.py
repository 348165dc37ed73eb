"""A local lake's commits on zync's local file system against Hadoop's own.

Without Hadoop's native library, Hadoop's local file system runs `chmod` for each file
and folder it creates and `readlink` twice for each rename through a FileContext (each
Delta commit); zync's (jvm/src/zync/spark/ShelllessRawLocalFileSystem.java) does the same
in Java. Each round runs one child process per file system (ZYNC_SPARK_LOCAL_FS=hadoop
or the default), their order alternating from round to round; each child times, in one
long-lived session:

- the lake-table stage of a pass over --tables tables (bench/table_pass_bench.py's lake:
  a pattern of SCD1 tables over one raw pool), every table touched by --rows updates,
  the median of --passes passes after the first (which creates the tables);
- --commits small appends to one Delta table, as ingest commits a batch (median).

  tables_pass_s.hadoop / .zync   median seconds of the tables stage, each file system
  tables_pass_ratio              zync / hadoop, round by round (median)
  commit_s.hadoop / .zync        median seconds of one small append
  commit_ratio                   zync / hadoop, round by round (median)

Run: `python -m bench.local_fs_bench` (about 10 minutes on 2 cores). Appends its table to
docs/BENCHMARKS.md and writes bench/results/local_fs.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import machine, publish

SYSTEMS = ("hadoop", "zync")


def child(tables: int, rows: int, passes: int, commits: int) -> dict[str, float]:
    """One file system's figures, in this process (ZYNC_SPARK_LOCAL_FS picks it)."""
    from bench import table_pass_bench as lakes
    from zync_assets.spark.session import spark_session

    spark = spark_session("zync-bench", long_lived=True)
    folder = Path(tempfile.mkdtemp(prefix="zync-local-fs-"))
    lake = lakes.make_lake(spark, folder, "lake", lakes.TABLE_WORKERS)
    every = [lakes.topic(i) for i in range(tables)]
    took = []
    for round_ in range(1, passes + 2):
        lakes.commit(spark, lake, every, rows, round_)
        seconds, result = lakes.timed_stage(lake)
        assert sum(r.upserts for r in result.tabled) == tables * rows, result.failures
        if round_ > 1:
            took.append(seconds)
    appended = []
    target = str(folder / "appends")
    for _ in range(commits + 1):
        started = time.monotonic()
        spark.range(100).write.format("delta").mode("append").save(target)
        appended.append(time.monotonic() - started)
    return {"tables_pass_s": statistics.median(took), "commit_s": statistics.median(appended[1:])}


def run_child(system: str, args: argparse.Namespace) -> dict[str, float]:
    env = {**os.environ, "ZYNC_SPARK_LOCAL_FS": system}
    command = [sys.executable, "-m", "bench.local_fs_bench", "--child",
               "--tables", str(args.tables), "--rows", str(args.rows),
               "--passes", str(args.passes), "--commits", str(args.commits)]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=12)
    parser.add_argument("--rows", type=int, default=50, help="updates per table per pass")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.tables, args.rows, args.passes, args.commits)))
        return
    seen: dict[str, dict[str, list[float]]] = {
        s: {"tables_pass_s": [], "commit_s": []} for s in SYSTEMS
    }
    ratios: dict[str, list[float]] = {"tables_pass_s": [], "commit_s": []}
    for round_ in range(args.rounds):
        this = {s: run_child(s, args) for s in (SYSTEMS if round_ % 2 == 0 else SYSTEMS[::-1])}
        for system, measured in this.items():
            for name, value in measured.items():
                seen[system][name].append(value)
        for name in ratios:
            ratios[name].append(this["zync"][name] / this["hadoop"][name])
        print(f"round {round_ + 1}: {this}", flush=True)
    figures: dict[str, object] = {
        "tables": args.tables, "rows_per_table": args.rows, "passes": args.passes,
        "commits": args.commits, "rounds": args.rounds,
    }  # fmt: skip
    for name in ratios:
        for system in SYSTEMS:
            figures[f"{name}.{system}"] = round(statistics.median(seen[system][name]), 3)
        figures[f"{name.removesuffix('_s')}_ratio"] = round(statistics.median(ratios[name]), 3)
    table = (
        f"\n### A local lake's commits: zync's local file system against Hadoop's "
        f"({dt.date.today().isoformat()}, {machine()})\n\n"
        f"`python -m bench.local_fs_bench`: {args.rounds} rounds of one process per file "
        f"system; {args.tables} tables touched by {args.rows} updates each, median of "
        f"{args.passes} passes; {args.commits} small appends.\n\n"
        "| | Hadoop's | zync's (default) | ratio |\n|---|---:|---:|---:|\n"
        f"| tables stage of a pass, s | {figures['tables_pass_s.hadoop']} | "
        f"{figures['tables_pass_s.zync']} | {figures['tables_pass_ratio']} |\n"
        f"| one small append, s | {figures['commit_s.hadoop']} | {figures['commit_s.zync']} | "
        f"{figures['commit_ratio']} |\n"
    )
    publish("local_fs", table, figures)


if __name__ == "__main__":
    main()
