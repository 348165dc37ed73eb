"""What the warehouse path of a pass costs over many touched topics, stage by stage:
`python -m bench.warehouse_path_bench [--topics 60] [--events 5] [--rounds 4]`.

The whole-database spec's warehouse path (a pattern of Debezium topics into one raw
pool, a mirror into `warehouse_{table}` topics; no lake tables, so the path is measured
alone), against a private Kafka and registry, in one long-lived Spark session as `zync
run --follow` has it. Each round produces --events Avro events (Debezium updates) to
each of --topics topics, then runs one pipeline pass; a last round touches one topic of
them. Per stage (ingest, etl, to-kafka): seconds and Spark jobs, medians of the rounds
after the first (the first registers the output schemas: the steady state is what
repeats). The per-topic slope is what the issue's "a pass costs one fixed cost plus its
rows" asks to flatten: `<stage>_s` with every topic touched against one touched.

Appends its table to docs/BENCHMARKS.md and writes bench/results/warehouse_path.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import ENVELOPE, KEY, bench_stack, event, machine, publish

STAGES = ("ingest", "etl", "to-kafka")
SPEC = """inputs:
  - {topics: 'wp\\.public\\..*', pool: Wp}
transforms:
  - {type: mirror, topics: 'wp\\.public\\..*', out: 'warehouse_wp_{table}', pool: WpMirror}
"""


class Silent:
    """A pipeline reporter that keeps nothing (the benchmark reads the pass's result)."""

    def __getattr__(self, name: str):  # every PipelineReporter method: do nothing
        return lambda *args, **kwargs: None


def produce_round(kafka, registry, topics: list[str], events: int, round_: int) -> None:
    from fastavro import parse_schema

    from zync_assets.codec.avro import encode
    from zync_assets.kafka.clients import ensure_topic, producer

    key_schema, value_schema = parse_schema(KEY), parse_schema(ENVELOPE)
    out = producer(kafka, **{"linger.ms": 5})
    for topic in topics:
        ensure_topic(kafka, topic)  # the bench's broker creates no topic on first use
        key_id = registry.register(f"{topic}-key", KEY)
        value_id = registry.register(f"{topic}-value", ENVELOPE)
        for i in range(events):
            key, value = event(round_ * 1000 + i)
            out.produce(
                topic,
                key=encode(key_id, key_schema, key),
                value=encode(value_id, value_schema, value),
            )
    out.flush(60)


def staged_pass(spark, pipeline) -> dict[str, tuple[float, int]]:
    """One pass, each stage under a job group of its own: (seconds, Spark jobs) by stage."""
    tracker = spark.sparkContext.statusTracker()
    costs = {}
    for stage in STAGES:
        group = f"{stage}-{time.monotonic_ns()}"
        spark.sparkContext.setJobGroup(group, stage)
        pipeline.stages = (stage,)
        started = time.perf_counter()
        result = pipeline.pass_once(Silent())
        assert not result.failures, result.failures
        costs[stage] = (time.perf_counter() - started, len(tracker.getJobIdsForGroup(group)))
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=60)
    parser.add_argument("--events", type=int, default=5, help="new events per topic per round")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    os.environ["ZYNC_DISCOVERY_INTERVAL"] = "1s"
    work = Path(tempfile.mkdtemp(prefix="zync-warehouse-path-"))
    (work / "spec.yaml").write_text(SPEC)
    os.environ["ZYNC_LAKE"] = str(work / "lake")
    with bench_stack() as (kafka, registry):
        from zync_assets.pipeline.run import Pipeline
        from zync_assets.spark.session import spark_session
        from zync_assets.specs.model import load_spec

        spark = spark_session("zync-bench", long_lived=True)
        spec = load_spec(work / "spec.yaml")
        pipeline = Pipeline(spark, [spec], kafka, registry)
        topics = [f"wp.public.t{i:02d}" for i in range(args.topics)]
        every: list[dict[str, tuple[float, int]]] = []
        for round_ in range(1, args.rounds + 1):
            produce_round(kafka, registry, topics, args.events, round_)
            costs = staged_pass(spark, pipeline)
            print(f"round {round_}: " + ", ".join(
                f"{s} {c[0]:.2f} s / {c[1]} jobs" for s, c in costs.items()), flush=True)  # fmt: skip
            every.append(costs)
        produce_round(kafka, registry, topics[:1], args.events, args.rounds + 1)
        one = staged_pass(spark, pipeline)
        print("one topic: " + ", ".join(f"{s} {c[0]:.2f} s / {c[1]} jobs" for s, c in one.items()))
    steady = every[1:] or every
    figures: dict[str, object] = {"topics": args.topics, "events_per_topic": args.events,
                                  "rounds": args.rounds}  # fmt: skip
    for stage in STAGES:
        figures[f"{stage}_s"] = round(statistics.median(c[stage][0] for c in steady), 2)
        figures[f"{stage}_jobs"] = statistics.median(c[stage][1] for c in steady)
        figures[f"one_topic_{stage}_s"] = round(one[stage][0], 2)
        figures[f"one_topic_{stage}_jobs"] = one[stage][1]
    figures["pass_s"] = round(sum(figures[f"{s}_s"] for s in STAGES), 2)  # type: ignore[misc]
    figures["one_topic_pass_s"] = round(sum(one[s][0] for s in STAGES), 2)
    rows = "".join(
        f"| {s} | {figures[f'{s}_s']} | {figures[f'{s}_jobs']} | {figures[f'one_topic_{s}_s']} "
        f"| {figures[f'one_topic_{s}_jobs']} |\n"
        for s in STAGES
    )
    table = (
        f"\n### The warehouse path of a pass over many topics "
        f"({dt.date.today().isoformat()}, {machine()})\n\n"
        f"`python -m bench.warehouse_path_bench`: {args.topics} topics, {args.events} new "
        f"events each per round, medians of rounds 2-{args.rounds}; beside it one topic of "
        f"them touched.\n\n| stage | seconds, all touched | jobs | seconds, one touched | "
        f"jobs |\n|---|---:|---:|---:|---:|\n{rows}"
        f"| pass | {figures['pass_s']} | | {figures['one_topic_pass_s']} | |\n"
    )
    publish("warehouse_path", table, figures)


if __name__ == "__main__":
    main()
