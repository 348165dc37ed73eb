"""Many small commits: a pipeline pass after N small commits to its pools, against one after 100.

A continuous pipeline commits to its raw and staging pools every pass. This benchmark
builds the invoice spec's pools (`etl_specs/invoices.yaml`) to N small commits each and
then times the passes that carry one new invoice and its status through ingest → ETL →
to-kafka (in process, one warm Spark session, as `zync run --follow` runs them), in two
configurations side by side:

- `default`: what `zync run --follow` does, maintenance every 100 commits
  (compaction + a carry commit, zync_assets/pipeline/maintenance.py);
- `unmaintained`: `--compact-every 0`, every small file and commit left in place.

The N small commits are what the pipeline leaves, one per pass and pool, each with its
writer's state in the commit (ingest progress, ETL state) and its Delta transaction id.
To make N large quickly, they carry one row each of a topic the spec does not read
(`Padding`), and only the first is written by Spark: the others are written the way a
Delta writer writes a blind append — a copy of that commit's data file and a commit file
`<version>.json` with its commitInfo (the writer's next run and state), txn and add
actions — about 5 ms each instead of 1.2 s. Their rows are skipped by the passes'
filters as an unrelated topic's rows would be. Maintenance runs after each commit as
the pipeline runs it (default: compaction every 100 commits); after the last one each
pool gets a checkpoint, as Delta's writer makes every 10 commits. Figures: the median
pass (and each stage) over --passes passes, per N and configuration, and the ratio
N / 100.

Run: `python -m bench.commits_bench --commits 10000` (about 15 minutes on 2 cores, most
of it the default configuration's 200 compactions).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
import urllib.parse
import uuid
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.common import bench_stack, machine, publish
from bench.latency_bench import SPEC, Pairs
from zync_assets.core.settings import KafkaSettings
from zync_assets.demo.invoices import reset
from zync_assets.etl.state import METADATA_KEY as ETL_KEY
from zync_assets.etl.state import app_id as etl_app
from zync_assets.kafka.registry import Registry
from zync_assets.lake.commits import latest_commit, metadata
from zync_assets.lake.delta_writes import append_once
from zync_assets.lake.pools import commit_file, pool_path, pool_version
from zync_assets.lake.progress import METADATA_KEY as INGEST_KEY
from zync_assets.lake.progress import app_id as ingest_app
from zync_assets.pipeline.maintenance import Maintenance, MaintenancePolicy
from zync_assets.pipeline.run import Pipeline
from zync_assets.specs.model import load_spec

CONFIGURATIONS = {"default": MaintenancePolicy().compact_every, "unmaintained": 0}


class Quiet:
    """A PipelineReporter that prints nothing."""

    def __getattr__(self, _name: str):
        return lambda *args, **kwargs: None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=10_000)
    parser.add_argument("--baseline", type=int, default=100)
    parser.add_argument("--passes", type=int, default=5)
    args = parser.parse_args()
    from zync_assets.spark.session import spark_session

    spark = spark_session("zync-bench-commits", long_lived=True)
    work = Path(tempfile.mkdtemp(prefix="zync-bench-commits-"))
    rows = []
    with bench_stack() as (kafka, registry):
        for name, every in CONFIGURATIONS.items():
            for commits in (args.baseline, args.commits):
                os.environ["ZYNC_LAKE"] = str(work / f"{name}-{commits}")
                reset(kafka)
                seconds = measure(spark, kafka, registry, every, commits, args.passes)
                rows.append((name, commits, seconds))
                print(name, commits, seconds, flush=True)
    report(rows, args)


def measure(
    spark: SparkSession,
    kafka: KafkaSettings,
    registry: Registry,
    compact_every: int,
    commits: int,
    passes: int,
) -> dict[str, float]:
    maintenance = Maintenance(spark, MaintenancePolicy(compact_every)) if compact_every else None
    pipeline = Pipeline(spark, [load_spec(SPEC)], kafka, registry, maintenance=maintenance)
    pairs = Pairs(kafka, registry)
    pairs.send(10)
    while pipeline.pass_once(Quiet()).did_work:  # the pools exist, Spark is warm
        pass
    grow(spark, maintenance, commits)
    pipeline.pass_once(Quiet())  # the pass that notices the padding (not timed)
    timings: list[dict[str, float]] = []
    for _ in range(passes):
        pairs.send(1)
        result = pipeline.pass_once(Quiet())
        assert result.synced and result.synced[0].sent == 1, result
        timings.append(result.seconds)
    stages = timings[0].keys()
    medians = {stage: statistics.median(t[stage] for t in timings) for stage in stages}
    medians["pass"] = statistics.median(sum(t.values()) for t in timings)
    return {k: round(v, 3) for k, v in medians.items()}


def grow(spark: SparkSession, maintenance: Maintenance | None, commits: int) -> None:
    """Raw and staging to `commits` commits each, as passes with one event each make them."""
    raw, staging = pool_path("Raw"), pool_path("Staging")
    raw_row = _padding_row(spark, raw, "dead_letter IS NULL")
    done_row = _padding_row(spark, staging, "kind = 'done'")
    _pad(raw, raw_row, 0, INGEST_KEY, None, ingest_app("Raw"))
    _pad(staging, done_row, 0, ETL_KEY, {"spec": "invoices"}, etl_app("invoices", "Staging"))
    pads = [HandPadding(raw, INGEST_KEY, None), HandPadding(staging, ETL_KEY, {"spec": "invoices"})]
    started = time.monotonic()
    for offset in range(1, commits):
        for pad in pads:
            pad.commit(offset)
            if maintenance is not None:
                maintenance.run_due(pad.path)
        if offset % 500 == 499:
            print(f"  {offset + 1} commits ({time.monotonic() - started:.0f}s)", flush=True)
    for pad in pads:  # Delta's writer checkpoints every 10 commits: the newest one is read
        jvm = spark._jvm
        assert jvm is not None  # a local session's
        jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
            spark._jsparkSession, pad.path
        ).checkpoint()


class HandPadding:
    """Blind appends of one padding row, written as Delta's writer writes them, from the
    pool's newest commit (a Spark-written padding commit): a copy of its data file, and a
    commit file with the writer's next run in its state and Delta transaction id."""

    def __init__(self, path: str, key: str, match: dict | None) -> None:
        self.path, self.key, self.match = path, key, match
        self.version = pool_version(path)
        assert self.version is not None
        lines = [
            json.loads(line)
            for line in Path(commit_file(path, self.version)).read_text().splitlines()
        ]
        self.info = next(a["commitInfo"] for a in lines if "commitInfo" in a)
        self.txn = next(a["txn"] for a in lines if "txn" in a)
        self.add = next(a["add"] for a in lines if "add" in a)
        self.state = json.loads(self.info["userMetadata"])[key]

    def commit(self, offset: int) -> None:
        self.version = pool_version(self.path)  # maintenance commits between paddings
        assert self.version is not None
        run = int(self.state["run"]) + 1
        self.state = {**self.state, "run": run, "attempt": f"padding-{offset}"}
        folder, _, name = self.add["path"].rpartition("/")
        copy = f"{folder}/{uuid.uuid4()}-{name}" if folder else f"{uuid.uuid4()}-{name}"
        source = Path(self.path) / urllib.parse.unquote(self.add["path"])
        shutil.copyfile(source, Path(self.path) / urllib.parse.unquote(copy))
        now = int(time.time() * 1000)
        actions = [
            {"commitInfo": {**self.info, "timestamp": now, "readVersion": self.version,
                            "userMetadata": json.dumps({self.key: self.state}),
                            "txnId": str(uuid.uuid4())}},
            {"txn": {**self.txn, "version": run, "lastUpdated": now}},
            {"add": {**self.add, "path": copy, "modificationTime": now}},
        ]  # fmt: skip
        self.version += 1
        target = commit_file(self.path, self.version)
        with open(target, "x") as out:  # "x": like Delta's log store, never overwrite a commit
            out.write("\n".join(json.dumps(a) for a in actions) + "\n")


def _padding_row(spark: SparkSession, path: str, where: str) -> DataFrame:
    """One of the pool's own rows, moved to topic `Padding` (kept apart from the pool)."""
    row = spark.read.format("delta").load(path).where(where).limit(1).localCheckpoint()
    return row.withColumn("kafka", F.col("kafka").withField("topic", F.lit("Padding")))


def _pad(path: str, row: DataFrame, offset: int, key: str, match: dict | None, app: str) -> None:
    """One commit as its writer makes it: one row, the writer's next run, its state."""
    state = latest_commit(path, key, match)
    assert state is not None
    run = int(state.data["run"]) + 1
    frame = row.withColumn("kafka", F.col("kafka").withField("offset", F.lit(offset).cast("long")))
    if "run" in frame.columns:
        frame = frame.withColumn("run", F.lit(run).cast(frame.schema["run"].dataType))
    fields = {**state.data, "run": run, "attempt": f"padding-{offset}"}
    partition = "kind" if key == ETL_KEY else None
    append_once(frame, path, app, run, metadata(key, **fields), partition_by=partition)


def report(rows: list[tuple[str, int, dict[str, float]]], args) -> None:
    by = {(name, n): s for name, n, s in rows}
    figures: dict[str, object] = {"machine": machine(), "date": time.strftime("%Y-%m-%d")}
    lines = [
        f"\n## Many small commits ({time.strftime('%Y-%m-%d')}, {machine()})\n",
        "One invoice and its status through ingest → ETL → to-kafka, in process, median of "
        f"{args.passes} passes, after N small commits to the raw and staging pools.\n",
        "| configuration | N | pass s | ingest s | etl s | to-kafka s | ratio N / "
        f"{args.baseline} |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in CONFIGURATIONS:
        base = by[(name, args.baseline)]["pass"]
        for n in (args.baseline, args.commits):
            s = by[(name, n)]
            ratio = round(s["pass"] / base, 2)
            lines.append(
                f"| {name} | {n:,} | {s['pass']:.2f} | {s['ingest']:.2f} | {s['etl']:.2f} | "
                f"{s['to-kafka']:.2f} | {ratio} |"
            )
            figures[f"{name}.after_{n}_commits_pass_s"] = s["pass"]
        figures[f"{name}.after_{args.commits}_commits_ratio"] = round(
            by[(name, args.commits)]["pass"] / base, 2
        )
    if args.commits == 10_000:
        figures["after_10k_commits_ratio"] = figures[f"default.after_{args.commits}_commits_ratio"]
    publish("commits", "\n".join(lines) + "\n", figures)


if __name__ == "__main__":
    main()
