"""The lake-table stage of a pass over many tables: one after another against two at a time.

A raw pool of --tables Debezium-style topics (`db.public.tNN`, an `id` key and a row of
`id, name, amount`) is the source of a pattern of lake tables (one SCD1 table per topic,
the whole-database spec's `tables:`). Two lakes, side by side in one process and one
Spark session: the pipeline's tables stage with `table_workers=1` (one table after
another, as before) and two at a time (the default until the shared write job). Each round
commits --rows new events to every topic in both lakes (round 1 creates the rows, as a
snapshot does; later rounds update them) and times each lake's stage; the order of the
two alternates from round to round, so neither always runs warm. A last round commits
events to one topic only: a pass over one touched table of many. A third lake, beside
the first round only, has its new tables' first rows MERGEd, as before tables/apply.py
appended them (`_append_first` swapped for `_merge`): what the append saves a snapshot.

  all_one_at_a_time_s     median seconds of the stage, every table touched, one at a time
  all_two_at_a_time_s     the same, two at a time (the default)
  ratio                   two at a time / one at a time, round by round (median)
  per_table_s             the default's seconds per touched table
  one_touched_s           the default's stage when one table of --tables has new events
  rows_per_s              the default's rows applied per second, every table touched
  first_pass_s            the default's stage in round 1 (every table new: a snapshot)
  first_pass_merged_s     the same with the first rows MERGEd instead of appended
  first_pass_ratio        first_pass_s / first_pass_merged_s

Run: `python -m bench.table_pass_bench` (about 15 minutes on 2 cores). Appends its table
to docs/BENCHMARKS.md and writes bench/results/table_pass.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.common import machine, publish
from zync_assets.core.config import LakeSettings, ZyncConfig, in_force
from zync_assets.core.settings import KafkaSettings, RegistrySettings
from zync_assets.kafka.registry import Registry
from zync_assets.lake.delta_writes import append_once
from zync_assets.lake.pools import pool_path
from zync_assets.lake.progress import app_id, commit_metadata
from zync_assets.pipeline.run import PassResult, Pipeline
from zync_assets.spark.session import spark_session
from zync_assets.specs.model import load_spec
from zync_assets.tables import apply
from zync_assets_tests.support.pool_data import DEAD, KAFKA

TWO_AT_A_TIME = 2  # table workers: the default while every table MERGEd

SPEC = """inputs:
  - {topics: 'db\\.public\\..*', pool: Raw, format: json}
tables:
  - {topics: 'db\\.public\\..*', name: '{table}'}
"""
VALUE = '{"op": "%s", "after": {"id": %%d, "name": "name-%%d-%d", "amount": 12.5}}'


class Silent:
    """A pipeline reporter that keeps nothing (the benchmark reads the pass's result)."""

    def __getattr__(self, name: str):  # every PipelineReporter method: do nothing
        return lambda *args, **kwargs: None


@dataclasses.dataclass
class Lake:
    name: str
    config: ZyncConfig
    pipeline: Pipeline
    ends: dict[str, int] = dataclasses.field(default_factory=dict)
    runs: int = 0


def topic(i: int) -> str:
    return f"db.public.t{i:02d}"


def events(spark: SparkSession, name: str, first: int, rows: int, round_: int) -> DataFrame:
    value = VALUE % ("c" if round_ == 1 else "u", round_)
    return spark.range(rows).select(
        F.struct(
            F.lit(name).alias("topic"), F.lit(0).alias("partition"),
            (F.col("id") + first).alias("offset"),
            F.timestamp_seconds(F.lit(1_767_225_600)).alias("timestamp"),
        ).cast(KAFKA).alias("kafka"),
        F.parse_json(F.format_string('{"id": %d}', "id")).alias("key"),
        F.parse_json(F.format_string(value, "id", "id")).alias("value"),
        F.lit(None).cast(DEAD).alias("dead_letter"),
    )  # fmt: skip


def commit(spark: SparkSession, lake: Lake, topics: list[str], rows: int, round_: int) -> None:
    """`rows` events for each of `topics` in one ingest commit of the lake's raw pool."""
    with in_force(lake.config):
        frames = [events(spark, t, lake.ends.get(t, 0), rows, round_) for t in topics]
        frame = frames[0]
        for more in frames[1:]:
            frame = frame.unionByName(more)
        for t in topics:
            lake.ends[t] = lake.ends.get(t, 0) + rows
        lake.runs += 1
        meta = commit_metadata(
            lake.runs, uuid.uuid4().hex, {t: {0: e} for t, e in lake.ends.items()}
        )
        append_once(frame, pool_path("Raw"), app_id("Raw"), lake.runs, meta)


def merged_first(compiled, columns, changes, run: int, meta: str) -> None:
    """apply._append_first's stand-in for the merged lake: the MERGE every pass ran before."""
    apply._merge(changes.sparkSession, compiled, columns, changes, run, meta, [])


def timed_stage(lake: Lake) -> tuple[float, PassResult]:
    if lake.name == "merged":
        appended, apply._append_first = apply._append_first, merged_first
        try:
            return _timed(lake)
        finally:
            apply._append_first = appended
    return _timed(lake)


def _timed(lake: Lake) -> tuple[float, PassResult]:
    with in_force(lake.config):
        started = time.monotonic()
        result = lake.pipeline.pass_once(Silent())
        return time.monotonic() - started, result


def make_lake(spark: SparkSession, folder: Path, name: str, workers: int) -> Lake:
    home = folder / name
    home.mkdir()
    (home / "spec.yaml").write_text(SPEC)
    config = dataclasses.replace(ZyncConfig.from_env(), lake=LakeSettings(str(home / "lake")))
    with in_force(config):
        spec = load_spec(home / "spec.yaml")
    # The tables stage alone: no Kafka or registry is asked (json sources, no ingest).
    pipeline = Pipeline(
        spark, [spec], KafkaSettings(), Registry(RegistrySettings()), stages=("tables",),
        table_workers=workers,
    )  # fmt: skip
    return Lake(name, config, pipeline)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=60)
    parser.add_argument("--rows", type=int, default=200, help="new events per table per round")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    spark = spark_session("zync-bench", long_lived=True)
    folder = Path(tempfile.mkdtemp(prefix="zync-table-pass-"))
    lakes = [make_lake(spark, folder, "one", 1), make_lake(spark, folder, "two", TWO_AT_A_TIME)]
    merged = make_lake(spark, folder, "merged", TWO_AT_A_TIME)
    every = [topic(i) for i in range(args.tables)]
    seconds: dict[str, list[float]] = {"one": [], "two": []}
    ratios = []
    for round_ in range(1, args.rounds + 1):
        took = {}
        for lake in [*lakes, merged] if round_ == 1 else lakes[::-1] if round_ % 2 == 0 else lakes:
            commit(spark, lake, every, args.rows, round_)
            took[lake.name], result = timed_stage(lake)
            applied = sum(r.upserts for r in result.tabled)
            assert applied == args.tables * args.rows, (lake.name, applied, result.failures)
            if lake is not merged:
                seconds[lake.name].append(took[lake.name])
        ratios.append(took["two"] / took["one"])
        if round_ == 1:
            first_merged = took["merged"]
        print(
            f"round {round_}: one at a time {took['one']:.1f} s, two {took['two']:.1f} s",
            flush=True,
        )
    default = lakes[1]
    commit(spark, default, [every[0]], args.rows, args.rounds + 1)
    one_touched, result = timed_stage(default)
    assert [r.table for r in result.tabled if r.run] == ["t00"], result.tabled

    two = statistics.median(seconds["two"])
    figures = {
        "tables": args.tables,
        "rows_per_table": args.rows,
        "rounds": args.rounds,
        "all_one_at_a_time_s": round(statistics.median(seconds["one"]), 2),
        "all_two_at_a_time_s": round(two, 2),
        "ratio": round(statistics.median(ratios), 3),
        "per_table_s": round(two / args.tables, 3),
        "one_touched_s": round(one_touched, 2),
        "rows_per_s": round(args.tables * args.rows / two),
        "first_pass_s": round(seconds["two"][0], 2),
        "first_pass_merged_s": round(first_merged, 2),
        "first_pass_ratio": round(seconds["two"][0] / first_merged, 3),
    }
    table = (
        f"\n### Lake tables of a pass: one at a time against two at a time "
        f"({dt.date.today().isoformat()}, {machine()})\n\n"
        f"`python -m bench.table_pass_bench`: {args.tables} tables, {args.rows} new events "
        f"each per round, {args.rounds} rounds, medians.\n\n"
        "| | seconds |\n|---|---:|\n"
        f"| every table touched, one at a time | {figures['all_one_at_a_time_s']} |\n"
        f"| every table touched, two at a time (default) | {figures['all_two_at_a_time_s']} |\n"
        f"| ratio, round by round | {figures['ratio']} |\n"
        f"| per touched table (default) | {figures['per_table_s']} |\n"
        f"| one table of {args.tables} touched (default) | {figures['one_touched_s']} |\n"
        f"| rows applied per second (default) | {figures['rows_per_s']} |\n"
        f"| first pass, every table new (default: rows appended) | {figures['first_pass_s']} |\n"
        f"| first pass, rows MERGEd (as before) | {figures['first_pass_merged_s']} |\n"
        f"| first pass ratio | {figures['first_pass_ratio']} |\n"
    )
    publish("table_pass", table, figures)


if __name__ == "__main__":
    main()
