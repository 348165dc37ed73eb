"""What `gate: transaction` costs: `python -m bench.txn_bench [--txns N] [--history N]`.

Side by side in one process and one SparkSession, over the same raw events:
  gated    one ETL pass of two `gate: transaction` stateless rules (orders, items) over
           N source transactions of 10 events each (5 per topic) and their BEGIN and END
           records on `bench.transaction`
  ungated  the same rules without the gate, over the same data events
  txn      one `type: txn` rule with `complete-when: debezium-transaction` over both
           topics, whose SQL yields one output per event (the same outputs as the others)
and the events/s of each (`gated_over_ungated`, `txn_rule_over_ungated`). Then history: a pass over `--new`
transactions with `--history` completed transactions (one event each) behind the cursor,
against the same pass with `--new` behind it (`history_ratio`).
Raw rows are generated in Spark and committed the way ingest commits them (Kafka is not
involved: this measures ETL). Appends to docs/BENCHMARKS.md, writes bench/results/txn.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession

from bench.common import machine, write_results
from bench.etl_bench import etl_pass
from zync_assets_tests.support.pool_data import (
    NO_OFFSETS,
    PER_TOPIC,
    TOPICS,
    append_transactions,
    transactions_spec,
)

RESULTS = Path(__file__).resolve().parent.parent / "docs" / "BENCHMARKS.md"


def side_by_side(spark: SparkSession, work: Path, name: str, txns: int) -> dict[str, float]:
    """One raw pool; a gated and an ungated spec each make one pass over all of it."""
    raw = f"{name}Raw"
    append_transactions(spark, raw, 1, 0, txns, PER_TOPIC, NO_OFFSETS)
    seconds = {}
    for label in ("ungated", "gated", "txn"):
        spec_path = work / f"{name}_{label}.yaml"
        staging = f"{name}_{label}_staging"
        spec_path.write_text(transactions_spec(raw, staging, label == "gated", label == "txn"))
        seconds[label], result = etl_pass(spark, spec_path)
        outputs = sum(result.outputs.values())
        assert outputs == txns * PER_TOPIC * len(TOPICS) and result.pending == 0, result
    return seconds


def history_pass(spark: SparkSession, work: Path, name: str, behind: int, new: int) -> float:
    """Seconds of a gated pass over `new` transactions (10 events each) with `behind`
    completed transactions of two events each (one per topic) behind the cursor."""
    raw, spec_path = f"{name}Raw", work / f"{name}.yaml"
    spec_path.write_text(transactions_spec(raw, f"{name}Staging", gated=True))
    ends = append_transactions(spark, raw, 1, 0, behind, 1, NO_OFFSETS)
    _, done = etl_pass(spark, spec_path)
    assert done.pending == 0 and sum(done.outputs.values()) == 2 * behind, done
    append_transactions(spark, raw, 2, behind, new, PER_TOPIC, ends)
    seconds, result = etl_pass(spark, spec_path)
    assert sum(result.outputs.values()) == new * PER_TOPIC * len(TOPICS), result
    assert result.pending == 0, result
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--txns", type=int, default=100_000, help="transactions of 10 events")
    parser.add_argument("--history", type=int, default=1_000_000, help="completed transactions")
    parser.add_argument("--new", type=int, default=1_000, help="new transactions (10 events)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="zync-txn-bench-"))
    os.environ["ZYNC_LAKE"] = str(work / "lake")
    os.environ.setdefault("ZYNC_SPARK_FAST_START", "0")
    from zync_assets.spark.session import spark_session

    spark = spark_session("txn-bench")
    side_by_side(spark, work, "Warmup", 2_000)  # JIT, caches
    seconds = side_by_side(spark, work, "Main", args.txns)
    events = args.txns * PER_TOPIC * len(TOPICS)
    rates = {k: events / v for k, v in seconds.items()}
    small = history_pass(spark, work, "Small", args.new * PER_TOPIC * len(TOPICS), args.new)
    big = history_pass(spark, work, "Big", args.history, args.new)
    small2 = history_pass(spark, work, "Small2", args.new * PER_TOPIC * len(TOPICS), args.new)
    small_s = min(small, small2)
    ratio, history_ratio = rates["gated"] / rates["ungated"], big / small_s
    txn_ratio = rates["txn"] / rates["ungated"]
    new_events = args.new * PER_TOPIC * len(TOPICS)
    report = "\n".join([
        f"### Source transactions (`gate: transaction`), {dt.date.today()} — {machine()}",
        "",
        f"One ETL pass over {events:,} events in {args.txns:,} source transactions across two "
        f"topics (plus {2 * args.txns:,} BEGIN/END records), two stateless rules, side by side:",
        "",
        "| rules | pass (s) | events/s |",
        "|---|---:|---:|",
        f"| ungated | {seconds['ungated']:.1f} | {rates['ungated']:,.0f} |",
        f"| `gate: transaction` | {seconds['gated']:.1f} | {rates['gated']:,.0f} |",
        f"| `type: txn`, debezium-transaction | {seconds['txn']:.1f} | {rates['txn']:,.0f} |",
        "",
        f"Gated over ungated: **{ratio:.2f}** (target ≥ 0.5); the txn rule over ungated: "
        f"**{txn_ratio:.2f}**.",
        "",
        f"A gated pass over {args.new:,} new transactions ({new_events:,} events) with "
        f"{args.history:,} completed transactions behind the cursor: {big:.2f} s; with "
        f"{new_events:,} events behind it: {small_s:.2f} s (best of two). "
        f"Ratio: **{history_ratio:.2f}** (target ≤ 1.5).",
    ])  # fmt: skip
    print(report)
    with RESULTS.open("a") as out:
        out.write("\n" + report + "\n")
    write_results("txn", {
        "transactions": args.txns, "events": events,
        "ungated_pass_s": round(seconds["ungated"], 3), "gated_pass_s": round(seconds["gated"], 3),
        "ungated_events_per_s": round(rates["ungated"]), "gated_events_per_s": round(rates["gated"]),
        "gated_over_ungated": round(ratio, 3),
        "txn_rule_pass_s": round(seconds["txn"], 3),
        "txn_rule_events_per_s": round(rates["txn"]),
        "txn_rule_over_ungated": round(txn_ratio, 3),
        "history_transactions": args.history, "new_transactions": args.new,
        "pass_with_history_s": round(big, 3), "pass_with_small_history_s": round(small_s, 3),
        "history_ratio": round(history_ratio, 3),
    })  # fmt: skip


if __name__ == "__main__":
    main()
