"""ETL cost follows new data, not history: `python -m bench.etl_bench [--history N] [--new N]`.

Side by side in one process and one SparkSession:
  big    a raw pool with N already-done events, plus M new ones: time of the ETL pass
  small  a raw pool with M already-done events, plus the same M new ones: time of the pass
and the rate of the pass that consumed the N events (a denorm rule pairing orders with
payments). Then what per-key order costs (`--ordered K`): a pass over K payments, each
created and updated, and their K orders, where
  in order  each order came just before its payment: nothing waits, nothing moves
  late      the orders came after every payment: each update waited behind its create
            and is numbered after the create's pair (etl/order.py moves all K of them)
Raw rows are generated in Spark and committed the way ingest commits them (Kafka is
not involved: this measures ETL). Results are appended to docs/BENCHMARKS.md and
written to bench/results/etl_bench.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.common import machine, write_results
from zync_assets_tests.support.pool_data import PAIRS_SPEC, append_pairs, commit_raw

RESULTS = Path(__file__).resolve().parent.parent / "docs" / "BENCHMARKS.md"

if TYPE_CHECKING:
    from zync_assets.etl.run import EtlResult


def ordered_rows(spark: SparkSession, count: int, late: bool) -> tuple[DataFrame, DataFrame]:
    """Payments (a create and an update each, offsets 2i and 2i+1) and their orders
    (offset i), with timestamps in milliseconds: orders after every payment (`late`), or
    each order just before its payment."""
    ids = spark.range(count)
    base = F.lit(1_767_225_600_000)
    kafka = "struct<topic: string, partition: int, offset: bigint, timestamp: timestamp>"
    dead = F.lit(None).cast("struct<reason: string, key: binary, value: binary>")

    def row(topic: str, offset, millis, value: str) -> list:
        stamp = F.timestamp_millis(base + millis)
        return [
            F.struct(F.lit(topic), F.lit(0), offset, stamp).cast(kafka).alias("kafka"),
            F.parse_json(F.format_string('{"id": %d}', "id")).alias("key"),
            F.parse_json(F.format_string(value, "id", "id")).alias("value"),
            dead.alias("dead_letter"),
        ]

    i = F.col("id")
    payment = '{"op": "%s", "after": {"order_id": %%d, "amount": %s, "ref": "p-%%d"}}'
    creates = ids.select(*row("payments", 2 * i, 3 * i + 1, payment % ("c", "12.50")))
    updates = ids.select(*row("payments", 2 * i + 1, 3 * i + 2, payment % ("u", "13.75")))
    at = (3 * count + i) if late else 3 * i
    orders = ids.select(
        *row("orders", i, at, '{"op": "c", "after": {"id": %d, "customer": "customer-%d"}}')
    )
    return creates.unionByName(updates), orders


def ordered_scenario(spark: SparkSession, work: Path, name: str, count: int, late: bool) -> float:
    """Seconds of the pass that consumes `count` orders with their payments."""
    spec_path = work / f"{name}.yaml"
    spec_path.write_text(PAIRS_SPEC % {"raw": f"{name}Raw", "staging": f"{name}Staging"})
    payments, orders = ordered_rows(spark, count, late)
    if late:  # a pass where every payment waits, then the orders arrive
        commit_raw(spark, f"{name}Raw", 1, payments, {"payments": 2 * count})
        _seconds, first = etl_pass(spark, spec_path)
        assert first.run is None and first.pending == 2 * count, first
        commit_raw(spark, f"{name}Raw", 2, orders, {"payments": 2 * count, "orders": count})
    else:
        rows = payments.unionByName(orders)
        commit_raw(spark, f"{name}Raw", 1, rows, {"payments": 2 * count, "orders": count})
    seconds, result = etl_pass(spark, spec_path)
    assert result.done == 3 * count and result.pending == 0, result
    return seconds


def etl_pass(spark: SparkSession, spec_path: Path) -> tuple[float, EtlResult]:
    from zync_assets.etl.run import run_etl
    from zync_assets.specs.model import load_spec

    started = time.perf_counter()
    (result,) = run_etl(spark, load_spec(spec_path))
    return time.perf_counter() - started, result


def scenario(spark: SparkSession, work: Path, name: str, history: int, new: int) -> dict:
    spec_path = work / f"{name}.yaml"
    spec_path.write_text(PAIRS_SPEC % {"raw": f"{name}Raw", "staging": f"{name}Staging"})
    append_pairs(spark, f"{name}Raw", 1, 0, history)
    history_s, history_result = etl_pass(spark, spec_path)  # makes the history done
    assert history_result.done == 2 * history, history_result
    append_pairs(spark, f"{name}Raw", 2, history, new)
    new_s, new_result = etl_pass(spark, spec_path)
    assert new_result.done == 2 * new and new_result.pending == 0, new_result
    return {"history_s": history_s, "new_s": new_s}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--history", type=int, default=500_000, help="orders (and as many payments)"
    )
    parser.add_argument("--new", type=int, default=5_000, help="new orders (and payments)")
    parser.add_argument(
        "--ordered",
        type=int,
        default=100_000,
        help="orders (each with a payment created and updated)",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="zync-etl-bench-"))
    os.environ["ZYNC_LAKE"] = str(work / "lake")
    os.environ.setdefault("ZYNC_SPARK_FAST_START", "0")
    from zync_assets.spark.session import spark_session

    spark = spark_session("etl-bench")
    scenario(spark, work, "Warmup", 20_000, 1_000)  # JIT, caches
    small = scenario(spark, work, "Small", args.new, args.new)
    big = scenario(spark, work, "Big", args.history, args.new)
    small2 = scenario(spark, work, "Small2", args.new, args.new)  # again, for noise
    small_s = min(small["new_s"], small2["new_s"])
    ordered: dict[bool, float] = {}
    for round_ in range(2):  # alternating, best of two each
        for late in (False, True):
            name = f"{'Late' if late else 'InOrder'}{round_}"
            seconds = ordered_scenario(spark, work, name, args.ordered, late)
            ordered[late] = min(ordered.get(late, seconds), seconds)
    events = 2 * args.history
    lines = [
        f"### ETL, {dt.date.today()} — {machine()}",
        "",
        f"One pass over {2 * args.new:,} new events (a denorm rule pairing orders with payments), "
        "with different histories of already-done events in the same pools:",
        "",
        "| history (done events) | ETL pass over the new events (s) |",
        "|---:|---:|",
        f"| {2 * args.new:,} | {small_s:.2f} (best of two) |",
        f"| {2 * args.history:,} | {big['new_s']:.2f} |",
        "",
        f"Ratio big/small: **{big['new_s'] / small_s:.2f}** (target ≤ 1.5).",
        "",
        f"One ETL pass consuming {events:,} new events (all paired): {big['history_s']:.1f} s, "
        f"**{events / big['history_s']:,.0f} events/s**.",
        "",
        f"Per-key order: one pass over {args.ordered:,} orders and their payments, each "
        f"payment created and updated ({3 * args.ordered:,} events, {2 * args.ordered:,} outputs), "
        "best of two:",
        "",
        "| the orders came | ETL pass (s) |",
        "|---|---:|",
        f"| just before their payments (nothing waits) | {ordered[False]:.2f} |",
        f"| after every payment (each update waited, and moves behind its pair) | {ordered[True]:.2f} |",
        "",
        f"Ratio late/in order: **{ordered[True] / ordered[False]:.2f}**.",
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    with RESULTS.open("a") as out:
        out.write("\n" + report)
    write_results("etl_bench", {
        "new_events": 2 * args.new, "history_events": 2 * args.history,
        "pass_small_history_s": round(small_s, 3), "pass_big_history_s": round(big["new_s"], 3),
        "ratio_big_to_small": round(big["new_s"] / small_s, 3),
        "bulk_pass_events_per_s": round(events / big["history_s"]),
        "ordered_orders": args.ordered, "ordered_in_order_s": round(ordered[False], 3),
        "ordered_late_s": round(ordered[True], 3),
        "ratio_late_to_in_order": round(ordered[True] / ordered[False], 3),
    })  # fmt: skip


if __name__ == "__main__":
    main()
