"""Ingest throughput and memory: `python -m bench.ingest_bench [--events N] [--big N]`.

Side by side in one run, against one broker:
  baseline  a plain confluent-kafka consumer reading the topic without decoding
  cold      `zync from-kafka --once` as a fresh process (JVM start included)
  warm      ingest() in a process whose SparkSession is already up (full JIT:
            ZYNC_SPARK_FAST_START=0), best of two
and the peak memory (RSS of the whole process tree) of the cold run for N and for
the big topic, to show memory does not grow with topic size.
Results are appended to docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from bench.common import bench_stack, fill_topic, machine, timed_subprocess
from zync_assets.core.settings import KafkaSettings
from zync_assets.kafka.registry import Registry

ZYNC = str(Path(sys.executable).parent / "zync")
RESULTS = Path(__file__).resolve().parent.parent / "docs" / "BENCHMARKS.md"


def plain_consumer_rate(kafka: KafkaSettings, topic: str, count: int) -> float:
    consumer = Consumer({**kafka.client_config(), "group.id": "bench", "enable.auto.commit": False,
                         "fetch.max.bytes": 50_000_000})  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    started, seen = time.perf_counter(), 0
    while seen < count:
        seen += len(consumer.consume(10_000, timeout=5))
    consumer.close()
    return count / (time.perf_counter() - started)


def cold_ingest(topic: str, lake: Path) -> tuple[float, float]:
    env = {**os.environ, "ZYNC_LAKE": str(lake), "ZYNC_SPARK_FAST_START": "0"}
    seconds, peak, out = timed_subprocess(
        [ZYNC, "from-kafka", "--topic", topic, "--pool", "Bench", "--once"], env
    )
    if "run 1:" not in out:
        raise RuntimeError(f"unexpected ingest output: {out}")
    return seconds, peak


def warm_ingest(kafka: KafkaSettings, registry: Registry, topic: str, lake: Path) -> float:
    os.environ["ZYNC_LAKE"] = str(lake)
    os.environ["ZYNC_SPARK_FAST_START"] = "0"
    from zync_assets.ingest.ingest import ingest
    from zync_assets.spark.session import spark_session

    spark = spark_session("bench")
    fill_topic(kafka, registry, f"{topic}_warmup", 20_000)
    ingest(spark, "Warmup", [f"{topic}_warmup"], kafka, registry)  # JIT and caches warm
    runs = []
    for attempt in range(2):  # best of two: a shared 2-core machine is noisy
        started = time.perf_counter()
        result = ingest(spark, f"Bench{attempt}", [topic], kafka, registry)
        runs.append(time.perf_counter() - started)
        assert result.rows == sum(r.size for r in result.ranges), result
    return min(runs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--big", type=int, default=4_000_000, help="0 to skip the memory check")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="zync-bench-lake-"))
    lines = []
    with bench_stack() as (kafka, registry):
        topic = f"bench_orders_{args.events}"
        size = fill_topic(kafka, registry, topic, args.events)
        baseline = max(plain_consumer_rate(kafka, topic, args.events) for _ in range(2))
        cold_s, cold_peak = cold_ingest(topic, work / "cold")
        warm_s = warm_ingest(kafka, registry, topic, work / "warm")
        warm, cold = args.events / warm_s, args.events / cold_s
        lines += [
            f"### Ingest, {dt.date.today()} — {machine()}",
            "",
            f"{args.events:,} Debezium-style Postgres envelopes (before/after with 10 columns "
            f"incl. decimal and timestamp-micros, source block, op, ts_ms; {size:.0f} bytes of "
            "Avro per value), one partition.",
            "",
            "| measurement | seconds | events/s | ratio to plain consumer |",
            "|---|---:|---:|---:|",
            f"| plain confluent-kafka consumer, no decoding (best of 2) | {args.events / baseline:.1f} "
            f"| {baseline:,.0f} | 1.00 |",
            f"| zync ingest, warm Spark session (best of 2) | {warm_s:.1f} | {warm:,.0f} "
            f"| {warm / baseline:.3f} |",
            f"| zync ingest, cold (`zync from-kafka --once`, JVM start included) | {cold_s:.1f} "
            f"| {cold:,.0f} | {cold / baseline:.3f} |",
            "",
            f"Peak RSS of the cold run's process tree (Python + Spark JVM): {cold_peak:,.0f} MiB "
            f"for {args.events:,} events.",
        ]
        if args.big:
            big_topic = f"bench_orders_{args.big}"
            fill_topic(kafka, registry, big_topic, args.big)
            big_s, big_peak = cold_ingest(big_topic, work / "big")
            lines.append(
                f"For {args.big:,} events: {big_s:.1f} s ({args.big / big_s:,.0f} events/s), "
                f"peak RSS {big_peak:,.0f} MiB (ratio {big_peak / cold_peak:.2f} to the "
                f"{args.events:,}-event run)."
            )
    shutil.rmtree(work, ignore_errors=True)
    report = "\n".join(lines) + "\n"
    print(report)
    RESULTS.parent.mkdir(exist_ok=True)
    with RESULTS.open("a") as out:
        out.write("\n" + report)


if __name__ == "__main__":
    main()
