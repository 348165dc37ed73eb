"""What sending a pool's topics together costs: `python -m bench.together_bench [--records N]`.

Side by side in one process, against one broker, the same N staging output records in two
topics (N/2 each), in source transactions of 10 records (5 in each topic):
  per-topic  a pool without a `txn` column: `sync_pool` sends topic after topic, one
             producer each (what every pool got before)
  together   the same records with their `txn`: `sync_pool` sends both topics through the
             pool's producer, every Kafka transaction closed over the source transactions
             across both topics (tokafka/together.py)
each in the steady state (the topics already hold 10 records, their schemas registered),
the N records written by one ETL run (a backfill: to-kafka cuts that run between its
source transactions), with the default `--transaction-size` (200,000) and with 10,000,
best of 2, alternating.
Appends to docs/BENCHMARKS.md, writes bench/results/together.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import tempfile
import time
import uuid

from bench.common import bench_stack, machine, publish
from zync_assets_tests.support.pool_data import PER_TOPIC, write_outputs_together


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000, help="in both topics")
    args = parser.parse_args()
    os.environ.setdefault("ZYNC_LAKE", tempfile.mkdtemp(prefix="zync-bench-lake-"))
    from zync_assets.spark.session import spark_session
    from zync_assets.tokafka.sync import sync_pool

    half = args.records // 2
    seconds: dict[str, list[float]] = {}
    with bench_stack() as (kafka, registry):
        spark = spark_session("zync-bench")
        tag = uuid.uuid4().hex[:6]
        runs = [(mode, size, attempt) for attempt in range(2) for size in (200_000, 10_000)
                for mode in ("per_topic", "together")]  # fmt: skip
        for mode, size, attempt in runs:
            pool = f"Bench_{mode}_{size}_{attempt}_{tag}"
            topics = [f"{pool}_orders", f"{pool}_items"]
            together = mode == "together"
            write_outputs_together(spark, pool, topics, 10, 0, together, run=1)
            sync_pool(spark, pool, kafka, registry)  # schemas registered: the steady state
            write_outputs_together(spark, pool, topics, half, 10, together, run=2)
            started = time.perf_counter()
            results = sync_pool(spark, pool, kafka, registry, transaction_size=size)
            seconds.setdefault(f"{mode}_{size}", []).append(time.perf_counter() - started)
            assert sorted(r.sent for r in results) == [half, half], results

    best = {run: min(took) for run, took in seconds.items()}
    figures: dict[str, object] = {
        "records": 2 * half,
        **{f"{run}_s": round(took, 2) for run, took in best.items()},
        **{f"{run}_records_per_s": round(2 * half / took) for run, took in best.items()},
        "together_over_per_topic": round(best["per_topic_200000"] / best["together_200000"], 3),
        "together_over_per_topic_10000": round(best["per_topic_10000"] / best["together_10000"], 3),
    }

    def row(label: str, run: str) -> str:
        took = best[run]
        ratio = best[run.replace("together", "per_topic")] / took
        return f"| {label} | {took:.1f} | {2 * half / took:,.0f} | {ratio:.2f} |"

    lines = [
        "",
        f"### to-kafka, a pool's topics together, {dt.date.today()} — {machine()}",
        "",
        f"{2 * half:,} staging output records in two topics ({half:,} each), in source "
        f"transactions of {2 * PER_TOPIC} records ({PER_TOPIC} in each topic); steady state "
        "(schemas registered), all written by one ETL run (cut between its source transactions), "
        "one partition per topic, best of 2.",
        "",
        "| measurement | seconds | records/s | ratio to per-topic |",
        "|---|---:|---:|---:|",
        row("per topic (no `txn` column), transaction size 200,000 (default)", "per_topic_200000"),
        row("together, transaction size 200,000 (default)", "together_200000"),
        row("per topic, transaction size 10,000", "per_topic_10000"),
        row("together, transaction size 10,000", "together_10000"),
        "",
    ]
    publish("together", "\n".join(lines), figures)


if __name__ == "__main__":
    main()
