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
- --commits small appends to one Delta table, as ingest commits a batch (median);

and the CPU seconds the process and its driver JVM spent on each (a child process's
start is mostly waiting, which a second table lane fills: the CPU is what two test
workers, or a pipeline beside other work, compete for).

  tables_pass_s.hadoop / .zync   median seconds of the tables stage, each file system
  tables_pass_ratio              zync / hadoop, round by round (median)
  commit_s.hadoop / .zync        median seconds of one small append
  commit_ratio                   zync / hadoop, round by round (median)
  tables_pass_cpu_s.*, commit_cpu_s.*, and their *_ratio: the same in CPU seconds

Run: `python -m bench.local_fs_bench` (about 10 minutes on 2 cores). Appends its table to
docs/BENCHMARKS.md and writes bench/results/local_fs.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import machine, publish

SYSTEMS = ("hadoop", "zync")


def cpu_seconds(jvm_pid: int) -> float:
    """CPU seconds so far of this process and of the driver JVM (user and system)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    fields = Path(f"/proc/{jvm_pid}/stat").read_text().rsplit(")", 1)[1].split()
    jvm = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return own.ru_utime + own.ru_stime + jvm


def child(tables: int, rows: int, passes: int, commits: int) -> dict[str, float]:
    """One file system's figures, in this process (ZYNC_SPARK_LOCAL_FS picks it)."""
    from bench import table_pass_bench as lakes
    from zync_assets.pipeline.run import TABLE_WORKERS
    from zync_assets.spark.session import spark_session

    spark = spark_session("zync-bench", long_lived=True)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    jvm_pid = jvm.java.lang.ProcessHandle.current().pid()
    folder = Path(tempfile.mkdtemp(prefix="zync-local-fs-"))
    lake = lakes.make_lake(spark, folder, "lake", TABLE_WORKERS)
    every = [lakes.topic(i) for i in range(tables)]
    took, used = [], []
    for round_ in range(1, passes + 2):
        lakes.commit(spark, lake, every, rows, round_)
        cpu = cpu_seconds(jvm_pid)
        seconds, result = lakes.timed_stage(lake)
        assert sum(r.upserts for r in result.tabled) == tables * rows, result.failures
        if round_ > 1:
            took.append(seconds)
            used.append(cpu_seconds(jvm_pid) - cpu)
    appended, appended_cpu = [], []
    target = str(folder / "appends")
    for _ in range(commits + 1):
        started, cpu = time.monotonic(), cpu_seconds(jvm_pid)
        spark.range(100).write.format("delta").mode("append").save(target)
        appended.append(time.monotonic() - started)
        appended_cpu.append(cpu_seconds(jvm_pid) - cpu)
    return {
        "tables_pass_s": statistics.median(took), "tables_pass_cpu_s": statistics.median(used),
        "commit_s": statistics.median(appended[1:]),
        "commit_cpu_s": statistics.median(appended_cpu[1:]),
    }  # fmt: skip


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
    names = ("tables_pass_s", "tables_pass_cpu_s", "commit_s", "commit_cpu_s")
    seen: dict[str, dict[str, list[float]]] = {s: {n: [] for n in names} for s in SYSTEMS}
    ratios: dict[str, list[float]] = {n: [] for n in names}
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
        f"| tables stage of a pass, CPU s | {figures['tables_pass_cpu_s.hadoop']} | "
        f"{figures['tables_pass_cpu_s.zync']} | {figures['tables_pass_cpu_ratio']} |\n"
        f"| one small append, s | {figures['commit_s.hadoop']} | {figures['commit_s.zync']} | "
        f"{figures['commit_ratio']} |\n"
        f"| one small append, CPU s | {figures['commit_cpu_s.hadoop']} | "
        f"{figures['commit_cpu_s.zync']} | {figures['commit_cpu_ratio']} |\n"
    )
    publish("local_fs", table, figures)


if __name__ == "__main__":
    main()
