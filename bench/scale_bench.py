"""Scaling: `python -m bench.scale_bench [--events N]`.

Side by side in one run, against one broker: the same events in topics of 1, 2 and 4
partitions, ingested and then transformed (a stateless rule over every event) by

  local[2]     Spark in the driver's JVM, two task threads (the default a user gets)
  1 worker     a standalone cluster's master + workers, the application capped at one core
  2 workers    the same cluster, two one-core executors on two workers

Each configuration runs in its own process (a session's master is fixed for its life):
a warm-up ingest and ETL of every topic, then the measured ingest and ETL of each topic,
each into fresh pools.
Where the time goes comes from Spark's own metrics (its REST API): the time inside Spark
jobs, the executors' run time and CPU time summed over tasks, shuffle bytes; what is left
of the wall time is the driver's (planning, Delta's log and commit, Kafka offsets).

Results: docs/BENCHMARKS.md and bench/results/scale.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.common import bench_stack, fill_topic, free_port, publish

PARTITIONS = (1, 2, 4)
CONFIGS = {  # name -> (master kind, cores the application may take)
    "local[2]": ("local", 2),
    "1 worker": ("cluster", 1),
    "2 workers": ("cluster", 2),
}
SPEC = """
inputs:
  - {topic: %(topic)s, pool: %(raw)s}
outputs:
  - {topic: %(topic)s_out, pool: %(staging)s}
transforms:
  - {type: stateless, in: %(topic)s, out: %(topic)s_out, where: "op = 'u'",
     sql: "in.key AS key, in.after AS value"}
"""


# --- One configuration, in its own process -------------------------------------------------


def _get(ui: str, path: str) -> list[dict]:
    with urllib.request.urlopen(f"{ui}/api/v1/applications{path}", timeout=10) as answer:
        return json.load(answer)


class SparkMetrics:
    """The jobs and stages a pass ran, from the driver's REST API."""

    def __init__(self, ui: str) -> None:
        self.ui = ui
        self.app = _get(ui, "")[0]["id"]
        self.seen_jobs = {job["jobId"] for job in self._jobs()}

    def _jobs(self) -> list[dict]:
        return _get(self.ui, f"/{self.app}/jobs")

    def since_last(self) -> dict[str, float]:
        jobs = [job for job in self._jobs() if job["jobId"] not in self.seen_jobs]
        self.seen_jobs |= {job["jobId"] for job in jobs}
        stage_ids = {stage for job in jobs for stage in job.get("stageIds", [])}
        stages = [s for s in _get(self.ui, f"/{self.app}/stages") if s["stageId"] in stage_ids]
        spans = sorted((_ms(j["submissionTime"]), _ms(j["completionTime"])) for j in jobs
                       if j.get("completionTime"))  # fmt: skip
        return {
            "jobs": len(jobs),
            "tasks": sum(s.get("numCompleteTasks", 0) for s in stages),
            "in_jobs_s": _union(spans) / 1000,
            "executor_run_s": sum(s.get("executorRunTime", 0) for s in stages) / 1000,
            "executor_cpu_s": sum(s.get("executorCpuTime", 0) for s in stages) / 1e9,
            "shuffle_mib": sum(s.get("shuffleWriteBytes", 0) for s in stages) / 2**20,
        }


def _ms(stamp: str) -> float:
    import datetime as dt

    return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%f%Z").timestamp() * 1000


def _union(spans: list[tuple[float, float]]) -> float:
    """Milliseconds covered by the spans (jobs may overlap)."""
    total, end = 0.0, float("-inf")
    for start, stop in spans:
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine since boot (/proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_since(start: tuple[int, int]) -> float:
    """The machine's CPU busy fraction (all cores, every process) since `start`."""
    busy, total = cpu_ticks()
    return (busy - start[0]) / max(total - start[1], 1)


def run_configuration(topics: list[str], counts: list[int]) -> list[dict]:
    from zync_assets.core.settings import kafka_settings, registry_settings
    from zync_assets.etl.run import run_etl
    from zync_assets.ingest.ingest import ingest
    from zync_assets.kafka.registry import Registry
    from zync_assets.spark.session import spark_session
    from zync_assets.specs.model import load_spec

    kafka, registry = kafka_settings(), Registry(registry_settings())
    spark = spark_session("scale-bench", long_lived=True)
    metrics = SparkMetrics(spark.sparkContext.uiWebUrl or "")
    folder = Path(os.environ["ZYNC_LAKE"])
    for topic in topics:  # warm-up: JIT and caches for both stages, every topic's shape
        ingest(spark, f"Warm_{topic}", [topic], kafka, registry, max_records=50_000)
        warm = folder / f"warm_{topic}.yaml"
        warm.write_text(SPEC % {"topic": topic, "raw": f"Warm_{topic}", "staging": "WarmStaging"})
        run_etl(spark, load_spec(warm))
    metrics.since_last()
    rows = []
    for topic, count in zip(topics, counts, strict=True):
        raw, staging = f"Raw_{topic}", f"Staging_{topic}"  # fresh pools: nothing behind them
        started, ticks = time.perf_counter(), cpu_ticks()
        result = ingest(spark, raw, [topic], kafka, registry)
        ingest_s = time.perf_counter() - started
        assert result.rows == count, (result.rows, count)
        ingested = metrics.since_last() | {"machine_busy": busy_since(ticks)}
        spec = folder / f"{topic}.yaml"
        spec.write_text(SPEC % {"topic": topic, "raw": raw, "staging": staging})
        started, ticks = time.perf_counter(), cpu_ticks()
        (etl,) = run_etl(spark, load_spec(spec))
        etl_s = time.perf_counter() - started
        assert sum(etl.outputs.values()) == count, etl
        transformed = metrics.since_last() | {"machine_busy": busy_since(ticks)}
        rows.append({"topic": topic, "events": count, "ingest_s": ingest_s,
                     "ingest": ingested, "etl_s": etl_s, "etl": transformed})  # fmt: skip
    spark.stop()
    return rows


# --- The comparison ---------------------------------------------------------------------------


def _conf_file(folder: Path, kind: str, cores: int) -> Path:
    """resources/spark.conf with Spark's UI on (its REST API is where the metrics are) and,
    on the cluster, the application's core cap."""
    from zync_assets.spark.session import read_spark_conf, spark_conf_file

    conf = read_spark_conf(spark_conf_file())  # type: ignore[arg-type]
    conf |= {"spark.ui.enabled": "true", "spark.ui.port": str(free_port())}
    if kind == "cluster":
        conf |= {"spark.cores.max": str(cores), "spark.executor.cores": "1",
                 "spark.executor.memory": "2g"}  # fmt: skip
    path = folder / f"spark-{kind}-{cores}.conf"
    path.write_text("".join(f"{key} {value}\n" for key, value in conf.items()))
    return path


def measure(name: str, master: str, conf: Path, lake: Path, topics: list[str],
            counts: list[int]) -> list[dict]:  # fmt: skip
    env = {**os.environ, "ZYNC_SPARK_MASTER": master, "ZYNC_SPARK_CONF": str(conf),
           "ZYNC_LAKE": str(lake), "ZYNC_SPARK_FAST_START": "0"}  # fmt: skip
    command = [sys.executable, "-m", "bench.scale_bench", "--worker", ",".join(topics),
               ",".join(map(str, counts))]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"{name}: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=400_000)
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        topics, counts = args.worker[0].split(","), [int(c) for c in args.worker[1].split(",")]
        print(json.dumps(run_configuration(topics, counts)))
        return
    from zync_assets.stack.spark_cluster import (
        ClusterPorts,
        launch_cluster,
        master_url,
        require_workers,
        stop_cluster,
    )

    work = Path(tempfile.mkdtemp(prefix="zync-scale-"))
    state = work / ".zync"
    cluster = ClusterPorts(free_port(), free_port(), (free_port(), free_port()))
    results: dict[str, list[dict]] = {}
    with bench_stack() as (kafka, registry):
        from zync_assets.kafka.clients import ensure_topic

        topics = []
        for partitions in PARTITIONS:
            topic = f"scale_{partitions}p_{args.events}"
            ensure_topic(kafka, topic, partitions)
            fill_topic(kafka, registry, topic, args.events)
            topics.append(topic)
        counts = [args.events] * len(topics)
        launch_cluster(state, cluster)()
        try:
            for name, (kind, cores) in CONFIGS.items():
                if kind == "cluster":
                    require_workers(cluster.master_ui, 2)
                master = "local[2]" if kind == "local" else master_url(cluster.master)
                conf = _conf_file(work, kind, cores)
                results[name] = measure(name, master, conf, work / name.replace(" ", "-"),
                                        topics, counts)  # fmt: skip
        finally:
            stop_cluster(state)
    report(results, args.events)


def report(results: dict[str, list[dict]], events: int) -> None:
    from bench.common import machine

    def rate(name: str, index: int, stage: str) -> float:
        return events / results[name][index][f"{stage}_s"]

    four = PARTITIONS.index(4)
    figures: dict[str, object] = {"events_per_topic": events, "configurations": results}
    for stage in ("ingest", "etl"):
        two = rate("2 workers", four, stage)
        per_config = {
            name: {f"{p}p": rate(name, i, stage) for i, p in enumerate(PARTITIONS)}
            for name in results
        }
        figures[stage] = {
            "workers2_over_workers1": two / rate("1 worker", four, stage),
            "workers2_over_local2": two / rate("local[2]", four, stage),
            "events_per_s": per_config,
        }
    lines = [
        f"\n### Scaling: local[2] and a standalone cluster of 1 and 2 workers — "
        f"{time.strftime('%Y-%m-%d')}, {machine()}\n",
        f"{events:,} Debezium-style update events per topic (Avro, ~700 B each), in topics of "
        "1, 2 and 4 partitions; ingest into a fresh raw pool, then one ETL pass of a stateless "
        "rule over every event into a fresh staging pool. Warm sessions (a warm-up ingest and "
        "ETL of 50,000 events of each topic first, full JIT). In-jobs: wall time inside Spark jobs; executors: run time summed over "
        "tasks (CPU time in brackets); the rest of the wall time is the driver's (planning, "
        "Delta log and commit, Kafka offsets). Machine CPU busy: both cores, every process "
        "(broker, driver, executors), during the stage.\n",
        "| configuration | partitions | ingest events/s | ingest s (in jobs / executors [cpu] "
        "/ driver) | ingest: machine CPU busy | ETL events/s | ETL s (in jobs / executors "
        "[cpu] / driver) | ETL: machine CPU busy | shuffle MiB |",
        "|---|---:|---:|---|---:|---:|---|---:|---:|",
    ]
    for name, rows in results.items():
        for partitions, row in zip(PARTITIONS, rows, strict=True):
            lines.append(
                f"| {name} | {partitions} | {events / row['ingest_s']:,.0f} | "
                f"{_split(row['ingest_s'], row['ingest'])} | "
                f"{row['ingest']['machine_busy']:.0%} | {events / row['etl_s']:,.0f} | "
                f"{_split(row['etl_s'], row['etl'])} | {row['etl']['machine_busy']:.0%} | "
                f"{row['etl']['shuffle_mib']:.0f} |"
            )
    ingest, etl = figures["ingest"], figures["etl"]
    lines += [
        "",
        f"4 partitions, 2 workers over 1 worker: ingest "
        f"**{ingest['workers2_over_workers1']:.2f}×**, ETL "  # type: ignore[index]
        f"**{etl['workers2_over_workers1']:.2f}×** (2 workers over local[2]: ingest "  # type: ignore[index]
        f"{ingest['workers2_over_local2']:.2f}×, ETL {etl['workers2_over_local2']:.2f}×).\n",  # type: ignore[index]
    ]
    publish("scale", "\n".join(lines), figures)


def _split(wall: float, spark: dict[str, float]) -> str:
    return (f"{wall:.1f} ({spark['in_jobs_s']:.1f} / {spark['executor_run_s']:.1f} "
            f"[{spark['executor_cpu_s']:.1f}] / {max(wall - spark['in_jobs_s'], 0):.1f})")  # fmt: skip


if __name__ == "__main__":
    main()
