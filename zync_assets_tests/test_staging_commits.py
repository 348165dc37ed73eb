"""The staging pool's promise, read commit by commit: an ETL pass's outputs and the done
records of the input events they came from are one Delta commit, never one without the
other (a split would let a crash between them send an output twice, or lose one). And a
kill -9 after a pass's first Delta commit (a spec with two staging pools, each its own
commit: one made, the other not) costs the other pool a rerun, not a record."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from zync_assets.etl.run import run_etl
from zync_assets.specs.model import load_spec
from zync_assets_tests.conftest import ZYNC, Stack, run_zync
from zync_assets_tests.support.kills import kill_when
from zync_assets_tests.support.pool_data import PAIRS_SPEC, commit_raw, pair_rows

pytestmark = pytest.mark.integration

# PAIRS_SPEC's rules into one pool, and a copy of each order of a third topic (an input
# feeds one staging pool) into a second pool.
COPY_RULE = {
    "type": "stateless", "where": "op IN ('c', 'r')", "in": "order_log", "out": "order_copies",
    "sql": "named_struct('id', in.after:id::bigint) AS key, "
    "named_struct('id', in.after:id::bigint, 'customer', in.after:customer::string) AS value",
}  # fmt: skip


def two_pools_spec() -> str:
    spec = yaml.safe_load(PAIRS_SPEC % {"raw": "Raw", "staging": "Paired"})
    spec["inputs"].append({"topic": "order_log", "pool": "Raw"})
    spec["outputs"].append({"topic": "order_copies", "pool": "Copies"})
    spec["transforms"].append(COPY_RULE)
    return yaml.safe_dump(spec, sort_keys=False)


def rows_by_commit(spark: SparkSession, path: Path) -> dict[int, DataFrame]:
    """What each commit of the staging pool added: per version, its (kind, topic, offset,
    id) rows, where `id` is an output's order id (a done record's is its input's offset)."""

    def at(version: int) -> DataFrame:
        frame = spark.read.format("delta").option("versionAsOf", version).load(str(path))
        return frame.select(
            "kind", F.col("kafka.topic").alias("topic"), F.col("kafka.offset").alias("offset"),
            F.when(F.col("kind") == "output", F.expr("value:id::bigint")).alias("id"),
        )  # fmt: skip

    versions = [r.version for r in spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()]
    added = {}
    for version in sorted(versions):
        new = at(version) if version == 0 else at(version).exceptAll(at(version - 1))
        added[version] = new.cache()
    return added


def test_each_pass_commits_its_outputs_with_their_inputs_done_records(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three passes: pairs that arrive whole; orders whose payments come a pass later (they
    wait, done with neither); those payments with new pairs."""
    monkeypatch.setenv("ZYNC_LAKE", str(tmp_path / "lake"))
    spec_path = tmp_path / "pairs.yaml"
    spec_path.write_text(PAIRS_SPEC % {"raw": "Raw", "staging": "Staging"})
    spec = load_spec(spec_path)
    topic = F.col("kafka.topic")
    rounds = [
        (pair_rows(spark, 0, 500), {"orders": 500, "payments": 500}),
        (pair_rows(spark, 500, 500).where(topic == "orders"), {"orders": 1000, "payments": 500}),
        (pair_rows(spark, 500, 500).where(topic == "payments")
         .unionByName(pair_rows(spark, 1000, 500)), {"orders": 1500, "payments": 1500}),
    ]  # fmt: skip
    for run, (rows, ends) in enumerate(rounds, start=1):
        commit_raw(spark, "Raw", run, rows, ends)
        run_etl(spark, spec)

    commits = rows_by_commit(spark, tmp_path / "lake" / "Staging")
    paired_per_commit = []
    for version, rows in commits.items():
        outputs = {r.id for r in rows.where("kind = 'output'").collect()}
        done = {
            name: {r.offset for r in rows.where(f"kind = 'done' AND topic = '{name}'").collect()}
            for name in ("orders", "payments")
        }
        # Each output's two inputs are done in the output's own commit, and nothing else is.
        assert done["orders"] == done["payments"] == outputs, (version, outputs, done)
        paired_per_commit.append(len(outputs))
    assert sorted(paired_per_commit) == [500, 1000], paired_per_commit  # the waiting orders
    staged = spark.read.format("delta").load(str(tmp_path / "lake" / "Staging"))
    assert staged.where("kind = 'output'").count() == 1500  # once each, across the commits


def test_a_kill_after_a_passs_first_commit_costs_the_other_pool_a_rerun_not_a_record(
    spark, stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = tmp_path / "lake"
    monkeypatch.setenv("ZYNC_LAKE", str(lake))
    spec = tmp_path / "two_pools.yaml"
    spec.write_text(two_pools_spec())
    count = 20_000
    pairs = pair_rows(spark, 0, count)
    log = pairs.where(F.col("kafka.topic") == "orders").withColumn(
        "kafka", F.col("kafka").withField("topic", F.lit("order_log"))
    )
    ends = {"orders": count, "payments": count, "order_log": count}
    commit_raw(spark, "Raw", 1, pairs.unionByName(log), ends)
    pools = {name: lake / name / "_delta_log" for name in ("Paired", "Copies")}

    def one_pool_committed(_stdout: str) -> bool:
        return sum(1 for log in pools.values() if any(log.glob("*.json"))) == 1

    killed = kill_when([ZYNC, "etl", str(spec)], stack.env(ZYNC_LAKE=str(lake)),
                       one_pool_committed)  # fmt: skip
    assert killed.landed, f"the pass ended before one pool committed: {killed.stderr}"
    assert one_pool_committed(""), "the kill came after both pools' commits"

    done = run_zync("etl", str(spec), env=stack.env(ZYNC_LAKE=str(lake)), timeout=600)
    assert done.returncode == 0, done.stderr
    for pool, topics in (("Paired", ("orders", "payments")), ("Copies", ("order_log",))):
        staging = spark.read.format("delta").load(str(lake / pool))
        ids = [r.id for r in staging.where("kind = 'output'").selectExpr("value:id::bigint AS id")
               .orderBy("id").collect()]  # fmt: skip
        assert ids == list(range(count)), pool
        finished = staging.where(F.col("kind") == "done").where(F.col("kafka.topic").isin(*topics))
        marks = finished.select("kafka.topic", "kafka.offset")
        assert marks.count() == marks.distinct().count() == count * len(topics), pool
