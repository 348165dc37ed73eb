"""ETL cost follows new data, not history: `python -m bench.etl_bench [--history N] [--new N]`.

Side by side in one process and one SparkSession:
  big    a raw pool with N already-done events, plus M new ones: time of the ETL pass
  small  a raw pool with M already-done events, plus the same M new ones: time of the pass
and the rate of the pass that consumed the N events (a denorm rule pairing orders with
payments). Raw rows are generated in Spark and committed the way ingest commits them
(Kafka is not involved: this measures ETL). Results are appended to docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import tempfile
import time
import uuid
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.common import machine

RESULTS = Path(__file__).resolve().parent.parent / "docs" / "BENCHMARKS.md"
SPEC = """
inputs:
  - {topic: orders, pool: %(raw)s}
  - {topic: payments, pool: %(raw)s}
outputs:
  - {topic: paid_orders, pool: %(staging)s}
transforms:
  - type: denorm
    where: op IN ('c', 'r')
    left: orders
    right: payments
    join-on: left.after:id::bigint = right.after:order_id::bigint
    out: paid_orders
    sql: |
      left.key AS key,
      named_struct('id', left.after:id::bigint, 'customer', left.after:customer::string,
                   'amount', right.after:amount::decimal(12,2)) AS value
"""


def raw_rows(spark: SparkSession, first: int, count: int) -> DataFrame:
    """`count` orders and `count` payments: order i and payment i pair; offsets first.."""
    ids = spark.range(first, first + count)
    stamp = F.timestamp_seconds(F.lit(1_767_225_600) + F.col("id"))

    def rows(topic: str, value: str) -> DataFrame:
        return ids.select(
            F.struct(F.lit(topic).alias("topic"), F.lit(0).alias("partition"),
                     F.col("id").alias("offset"), stamp.alias("timestamp")).alias("kafka"),
            F.parse_json(F.format_string('{"id": %d}', "id")).alias("key"),
            F.parse_json(F.format_string(value, "id", "id")).alias("value"),
            F.lit(None).cast("struct<reason: string, key: binary, value: binary>").alias("dead_letter"),
        )  # fmt: skip

    orders = rows("orders", '{"op": "c", "after": {"id": %d, "customer": "customer-%d"}}')
    payments = rows(
        "payments", '{"op": "c", "after": {"order_id": %d, "amount": 12.50, "ref": "p-%d"}}'
    )
    return orders.unionByName(payments)


def append_raw(spark: SparkSession, pool: str, run: int, first: int, count: int) -> None:
    from zync_assets.delta_writes import append_once
    from zync_assets.ingest.progress import app_id, commit_metadata
    from zync_assets.pools import pool_path

    end = first + count
    offsets = {"orders": {0: end}, "payments": {0: end}}
    meta = commit_metadata(run, uuid.uuid4().hex, offsets)
    append_once(raw_rows(spark, first, count), pool_path(pool), app_id(pool), run, meta)


def etl_pass(spark: SparkSession, spec_path: Path) -> tuple[float, object]:
    from zync_assets.etl.run import run_etl
    from zync_assets.spec import load_spec

    started = time.perf_counter()
    (result,) = run_etl(spark, load_spec(spec_path))
    return time.perf_counter() - started, result


def scenario(spark: SparkSession, work: Path, name: str, history: int, new: int) -> dict:
    spec_path = work / f"{name}.yaml"
    spec_path.write_text(SPEC % {"raw": f"{name}Raw", "staging": f"{name}Staging"})
    append_raw(spark, f"{name}Raw", 1, 0, history)
    history_s, history_result = etl_pass(spark, spec_path)  # makes the history done
    assert history_result.done == 2 * history, history_result
    append_raw(spark, f"{name}Raw", 2, history, new)
    new_s, new_result = etl_pass(spark, spec_path)
    assert new_result.done == 2 * new and new_result.pending == 0, new_result
    return {"history_s": history_s, "new_s": new_s}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--history", type=int, default=500_000, help="orders (and as many payments)"
    )
    parser.add_argument("--new", type=int, default=5_000, help="new orders (and payments)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="zync-etl-bench-"))
    os.environ["ZYNC_LAKE"] = str(work / "lake")
    os.environ.setdefault("ZYNC_SPARK_FAST_START", "0")
    from zync_assets.spark import spark_session

    spark = spark_session("etl-bench")
    scenario(spark, work, "Warmup", 20_000, 1_000)  # JIT, caches
    small = scenario(spark, work, "Small", args.new, args.new)
    big = scenario(spark, work, "Big", args.history, args.new)
    small2 = scenario(spark, work, "Small2", args.new, args.new)  # again, for noise
    small_s = min(small["new_s"], small2["new_s"])
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
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    with RESULTS.open("a") as out:
        out.write("\n" + report)


if __name__ == "__main__":
    main()
