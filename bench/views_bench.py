"""What a `view` rule costs: `python -m bench.views_bench [--changes N] [--history N]`.

In one process and one SparkSession, over raw rows committed the way ingest commits them
(Kafka is not involved: this measures the ETL pass):
  rate      one pass over N account creates (each with a customer among N/10) through
            the accounts-with-customers view (LEFT join), against one pass over the same
            events through a stateless rule (`events_per_s`, `view_over_stateless`)
  fan-out   one customer with 10,000 accounts; a pass over one change of the customer,
            which re-sends all 10,000 rows (`fanout_update_s`, warm), beside a pass over
            one change through a stateless rule (`one_change_stateless_s`): what any ETL
            pass costs, the floor under the view's
  history   a pass of 10,000 account updates over a view holding `--history` accounts,
            against the same pass over one holding 10,000 (`history_ratio`)
  model     the reference-model test (zync_assets_tests/test_view_model.py) run here with
            --model-cases cases (default 1,000; CI runs 300) on a private stack: the rows
            its sink tables differ from SQLite's query (`rows_mismatched`: 0 when it passes;
            when it fails, the count its first failing comparison names)
Appends to docs/BENCHMARKS.md, writes bench/results/views.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import tempfile
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.common import machine, publish, run_model_test
from bench.etl_bench import etl_pass
from zync_assets_tests.support.pool_data import commit_raw

ACCOUNTS, CUSTOMERS = "bench.public.accounts", "bench.public.customers"
KAFKA = "struct<topic: string, partition: int, offset: bigint, timestamp: timestamp>"
DEAD = "struct<reason: string, key: binary, value: binary>"
FANOUT = 10_000
MODEL_TEST = "zync_assets_tests/test_view_model.py"

VIEW = f"""
  - type: view
    inputs: {{a: {ACCOUNTS}, c: {CUSTOMERS}}}
    key: id
    out: bench_out
    sql: |
      SELECT a.after:id::bigint AS id, a.after:balance::bigint AS balance,
             c.after:name::string AS customer, c.after:tier::string AS tier
      FROM a LEFT JOIN c ON a.after:customer_id::bigint = c.after:id::bigint"""
STATELESS = f"""
  - type: stateless
    in: {ACCOUNTS}
    out: bench_out
    sql: in.key AS key, in.after AS value
  - type: stateless
    in: {CUSTOMERS}
    out: bench_out
    sql: in.key AS key, in.after AS value"""


def spec_text(raw: str, staging: str, rules: str) -> str:
    return (
        f"inputs:\n  - {{topic: {ACCOUNTS}, pool: {raw}}}\n  - {{topic: {CUSTOMERS}, pool: {raw}}}\n"
        f"outputs:\n  - {{topic: bench_out, pool: {staging}}}\ntransforms:{rules}\n"
    )


def _rows(topic: str, ids: DataFrame, first_offset: int, clock: int, value: Column) -> DataFrame:
    """One change per id (`id` column), offsets from `first_offset`, a millisecond apart."""
    lowest = ids.agg(F.min("id")).first()
    assert lowest is not None
    offset = F.lit(first_offset) + F.col("id") - F.lit(lowest[0])
    stamp = F.timestamp_millis(F.lit(1_767_225_600_000 + clock) + offset)
    return ids.select(
        F.struct(F.lit(topic), F.lit(0), offset, stamp).cast(KAFKA).alias("kafka"),
        F.parse_json(F.format_string('{"id": %d}', "id")).alias("key"),
        F.parse_json(value).alias("value"),
        F.lit(None).cast(DEAD).alias("dead_letter"),
    )


def accounts(
    ids: DataFrame, first: int, clock: int, customers: int, op: str, balance: int
) -> DataFrame:
    value = F.format_string(
        '{"op": "%s", "after": {"id": %d, "balance": %d, "customer_id": %d}}',
        F.lit(op), "id", F.lit(balance), F.col("id") % customers,
    )  # fmt: skip
    return _rows(ACCOUNTS, ids, first, clock, value)


def customers(ids: DataFrame, first: int, clock: int, op: str, tier: str) -> DataFrame:
    value = F.format_string(
        '{"op": "%s", "after": {"id": %d, "name": "c%d", "tier": "%s"}}',
        F.lit(op), "id", "id", F.lit(tier),
    )  # fmt: skip
    return _rows(CUSTOMERS, ids, first, clock, value)


class Pool:
    """A raw pool the benchmark commits to as ingest would, run by run."""

    def __init__(self, spark: SparkSession, name: str) -> None:
        self.spark, self.name, self.run = spark, name, 0
        self.ends = {ACCOUNTS: 0, CUSTOMERS: 0}

    def add(self, account_rows: DataFrame | None, customer_rows: DataFrame | None) -> None:
        parts = [f for f in (account_rows, customer_rows) if f is not None]
        frame = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
        for topic, part in ((ACCOUNTS, account_rows), (CUSTOMERS, customer_rows)):
            if part is not None:
                self.ends[topic] += part.count()
        self.run += 1
        commit_raw(self.spark, self.name, self.run, frame, dict(self.ends))


def view_spec(work: Path, name: str, rules: str = VIEW) -> Path:
    path = work / f"{name}.yaml"
    path.write_text(spec_text(f"{name}Raw", f"{name}Staging", rules))
    return path


def rate(spark: SparkSession, work: Path, name: str, changes: int) -> dict[str, float]:
    """One pass over `changes` account creates and their customers, view and stateless."""
    pool = Pool(spark, f"{name}Raw")
    n_customers = max(changes // 10, 1)
    pool.add(
        accounts(spark.range(changes), 0, 0, n_customers, "c", 5),
        customers(spark.range(n_customers), 0, changes, "c", "blue"),
    )
    seconds = {}
    for label, rules in (("stateless", STATELESS), ("view", VIEW)):
        spec = work / f"{name}_{label}.yaml"
        spec.write_text(spec_text(f"{name}Raw", f"{name}_{label}_staging", rules))
        seconds[label], result = etl_pass(spark, spec)
        want = changes + n_customers if label == "stateless" else changes
        assert sum(result.outputs.values()) == want and result.pending == 0, result
    return seconds


def fanout(spark: SparkSession, work: Path, name: str) -> float:
    """Seconds of a pass over one change of a customer with FANOUT accounts."""
    pool, spec = Pool(spark, f"{name}Raw"), view_spec(work, name)
    pool.add(
        accounts(spark.range(FANOUT), 0, 0, 1, "c", 5),
        customers(spark.range(1), 0, FANOUT, "c", "blue"),
    )
    etl_pass(spark, spec)
    pool.add(None, customers(spark.range(1), 1, 2 * FANOUT, "u", "gold"))
    seconds, result = etl_pass(spark, spec)
    assert sum(result.outputs.values()) == FANOUT, result
    return seconds


def one_change_stateless(spark: SparkSession, work: Path, name: str) -> float:
    """Seconds of a pass over one account change through the stateless rules."""
    pool, spec = Pool(spark, f"{name}Raw"), view_spec(work, name, STATELESS)
    pool.add(
        accounts(spark.range(FANOUT), 0, 0, 1, "c", 5),
        customers(spark.range(1), 0, FANOUT, "c", "blue"),
    )
    etl_pass(spark, spec)
    pool.add(accounts(spark.range(1), FANOUT, 2 * FANOUT, 1, "u", 7), None)
    seconds, result = etl_pass(spark, spec)
    assert sum(result.outputs.values()) == 1, result
    return seconds


def history_pass(spark: SparkSession, work: Path, name: str, held: int, new: int) -> float:
    """Seconds of a pass of `new` account updates over a view holding `held` accounts."""
    pool, spec = Pool(spark, f"{name}Raw"), view_spec(work, name)
    n_customers = max(held // 10, 1)
    pool.add(
        accounts(spark.range(held), 0, 0, n_customers, "c", 5),
        customers(spark.range(n_customers), 0, held, "c", "blue"),
    )
    etl_pass(spark, spec)
    pool.add(accounts(spark.range(new), held, 2 * held, n_customers, "u", 7), None)
    seconds, result = etl_pass(spark, spec)
    assert sum(result.outputs.values()) == new, result
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--changes", type=int, default=1_000_000, help="account creates")
    parser.add_argument("--history", type=int, default=1_000_000, help="accounts held")
    parser.add_argument("--new", type=int, default=10_000, help="updates in a history pass")
    parser.add_argument(
        "--model-cases", type=int, default=1_000, help="the model test's (0: not run)"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="zync-views-bench-"))
    os.environ["ZYNC_LAKE"] = str(work / "lake")
    os.environ.setdefault("ZYNC_SPARK_FAST_START", "0")
    from zync_assets.spark.session import spark_session

    spark = spark_session("views-bench")
    rate(spark, work, "Warmup", 20_000)  # JIT, caches
    fanout(spark, work, "WarmFanout")
    one_change_stateless(spark, work, "WarmFloor")
    seconds = rate(spark, work, "Rate", args.changes)
    per_s = {k: args.changes / v for k, v in seconds.items()}
    fanout_s = fanout(spark, work, "Fanout")
    floor_s = one_change_stateless(spark, work, "Floor")
    small = history_pass(spark, work, "Small", args.new, args.new)
    big = history_pass(spark, work, "Big", args.history, args.new)
    ratio, history_ratio = per_s["view"] / per_s["stateless"], big / small
    table = "\n".join([
        "", f"### Views (`type: view`), {dt.date.today()} — {machine()}", "",
        f"One pass over {args.changes:,} account creates (and their {args.changes // 10:,} "
        "customers), side by side:", "",
        "| rules | pass (s) | account changes/s |", "|---|---:|---:|",
        f"| stateless (one output per event) | {seconds['stateless']:.1f} | {per_s['stateless']:,.0f} |",
        f"| view: accounts LEFT JOIN customers | {seconds['view']:.1f} | {per_s['view']:,.0f} |",
        "",
        f"View over stateless: **{ratio:.2f}** (target ≥ 0.5). One change of a customer with "
        f"{FANOUT:,} accounts, all re-sent: **{fanout_s:.2f} s** (target ≤ 5); one change "
        f"through a stateless rule, the cost of any pass: {floor_s:.2f} s. A pass of "
        f"{args.new:,} updates over {args.history:,} accounts held: {big:.2f} s; over "
        f"{args.new:,} held: {small:.2f} s; ratio **{history_ratio:.2f}** (target ≤ 1.5).",
        "",
    ])  # fmt: skip
    model = model_run(args.model_cases) if args.model_cases else {}
    if model:
        table += (f"The reference-model test at {model['model_cases']:,} cases: "
                  f"**{model['rows_mismatched']} rows mismatched**.\n")  # fmt: skip
    publish("views", table, {
        **model,
        "changes": args.changes, "view_pass_s": round(seconds["view"], 3),
        "stateless_pass_s": round(seconds["stateless"], 3),
        "events_per_s": round(per_s["view"]), "stateless_events_per_s": round(per_s["stateless"]),
        "view_over_stateless": round(ratio, 3), "fanout": FANOUT,
        "fanout_update_s": round(fanout_s, 3), "one_change_stateless_s": round(floor_s, 3),
        "history_rows": args.history,
        "history_new": args.new, "pass_with_history_s": round(big, 3),
        "pass_with_small_history_s": round(small, 3), "history_ratio": round(history_ratio, 3),
    })  # fmt: skip


def model_run(cases: int) -> dict[str, object]:
    """The view model test at `cases` cases, in a pytest of its own (its own stack): 0 rows
    mismatched when it passes, else the count its failure names."""
    run = run_model_test(MODEL_TEST, "after_every_round",
                         {"ZYNC_VIEW_MODEL_CASES": str(cases)}, cases, 1)  # fmt: skip
    if run.passed:
        return {"model_cases": cases, "rows_mismatched": 0}
    differ = re.search(r"(\d+) of \d+ rows differ", run.failure or "")
    if differ is None:
        raise RuntimeError(f"the model test failed before comparing: {run.failure}")
    return {"model_cases": cases, "rows_mismatched": int(differ.group(1))}


if __name__ == "__main__":
    main()
