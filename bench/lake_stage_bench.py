"""The lake-table stage over a whole database: one pass at 1, 60 and 240 touched tables,
the shared write job (tables/rewrite.py, the default) against per-table MERGEs, side by
side in one Spark session: `python -m bench.lake_stage_bench [--counts 1,60,240]`.

For each table count N, a raw pool gets N topics (a Debezium-shaped source table each,
ten columns of common types), and for each way, alternating, in a lake of its own:
  snapshot  each table's first pass over its `r` events (--rows per table; 240 tables get
            a quarter of them, as a database with more tables has smaller ones);
  pass      a pass over a few changes in every table (--changes keys: updates, one
            delete, one insert): the stage of a pipeline keeping up with a database.
Figures (real_database.json, beside the chain's; `tables.` the default path,
`tables_merge.` the MERGE one): `lake_stage_s.N` (the pass), `jobs_per_pass.N` (Spark jobs
it launched), `snapshot_s.N` and `snapshot_rows_per_s.N`; and `etl.mirror_pass_s.N`,
`etl.mirror_jobs.N`, `etl.mirror_plan_s.N`: the ETL of a mirror rule over the N topics, a
pass of the same changes (`--ways mirror` alone measures only that); `rss_max_mib.N`: the
peak resident memory of the bench's process and its Spark JVM over N's measurements.
Appends its table to docs/BENCHMARKS.md. About 25 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from bench.common import machine, measured_code, publish
from zync_assets_tests.support.pool_data import DEAD, KAFKA, commit_raw
from zync_assets_tests.support.process_tree import tree_rss_mib

SPEC = """inputs:
  - {topics: 'db\\.public\\..*', pool: Raw, format: json}
tables:
  - {topics: 'db\\.public\\..*', name: '{table}'}
"""
WAYS: dict[str, int | None] = {"tables": None, "tables_merge": 0}  # rewrite_below (None: default)


def events(
    spark: SparkSession, tables: int, first: int, keys: DataFrame, op: str, tag: str
) -> DataFrame:
    """For each of `tables` topics, an event per row of `keys` (column k), offsets from
    `first`; a row image of ten columns of common types."""
    after = (
        f"named_struct('id', k, 'name', concat('{tag}-', k), 'qty', cast(k % 97 AS int), "
        "'price', cast(k * 1.25 AS decimal(12,2)), 'ok', k % 2 = 0, 'at', "
        "timestamp_millis(1700000000000 + k), 'day', date_add(DATE'2024-01-01', cast(k % 365 AS int)), "
        "'note', repeat('x', cast(k % 40 AS int)), 'score', k / 7.0, 'code', uuid())"
    )
    image = "null" if op == "d" else after
    before = "named_struct('id', k)" if op == "d" else "null"
    value = f"to_json(named_struct('op', '{op}', 'before', {before}, 'after', {image}, 'source', named_struct('lsn', k + {first})))"
    topics = spark.range(tables).select(F.col("id").cast("int").alias("t"))
    by_topic = Window.partitionBy("t").orderBy("k")
    rows = keys.crossJoin(topics).withColumn("n", F.row_number().over(by_topic) - 1)
    return rows.select(
        F.struct(
            F.concat(F.lit("db.public.t"), F.col("t")).alias("topic"), F.lit(0).alias("partition"),
            (F.col("n") + first).alias("offset"), F.current_timestamp().alias("timestamp"),
        ).cast(KAFKA).alias("kafka"),
        F.parse_json(F.format_string('{"id": %d}', "k")).alias("key"),
        F.parse_json(F.expr(value)).alias("value"),
        F.lit(None).cast(DEAD).alias("dead_letter"),
    )  # fmt: skip


def ends(tables: int, end: int) -> dict[str, int]:
    return {f"db.public.t{i}": end for i in range(tables)}


def changes_round(
    spark: SparkSession, tables: int, rows: int, changes: int, at: int, run: int
) -> tuple[DataFrame, int]:
    """A pass's events from offset `at` in every table: `changes` updates spread over the
    keys, one delete and one insert; and how many there are per table."""
    step = max(rows // changes, 1)
    keys = spark.range(changes).select((F.col("id") * step + run).alias("k"))
    update = events(spark, tables, at, keys, "u", f"u{run}")
    gone = spark.range(1).select(F.lit(run * step - 1).cast("long").alias("k"))
    delete = events(spark, tables, at + changes, gone, "d", "d")
    new = spark.range(1).select(F.lit(rows + run).cast("long").alias("k"))
    insert = events(spark, tables, at + changes + 1, new, "c", "c")
    return update.unionByName(delete).unionByName(insert), changes + 2


def jobs_of(spark: SparkSession, work: Callable[[], object]) -> tuple[int, float]:
    """Spark jobs `work()` launched, and its seconds."""
    jobs, took, _ = timed_jobs(spark, work)
    return jobs, took


def timed_jobs(spark: SparkSession, work: Callable[[], object]) -> tuple[int, float, float]:
    """Spark jobs `work()` launched, its seconds, and the seconds none of its jobs ran (the
    driver's: planning, py4j, commits)."""
    group = f"bench-{uuid.uuid4().hex[:8]}"
    spark.sparkContext.setJobGroup(group, "measured")
    started = time.perf_counter()
    try:
        work()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    took = time.perf_counter() - started
    ids = spark.sparkContext.statusTracker().getJobIdsForGroup(group)
    store = spark.sparkContext._jsc.sc().statusStore()
    spans = []
    for job in ids:
        data = store.job(job)
        if data.submissionTime().isDefined() and data.completionTime().isDefined():
            spans.append(
                (data.submissionTime().get().getTime(), data.completionTime().get().getTime())
            )
    running, end = 0.0, 0
    for begin, finish in sorted(spans):  # the union of the jobs' spans
        running += max(finish - max(begin, end), 0) / 1000
        end = max(end, finish)
    return len(ids), took, max(took - running, 0.0)


MIRROR_SPEC = """inputs:
  - {topics: 'db\\.public\\..*', pool: Raw, format: json}
transforms:
  - {type: mirror, topics: 'db\\.public\\..*', out: 'warehouse_{table}', pool: Mirror}
"""


def _extend(into: list, call: Callable[..., list], *args: object) -> None:
    into.extend(call(*args))


def measure_mirror(
    spark: SparkSession, tables: int, rows: int, changes: int, root: Path, rounds: int = 5
) -> dict[str, object]:
    """The ETL of a mirror over `tables` topics: a snapshot pass, then passes of a few
    changes in every topic (as `measure`'s); the median pass's jobs, seconds and driver
    seconds outside Spark jobs (its planning)."""
    from zync_assets.etl.run import run_etl
    from zync_assets.specs.model import load_spec

    root.mkdir(parents=True, exist_ok=True)
    spec_path = root / "mirror.yaml"
    spec_path.write_text(MIRROR_SPEC)
    spec = load_spec(spec_path)
    os.environ["ZYNC_LAKE"] = str(root / f"mirror-{tables}")
    keys = spark.range(rows).select(F.col("id").alias("k"))
    commit_raw(spark, "Raw", 1, events(spark, tables, 0, keys, "r", "s"), ends(tables, rows))
    run_etl(spark, spec)
    at, passes = rows, []
    for run in range(2, 2 + rounds):
        changed, count = changes_round(spark, tables, rows, changes, at, run)
        at += count
        commit_raw(spark, "Raw", run, changed, ends(tables, at))
        results: list = []
        jobs, took, planning = timed_jobs(spark, partial(_extend, results, run_etl, spark, spec))
        assert sum(results[0].outputs.values()) == tables * count, results
        passes.append((took, jobs, planning))
    took, jobs, planning = sorted(passes)[len(passes) // 2]
    print(
        f"mirror {tables} topics: pass {took:.2f} s, {jobs} jobs, {planning:.2f} s planning",
        flush=True,
    )
    return {
        f"etl.mirror_pass_s.{tables}": round(took, 2),
        f"etl.mirror_jobs.{tables}": jobs,
        f"etl.mirror_plan_s.{tables}": round(planning, 2),
    }


def measure(
    spark: SparkSession, tables: int, rows: int, changes: int, root: Path, ways: list[str]
) -> dict[str, object]:
    from zync_assets.specs.model import load_spec
    from zync_assets.tables.together import run_tables

    root.mkdir(parents=True, exist_ok=True)
    spec_path = root / "whole.yaml"
    spec_path.write_text(SPEC)
    spec = load_spec(spec_path)
    figures: dict[str, object] = {}
    for way in ways:
        below = WAYS[way]
        os.environ["ZYNC_LAKE"] = str(root / f"{way}-{tables}")
        apply = partial(run_tables, spark, spec, rewrite_below=below)
        keys = spark.range(rows).select(F.col("id").alias("k"))
        commit_raw(spark, "Raw", 1, events(spark, tables, 0, keys, "r", "s"), ends(tables, rows))
        jobs, took = jobs_of(spark, apply)
        figures[f"{way}.snapshot_s.{tables}"] = round(took, 2)
        figures[f"{way}.snapshot_rows_per_s.{tables}"] = round(tables * rows / took)
        # Round 2 makes each table's change log (its first delete); round 3 is measured.
        at = rows
        for run in (2, 3):
            changed, count = changes_round(spark, tables, rows, changes, at, run)
            at += count
            commit_raw(spark, "Raw", run, changed, ends(tables, at))
            jobs, took = jobs_of(spark, apply)
        figures[f"{way}.lake_stage_s.{tables}"] = round(took, 2)
        figures[f"{way}.jobs_per_pass.{tables}"] = jobs
        print(f"{way} {tables} tables: pass {took:.2f} s, {jobs} jobs", flush=True)
    return figures


class PeakMemory:
    """The peak resident memory (MiB) of this process and its Spark JVM, sampled every
    half second in a thread, since `reset()`."""

    def __init__(self) -> None:
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.5):
            self.peak = max(self.peak, tree_rss_mib(os.getpid()))

    def reset(self) -> float:
        """The peak so far, and start again."""
        peak, self.peak = self.peak, tree_rss_mib(os.getpid())
        return round(peak)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--counts", default="1,60,240")
    parser.add_argument("--rows", type=int, default=2_000, help="per table (240 tables: 1/4)")
    parser.add_argument("--changes", type=int, default=5, help="updated keys per table per pass")
    parser.add_argument(
        "--ways", default=",".join([*WAYS, "mirror"]),
        help="tables (the default path), tables_merge, mirror (the ETL of a mirror rule)",
    )  # fmt: skip
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="zync-bench-lake-stage-"))
    os.environ.setdefault("ZYNC_LAKE", str(root / "lake"))
    from zync_assets.spark.session import spark_session

    spark = spark_session("zync-bench", long_lived=True)  # `zync run --follow`'s session
    figures: dict[str, object] = {}
    counts = [int(c) for c in args.counts.split(",")]
    ways = args.ways.split(",")
    memory = PeakMemory()
    if "mirror" in ways:  # the session's first ETL passes run colder code: not a count's
        measure_mirror(spark, counts[0], args.rows, args.changes, root / "warm-up")
    for tables in counts:
        memory.reset()
        rows = args.rows // 4 if tables >= 240 else args.rows
        if ways != ["mirror"]:
            lake_ways = [w for w in ways if w != "mirror"]
            figures |= measure(spark, tables, rows, args.changes, root / f"n{tables}", lake_ways)
        if "mirror" in ways:
            figures |= measure_mirror(spark, tables, rows, args.changes, root / f"m{tables}")
        peak = memory.reset()
        if ways != ["mirror"]:  # the peak of the lake stage's measurements (and the mirror's)
            figures[f"rss_max_mib.{tables}"] = peak
            print(f"{tables} tables: peak RSS {peak} MiB", flush=True)
    lines = [
        f"\n## lake-table stage, shared write job vs per-table MERGE ({machine()}, "
        f"{str(measured_code().get('commit'))[:7]})\n\n",
        "| touched tables | pass s (shared job) | pass s (MERGE) | jobs (shared) | jobs (MERGE) "
        "| snapshot rows/s (shared) | snapshot rows/s (MERGE) |\n|---:|---:|---:|---:|---:|---:|---:|\n",
    ]
    for n in counts:
        cell = {k: figures.get(f"{k}.{n}", "–") for k in (
            "tables.lake_stage_s", "tables_merge.lake_stage_s", "tables.jobs_per_pass",
            "tables_merge.jobs_per_pass", "tables.snapshot_rows_per_s",
            "tables_merge.snapshot_rows_per_s")}  # fmt: skip
        lines.append("| " + " | ".join([str(n), *map(str, cell.values())]) + " |\n")
    if "mirror" in ways:
        lines.append(
            "\nThe ETL of a mirror rule over the same topics, a pass of the same changes "
            "(median of 5): seconds, Spark jobs, and the driver's seconds outside them.\n\n"
            "| topics | pass s | jobs | planning s |\n|---:|---:|---:|---:|\n"
        )
        for n in counts:
            cell = {
                k: figures.get(f"etl.{k}.{n}", "–")
                for k in ("mirror_pass_s", "mirror_jobs", "mirror_plan_s")
            }
            lines.append("| " + " | ".join([str(n), *map(str, cell.values())]) + " |\n")
    if ways != ["mirror"]:
        peaks = ", ".join(f"{n} tables {figures.get(f'rss_max_mib.{n}', '–')} MiB" for n in counts)
        lines.append(f"\nPeak resident memory of the process and its Spark JVM: {peaks}.\n")
    publish("real_database", "".join(lines), figures)


if __name__ == "__main__":
    main()
