"""Small lake tables' MERGEs: files rewritten (the default) against deletion vectors.

A lake table under tables/apply.py's DELETION_VECTORS_FROM_BYTES has the files its MERGE
touches rewritten; a larger one marks the changed rows with deletion vectors, as every
table did before. Two lakes side by side in one process and one Spark session
(bench/table_pass_bench.py's: --tables SCD1 tables over one raw pool), each round
committing --rows updates to every table of both and timing each lake's tables stage,
their order alternating from round to round; the "vectors" lake runs with the threshold
at 0 (every MERGE writes deletion vectors).

  rewrite_s     median seconds of the stage, the default (small tables rewritten)
  vectors_s     the same with deletion vectors
  ratio         rewrite / vectors, round by round (median)
  per_table_s   the default's seconds per touched table

Run: `python -m bench.small_merge_bench` (about 5 minutes on 2 cores). Appends its table to
docs/BENCHMARKS.md and writes bench/results/small_merge.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
from pathlib import Path

from bench import table_pass_bench as lakes
from bench.common import machine, publish
from zync_assets.pipeline.run import TABLE_WORKERS
from zync_assets.spark.session import spark_session
from zync_assets.tables import apply


def timed(lake: lakes.Lake, vectors: bool) -> float:
    kept = apply.DELETION_VECTORS_FROM_BYTES
    apply.DELETION_VECTORS_FROM_BYTES = 0 if vectors else kept
    try:
        seconds, result = lakes.timed_stage(lake)
    finally:
        apply.DELETION_VECTORS_FROM_BYTES = kept
    assert not result.failures, result.failures
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=12)
    parser.add_argument("--rows", type=int, default=50, help="updates per table per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    spark = spark_session("zync-bench", long_lived=True)
    folder = Path(tempfile.mkdtemp(prefix="zync-small-merge-"))
    both = {
        name: lakes.make_lake(spark, folder, name, TABLE_WORKERS) for name in ("rewrite", "vectors")
    }
    every = [lakes.topic(i) for i in range(args.tables)]
    for lake in both.values():  # round 0: the tables' first rows (appended, no MERGE)
        lakes.commit(spark, lake, every, args.rows, 1)
        timed(lake, vectors=False)
    seconds: dict[str, list[float]] = {name: [] for name in both}
    ratios = []
    for round_ in range(2, args.rounds + 2):
        order = list(both) if round_ % 2 == 0 else list(both)[::-1]
        took = {}
        for name in order:
            lakes.commit(spark, both[name], every, args.rows, round_)
            took[name] = timed(both[name], vectors=name == "vectors")
            seconds[name].append(took[name])
        ratios.append(took["rewrite"] / took["vectors"])
        print(f"round {round_ - 1}: {took}", flush=True)
    rewrite = statistics.median(seconds["rewrite"])
    figures = {
        "tables": args.tables, "rows_per_table": args.rows, "rounds": args.rounds,
        "rewrite_s": round(rewrite, 2),
        "vectors_s": round(statistics.median(seconds["vectors"]), 2),
        "ratio": round(statistics.median(ratios), 3),
        "per_table_s": round(rewrite / args.tables, 3),
    }  # fmt: skip
    table = (
        f"\n### Small lake tables' MERGEs: files rewritten against deletion vectors "
        f"({dt.date.today().isoformat()}, {machine()})\n\n"
        f"`python -m bench.small_merge_bench`: {args.tables} tables, {args.rows} updates each "
        f"per round, {args.rounds} rounds, medians, side by side in one session.\n\n"
        "| | seconds |\n|---|---:|\n"
        f"| tables stage, small tables' files rewritten (default) | {figures['rewrite_s']} |\n"
        f"| tables stage, deletion vectors (as before) | {figures['vectors_s']} |\n"
        f"| ratio, round by round | {figures['ratio']} |\n"
        f"| per touched table (default) | {figures['per_table_s']} |\n"
    )
    publish("small_merge", table, figures)


if __name__ == "__main__":
    main()
