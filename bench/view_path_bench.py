"""A view's pass over one change: evaluated whole against searching the rows it reaches.

A view rule's incremental pass can take two paths (zync_assets/etl/views.py): evaluate
the view whole (its SQL over every current row, the difference against all it sent), or
search the rows its changes reach (view_reach.py) and evaluate it over those alone. The
search is some 20 Spark jobs more, each a fixed cost on two cores; the whole view's work
grows with the rows it holds. Views holding at most WHOLE_VIEW_ROWS row versions take
the whole path. This measures where the two cross.

For each size, in one process and one SparkSession: a raw pool of `held` accounts (and
held/10 customers, the views_bench shape) read by two specs of the same LEFT-join view,
each with its own staging pool; each round commits one account update and runs one pass
of each spec, one forced whole and one forced to search (the module's threshold set for
the pass), in alternating order. Both must send the same one row.

  whole_s.<held>      median seconds of the whole view's pass
  reached_s.<held>    median seconds of the searching pass
  ratio.<held>        whole / reached, round by round (median): below 1, whole is cheaper
  whole_view_rows     the threshold the package ships

Run: `python -m bench.view_path_bench [--sizes 1000,5000,20000,100000] [--rounds 5]`
(about 5 minutes on 2 cores). Appends its table to docs/BENCHMARKS.md and writes
bench/results/view_path.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession

from bench.common import machine, publish
from bench.etl_bench import etl_pass
from bench.views_bench import Pool, accounts, customers, view_spec

WHOLE, REACHED = 10**12, -1  # the threshold that forces each path


def one_size(
    spark: SparkSession, work: Path, held: int, rounds: int, prefix: str = "Held"
) -> dict[str, list[float]]:
    """Per path, the seconds of each round's one-change pass over a view of `held` rows."""
    from zync_assets.etl import views

    name = f"{prefix}{held}"
    pool = Pool(spark, f"{name}Raw")
    n_customers = max(held // 10, 1)
    pool.add(
        accounts(spark.range(held), 0, 0, n_customers, "c", 5),
        customers(spark.range(n_customers), 0, held, "c", "blue"),
    )
    specs = {}
    for path in ("whole", "reached"):
        specs[path] = view_spec(work, f"{name}_{path}")
        specs[path].write_text(specs[path].read_text().replace(f"{name}_{path}Raw", f"{name}Raw"))
        etl_pass(spark, specs[path])  # the first pass: the whole view either way
    seconds: dict[str, list[float]] = {"whole": [], "reached": []}
    for number in range(rounds):
        changed = spark.range(number, number + 1)
        pool.add(accounts(changed, held + number, 2 * held + number, n_customers, "u", 7), None)
        order = ("whole", "reached") if number % 2 == 0 else ("reached", "whole")
        for path in order:
            views.WHOLE_VIEW_ROWS = WHOLE if path == "whole" else REACHED
            took, result = etl_pass(spark, specs[path])
            assert sum(result.outputs.values()) == 1, (path, result)
            seconds[path].append(took)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,5000,20000,100000", help="rows held")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="zync-view-path-bench-"))
    os.environ["ZYNC_LAKE"] = str(work / "lake")
    os.environ.setdefault("ZYNC_SPARK_FAST_START", "0")  # a pipeline's session (C2)
    from zync_assets.etl import views
    from zync_assets.spark.session import spark_session

    shipped = views.WHOLE_VIEW_ROWS
    spark = spark_session("view-path-bench")
    one_size(spark, work, 1000, 2, prefix="Warm")  # warm-up: JIT, caches (both paths)
    figures: dict[str, object] = {"whole_view_rows": shipped, "rounds": args.rounds}
    rows = []
    for held in sizes:
        seconds = one_size(spark, work, held, args.rounds)
        whole, reached = (statistics.median(seconds[p]) for p in ("whole", "reached"))
        ratio = statistics.median(
            w / r for w, r in zip(seconds["whole"], seconds["reached"], strict=True)
        )
        figures |= {f"whole_s.{held}": round(whole, 3), f"reached_s.{held}": round(reached, 3),
                    f"ratio.{held}": round(ratio, 3)}  # fmt: skip
        rows.append(f"| {held:,} | {whole:.2f} | {reached:.2f} | {ratio:.2f} |")
    views.WHOLE_VIEW_ROWS = shipped
    table = "\n".join([
        "", f"### A view's one-change pass: whole or its reach, {dt.date.today()} — {machine()}",
        "", f"The median of {args.rounds} rounds, the two paths side by side (alternating):", "",
        "| rows held | whole (s) | reach (s) | whole / reach |", "|---:|---:|---:|---:|",
        *rows, "",
        f"The package evaluates a view whole while it holds at most {shipped:,} row versions.",
        "",
    ])  # fmt: skip
    publish("view_path", table, figures)


if __name__ == "__main__":
    main()
