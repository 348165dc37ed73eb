"""ETL under kill -9 and with two concurrent `zync etl`: outputs and done records exactly once."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from zync_assets.etl.run import run_etl
from zync_assets.specs.model import load_spec
from zync_assets_tests.conftest import ZYNC, Stack, run_zync
from zync_assets_tests.support.kills import kill_when, writing
from zync_assets_tests.support.pool_data import (
    NO_OFFSETS,
    PAIRS_SPEC,
    append_pairs,
    append_transactions,
    transactions_spec,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def staged(spark, lake: Path) -> tuple[list[int], list[tuple], int]:
    staging = spark.read.format("delta").load(str(lake / "Staging"))
    outputs = sorted(
        r.o for r in staging.where("kind = 'output'").selectExpr("kafka.offset AS o").collect()
    )
    done = staging.where("kind = 'done'").select("kafka.topic", "kafka.offset")
    return outputs, done.collect(), done.distinct().count()


def kill_passes_then_finish(spec: Path, env: dict[str, str], staging: Path, kills: int):
    """`zync etl PAIRS_SPEC` killed -9 `kills` times while it writes the staging pool (its data
    files written, their commit not yet), then a pass that must succeed."""
    for _ in range(kills):
        killed = kill_when([ZYNC, "etl", str(spec)], env, writing(staging))
        assert killed.landed, f"no kill between a write and its commit: {killed.stderr}"
    done = run_zync("etl", str(spec), env=env, timeout=600)
    assert done.returncode == 0, done.stderr


@pytest.fixture
def orders(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    lake = tmp_path / "lake"
    monkeypatch.setenv("ZYNC_LAKE", str(lake))
    spec = tmp_path / "orders.yaml"
    spec.write_text(PAIRS_SPEC % {"raw": "Raw", "staging": "Staging"})
    append_pairs(spark, "Raw", 1, 0, 40_000)  # 40,000 orders + 40,000 payments
    return lake, spec


def test_kill_9_during_etl_then_rerun_gives_each_output_and_done_record_once(
    spark, stack: Stack, orders: tuple[Path, Path]
) -> None:
    """(On the cluster, the driver kill is test_ingest_faults' `[cluster]` case: the suite's
    time budget keeps one of the two.)"""
    lake, spec = orders
    env = stack.env(ZYNC_LAKE=str(lake))
    kill_passes_then_finish(spec, env, lake / "Staging", kills=1)
    (again,) = run_etl(spark, load_spec(spec))  # in-process: ZYNC_LAKE is this test's lake
    assert again.note == "nothing new to ETL"
    outputs, records, distinct = staged(spark, lake)
    assert outputs == list(range(40_000))
    assert len(records) == distinct == 80_000


def test_two_concurrent_etl_passes_never_duplicate(
    spark, stack: Stack, orders: tuple[Path, Path]
) -> None:
    lake, spec = orders
    env = stack.env(ZYNC_LAKE=str(lake))
    passes = [subprocess.Popen([ZYNC, "etl", str(spec)], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for _ in range(2)]  # fmt: skip
    for proc in passes:
        code = proc.wait(timeout=600)
        out, err = proc.communicate()
        if code != 0:
            assert code == 1 and "another ETL" in err, err
        else:
            assert "run 1" in out or "another ETL" in out, out
    outputs, records, distinct = staged(spark, lake)
    assert outputs == list(range(40_000))
    assert len(records) == distinct == 80_000


def test_kill_9_during_a_gated_pass_then_rerun_gives_each_transaction_once_and_whole(
    spark, stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gate: transaction` under kill -9: 3,000 source transactions of 10 events over two
    topics and their BEGIN/END records; each output and done record once, and each
    transaction's outputs in one commit, numbered together."""

    lake = tmp_path / "lake"
    monkeypatch.setenv("ZYNC_LAKE", str(lake))
    spec = tmp_path / "gated.yaml"
    spec.write_text(transactions_spec("Raw", "Staging", gated=True))
    append_transactions(spark, "Raw", 1, 0, 3_000, 5, NO_OFFSETS)
    env = stack.env(ZYNC_LAKE=str(lake))
    kill_passes_then_finish(spec, env, lake / "Staging", kills=1)
    outputs, records, distinct = staged(spark, lake)
    assert outputs == list(range(30_000))
    assert len(records) == distinct == 30_000 + 6_000  # every event, BEGIN and END once
    staging = spark.read.format("delta").load(str(lake / "Staging")).where("kind = 'output'")
    spans = staging.groupBy("txn").agg(
        F.count("*").alias("n"), F.countDistinct("run").alias("runs"),
        (F.max("kafka.offset") - F.min("kafka.offset")).alias("width"),
    )  # fmt: skip
    assert spans.where("n != 10 OR runs != 1 OR width != 9").count() == 0
    assert spans.count() == 3_000
