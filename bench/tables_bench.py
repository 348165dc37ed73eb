"""Lake tables: a 1,000,000-row table absorbing 10,000 changes, MERGE against a full rewrite.

A raw pool gets 1,000,000 Debezium creates (ids 0..999,999, sequenced by `source.lsn`);
the tables of a spec over it — `current` (SCD1) and `history` (SCD2) — are built from
them, and compacted as the pipeline's upkeep compacts them (OPTIMIZE, which clusters
them by their keys). Then, --rounds times, 10,000 updates of recent ids (drawn from the
newest 50,000: what real CDC touches most, new orders and open invoices), and after
those --rounds times 10,000 updates of random ids, land in the raw pool and:

- the table pass applies them as a user runs it (`zync table apply`: the default
  configuration, one MERGE per table, deletion vectors and clustering on the keys);
- side by side, in the same session, the same changes applied by rewriting the whole
  table (read it, replace the changed keys' rows or versions, overwrite).

Figures: the median time of each and the bytes each wrote (data files and deletion
vectors, read from the Delta log), as ratios MERGE / full rewrite (`scd1.*` random ids,
`scd1.recent_keys.*` recent ones; the same for scd2); and `model_cases`, the
number of random cases the reference-model test (test_tables_model.py) runs in CI.

Run: `python -m bench.tables_bench` (about 10 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.common import ModelRun, machine, publish, publish_joined, run_model_test
from zync_assets.lake import store as lake_store
from zync_assets.lake.delta_writes import append_once
from zync_assets.lake.pools import commit_file, pool_path, pool_version, table_path
from zync_assets.lake.progress import app_id, commit_metadata
from zync_assets.specs.model import load_spec
from zync_assets.tables.fold import END_AT, START_AT
from zync_assets.tables.together import run_tables

SPEC = """
inputs:
  - {topic: orders, pool: Raw}
tables:
  - {name: current, source: orders, keys: [id], sequence-by: "source:lsn::bigint"}
  - {name: history, source: orders, keys: [id], sequence-by: "source:lsn::bigint", stored-as: scd2}
"""
MODEL_TEST = "zync_assets_tests/test_tables_model.py"
MODEL_CASES, MODEL_SEEDS = 2000, 3  # larger than the test's CI default (1,000 cases, 1 seed)
RECENT_KEYS = 50_000  # the newest ids, which the recent rounds draw from


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--model-only",
        action="store_true",
        help="only the reference-model test (its figures join the MERGE ones)",
    )
    args = parser.parse_args()
    model = run_model_test(
        MODEL_TEST,
        "tables_equal_the_model",
        {"ZYNC_TABLE_MODEL_CASES": str(MODEL_CASES), "ZYNC_TABLE_MODEL_SEEDS": str(MODEL_SEEDS)},
        MODEL_CASES,
        MODEL_SEEDS,
    )
    if args.model_only:
        publish_joined("tables", model_lines(model), model_figures(model))
        return
    from zync_assets.spark.session import spark_session

    work = Path(tempfile.mkdtemp(prefix="zync-bench-tables-"))
    os.environ["ZYNC_LAKE"] = str(work / "lake")
    (work / "spec.yaml").write_text(SPEC)
    spec = load_spec(work / "spec.yaml")
    spark = spark_session("zync-bench-tables", long_lived=True)

    commit_raw(spark, 1, creates(spark, args.rows), args.rows)
    started = time.monotonic()
    run_tables(spark, spec)
    build_s = time.monotonic() - started
    for name in ("current", "history"):
        spark.sql(f"OPTIMIZE delta.`{table_path(name)}`")
    print(f"built both tables from {args.rows:,} creates in {build_s:.1f}s", flush=True)

    rng = random.Random(7)
    samples: dict[str, list[dict[str, float]]] = {}
    end = args.rows
    recent = range(args.rows - RECENT_KEYS, args.rows)
    # Recent keys first: a random round's new files span every key and would be read by
    # every later round, recent or not.
    draws = [(".recent_keys", recent)] * args.rounds + [("", range(args.rows))] * args.rounds
    for round_, (draw, keys) in enumerate(draws):
        ids = rng.sample(keys, args.changes)
        commit_raw(spark, 2 + round_, updates(spark, ids, end, round_), end + args.changes)
        end += args.changes
        for kind, name in (("scd1", "current"), ("scd2", "history")):
            before = pool_version(table_path(name))
            assert before is not None
            started = time.monotonic()
            (result,) = run_tables(spark, spec, only=name)
            merge_s = time.monotonic() - started
            assert result.upserts == args.changes, result
            merge_bytes = written_bytes(
                table_path(name), before + 1, pool_version(table_path(name))
            )
            full_s, full_bytes = full_rewrite(spark, name, before, kind, ids, work)
            sample = {"merge_s": merge_s, "merge_bytes": merge_bytes, "full_s": full_s,
                      "full_bytes": full_bytes}  # fmt: skip
            samples.setdefault(kind + draw, []).append(sample)
            print(kind + draw, json.dumps({k: round(v, 2) for k, v in sample.items()}), flush=True)
    report(samples, build_s, args, model)


def creates(spark: SparkSession, rows: int) -> DataFrame:
    value = '{"op": "c", "after": {"id": %d, "customer": "customer-%d", "status": "new", "amount": 12.50}, "source": {"lsn": %d}}'
    ids = spark.range(rows)
    return _raw(ids, F.format_string(value, "id", "id", "id"), F.col("id"))


def updates(spark: SparkSession, ids: list[int], first_offset: int, round_: int) -> DataFrame:
    value = '{"op": "u", "after": {"id": %d, "customer": "customer-%d", "status": "paid-%d", "amount": 13.75}, "source": {"lsn": %d}}'
    frame = spark.createDataFrame(
        [(i, first_offset + j) for j, i in enumerate(ids)], "id long, offset long"
    )
    text = F.format_string(value, "id", "id", F.lit(round_), "offset")
    return _raw(frame, text, F.col("offset"))


def _raw(ids: DataFrame, value, offset) -> DataFrame:
    return ids.select(
        F.struct(F.lit("orders").alias("topic"), F.lit(0).alias("partition"),
                 offset.alias("offset"), F.timestamp_seconds(F.lit(1_767_225_600)).alias("timestamp"),
                 ).alias("kafka"),
        F.parse_json(F.format_string('{"id": %d}', "id")).alias("key"),
        F.parse_json(value).alias("value"),
        F.lit(None).cast("struct<reason: string, key: binary, value: binary>").alias("dead_letter"),
    )  # fmt: skip


def commit_raw(spark: SparkSession, run: int, rows: DataFrame, end: int) -> None:
    meta = commit_metadata(run, uuid.uuid4().hex, {"orders": {0: end}})
    append_once(rows, pool_path("Raw"), app_id("Raw"), run, meta)


def written_bytes(path: str, first: int, last: int | None) -> int:
    """Bytes that commits first..last wrote: new data files, deletion vectors and change
    data files. (A file given a deletion vector is removed and added again by path in
    the same commit: only its vector was written.)"""
    total = 0
    for version in range(first, (last or first) + 1):
        text = lake_store.read_text(commit_file(path, version)) or ""
        actions = [json.loads(line) for line in text.splitlines()]
        removed = {a["remove"]["path"] for a in actions if "remove" in a}
        for action in actions:
            if "add" in action:
                add = action["add"]
                if add["path"] not in removed:
                    total += int(add["size"])
                total += int((add.get("deletionVector") or {}).get("sizeInBytes", 0))
            elif "cdc" in action:
                total += int(action["cdc"]["size"])
    return total


def full_rewrite(
    spark: SparkSession, name: str, version: int, kind: str, ids: list[int], work: Path
) -> tuple[float, int]:
    """The same changes applied by rewriting the whole table (as of `version`) to a new path;
    the seconds and the bytes written."""
    target = str(work / f"rewrite-{name}-{version}")
    started = time.monotonic()
    table = spark.read.format("delta").option("versionAsOf", version).load(table_path(name))
    newest = spark.read.format("delta").load(table_path(name))
    changed = spark.createDataFrame([(i,) for i in ids], "id long")
    if kind == "scd1":
        fresh = newest.join(changed, "id", "left_semi")
        rewritten = table.join(changed, "id", "left_anti").unionByName(fresh)
    else:
        new_versions = newest.join(changed, "id", "left_semi").where(F.col(END_AT).isNull())
        closes = new_versions.select("id", F.col(START_AT).alias("__closed_at"))
        ended = table.join(closes, "id", "left").select(
            *[c for c in table.columns if c != END_AT],
            F.when(F.col(END_AT).isNull() & F.col("__closed_at").isNotNull(), F.col("__closed_at"))
            .otherwise(F.col(END_AT)).alias(END_AT),
        )  # fmt: skip
        rewritten = ended.unionByName(new_versions)
    rewritten.write.format("delta").mode("overwrite").save(target)
    seconds = time.monotonic() - started
    return seconds, written_bytes(target, 0, pool_version(target))


def model_figures(model: ModelRun) -> dict[str, object]:
    return {"model_cases": model.cases, "model_seeds": model.seeds,
            "model_passed": model.passed, "model_s": model.seconds}  # fmt: skip


def model_lines(model: ModelRun) -> str:
    found = "every round equalled the model" if model.passed else f"it failed: {model.failure}"
    return (
        f"\nThe reference-model test (test_tables_model.py) at {model.cases:,} cases and "
        f"{model.seeds} seeds, run by this benchmark: {found} ({model.seconds} s).\n"
    )


def report(
    samples: dict[str, list[dict[str, float]]], build_s: float, args: argparse.Namespace,
    model: ModelRun,
) -> None:  # fmt: skip
    figures: dict[str, object] = {"build_s": round(build_s, 1), **model_figures(model)}
    lines = [
        f"\n## Lake tables: MERGE against a full rewrite ({time.strftime('%Y-%m-%d')}, {machine()})\n",
        f"A {args.rows:,}-row table absorbing {args.changes:,} updates of recent keys (of the "
        f"newest {RECENT_KEYS:,}; `.recent_keys`), then of random keys, median of "
        f"{args.rounds} rounds each, the default configuration (`zync table apply`). Both "
        f"tables built first from {args.rows:,} creates in {build_s:.1f} s, then compacted "
        "(OPTIMIZE: clustered by their keys).\n",
        "| table | MERGE s | full rewrite s | time ratio | MERGE MB written | full rewrite MB | bytes ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, rows in samples.items():
        m = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        time_ratio = round(m["merge_s"] / m["full_s"], 3)
        bytes_ratio = round(m["merge_bytes"] / m["full_bytes"], 4)
        figures |= {f"{kind}.merge_s": round(m["merge_s"], 2), f"{kind}.full_rewrite_s": round(m["full_s"], 2),
                    f"{kind}.time_ratio": time_ratio, f"{kind}.bytes_ratio": bytes_ratio}  # fmt: skip
        lines.append(
            f"| {kind} | {m['merge_s']:.2f} | {m['full_s']:.2f} | {time_ratio} | "
            f"{m['merge_bytes'] / 1e6:.2f} | {m['full_bytes'] / 1e6:.2f} | {bytes_ratio} |"
        )
    lines.append(model_lines(model))
    publish("tables", "\n".join(lines) + "\n", figures)


if __name__ == "__main__":
    main()
