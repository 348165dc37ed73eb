"""What a small ETL pass costs, and where: `python -m bench.small_pass_bench [--passes N]`.

In one process and one warm SparkSession (C2, as `zync run --follow` and the test workers
run), over raw rows committed the way ingest commits them, with 10,000 accounts of one
customer already done, N passes each (the medians are reported):
  stateless  one account change through a stateless rule: the floor under any pass
  view       one account change through the accounts-with-customers view
  fan-out    one change of the customer, which re-sends all 10,000 accounts
For each: seconds, Spark jobs (a job group per pass), and the JVM's CPU seconds, with
the share its JIT compiler threads took. Beside them, in the same run, the floor of any
Spark action here (`spark.range(10).count()`), so a noisy machine shows in both.
Default configuration: `run_etl` as every front end calls it. Appends to
docs/BENCHMARKS.md, writes bench/results/small_pass.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from bench import views_bench as vb
from bench.common import machine, publish

DEPENDENTS = 10_000
_TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Cost:
    seconds: float
    jobs: int
    jvm_cpu_s: float
    jit_cpu_s: float


def _jvm_pid() -> str:
    found = subprocess.run(["pgrep", "-P", str(os.getpid()), "java"], capture_output=True,
                           text=True, check=True)  # fmt: skip
    return found.stdout.split()[0]


def _thread_cpu(pid: str) -> dict[str, float]:
    """CPU seconds of each live thread of the JVM, by thread id and name."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue  # ended meanwhile
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        out[f"{tid} {name}"] = (int(fields[11]) + int(fields[12])) / _TICK
    return out


def _process_cpu(pid: str) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def measured(spark: SparkSession, label: str, work: Callable[[], object]) -> Cost:
    tracker, jvm = spark.sparkContext.statusTracker(), _jvm_pid()
    group = f"{label}-{time.monotonic_ns()}"
    spark.sparkContext.setJobGroup(group, label)
    threads, cpu = _thread_cpu(jvm), _process_cpu(jvm)
    started = time.perf_counter()
    work()
    seconds = time.perf_counter() - started
    after = _thread_cpu(jvm)
    jit = sum(v - threads.get(k, 0.0) for k, v in after.items() if "CompilerThre" in k)
    cost = Cost(seconds, len(tracker.getJobIdsForGroup(group)), _process_cpu(jvm) - cpu, jit)
    return cost


def passes(
    spark: SparkSession, work: Path, name: str, rules: str, change: str, n: int
) -> list[Cost]:
    """n passes over one change each, after a first pass over 10,000 accounts."""
    from bench.etl_bench import etl_pass

    pool, spec = vb.Pool(spark, f"{name}Raw"), vb.view_spec(work, name, rules)
    pool.add(vb.accounts(spark.range(DEPENDENTS), 0, 0, 1, "c", 5),
             vb.customers(spark.range(1), 0, DEPENDENTS, "c", "blue"))  # fmt: skip
    etl_pass(spark, spec)
    costs = []
    for i in range(n):
        clock = 2 * DEPENDENTS + 10 * i
        if change == "account":
            pool.add(vb.accounts(spark.range(1), DEPENDENTS + i, clock, 1, "u", 7 + i), None)
        else:
            pool.add(None, vb.customers(spark.range(1), 1 + i, clock, "u", f"gold{i}"))
        costs.append(measured(spark, name, lambda: etl_pass(spark, spec)))
    return costs


def median(costs: list[Cost], field: str) -> float:
    return statistics.median(getattr(c, field) for c in costs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--passes", type=int, default=5, help="passes per kind, after a warm-up")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="zync-small-pass-"))
    os.environ["ZYNC_LAKE"] = str(work / "lake")
    from zync_assets.spark.session import spark_session

    spark = spark_session("small-pass-bench", long_lived=True)
    passes(spark, work, "Warm", vb.STATELESS, "account", 3)  # class loading, first JIT
    kinds = {
        "stateless": passes(spark, work, "Stateless", vb.STATELESS, "account", args.passes),
        "view": passes(spark, work, "View", vb.VIEW, "account", args.passes),
        "fanout": passes(spark, work, "Fanout", vb.VIEW, "customer", args.passes),
    }
    floor = [measured(spark, "floor", lambda: spark.range(10).count()) for _ in range(20)]
    floor_s = median(floor, "seconds")
    figures: dict[str, object] = {"passes": args.passes, "dependents": DEPENDENTS,
                                  "floor_action_s": round(floor_s, 3)}  # fmt: skip
    rows = []
    for kind, costs in kinds.items():
        s, jobs = median(costs, "seconds"), median(costs, "jobs")
        cpu, jit = median(costs, "jvm_cpu_s"), median(costs, "jit_cpu_s")
        figures |= {f"{kind}.s": round(s, 3), f"{kind}.jobs": jobs, f"{kind}.jvm_cpu_s": round(cpu, 2),
                    f"{kind}.jit_share": round(jit / cpu, 2) if cpu else 0.0,
                    f"{kind}.over_floor": round(s / floor_s, 1)}  # fmt: skip
        rows.append(
            f"| {kind} | {s:.2f} | {jobs:.0f} | {cpu:.2f} | {jit / cpu:.0%} | {s / floor_s:.0f} |"
        )
    table = "\n".join([
        "", f"### A small ETL pass, {dt.date.today()} — {machine()}", "",
        f"Warm session (C2), default configuration, medians of {args.passes} passes of one "
        f"change each, over a pool holding {DEPENDENTS:,} accounts of one customer:", "",
        "| pass | seconds | Spark jobs | JVM CPU (s) | of it, JIT | over the floor |",
        "|---|---:|---:|---:|---:|---:|", *rows, "",
        f"The floor: one trivial Spark action here, {floor_s * 1000:.0f} ms (median of 20).", "",
    ])  # fmt: skip
    publish("small_pass", table, figures)


if __name__ == "__main__":
    main()
