"""The ETL run's invariants (etl/checks.py), which Dagster shows as asset checks: each one
fails on the pool it guards against, not only passes on a good one."""

from __future__ import annotations

from pathlib import Path

import pytest

from zync_assets.etl.checks import run_checks
from zync_assets.etl.run import EtlResult
from zync_assets.etl.state import EtlState
from zync_assets.lake.pools import pool_path

pytestmark = pytest.mark.integration

PREVIOUS = EtlState(run=1, cursors={"orders": {0: 10, 1: 4}}, next_offsets={"out": 5})


def write_pool(spark, pool: str, rows: list[tuple[str, str, int, int, int]]) -> None:
    """Rows (kind, topic, partition, offset, run) in the layout `zync etl` writes."""
    frame = spark.createDataFrame(rows, "kind string, t string, p int, o long, run long")
    frame.selectExpr(
        "kind",
        "named_struct('topic', t, 'partition', p, 'offset', o, "
        "'timestamp', current_timestamp()) AS kafka",
        "run",
    ).write.format("delta").mode("append").partitionBy("kind").save(pool_path(pool))


def checks(spark, pool: str) -> dict[str, tuple[bool, str]]:
    result = EtlResult("spec", pool, run=2, previous=PREVIOUS, cursors={"orders": {0: 13, 1: 4}})
    return {c.name: (c.passed, c.detail) for c in run_checks(spark, result)}


def history() -> list[tuple[str, str, int, int, int]]:
    """Run 1's outputs 0..4 and done records below the cursors, one of them twice (a done
    record below the previous cursors is not this run's to check)."""
    return [
        *(("output", "out", 0, o, 1) for o in range(5)),
        *(("done", "orders", 0, o, 1) for o in range(10)),
        ("done", "orders", 0, 3, 1),
        ("done", "orders", 1, 3, 1),
    ]


def test_a_good_run_passes_every_check(spark, lake: Path) -> None:
    write_pool(spark, "Good", [
        *history(),
        *(("output", "out", 0, o, 2) for o in (5, 6, 7)),
        *(("done", "orders", 0, o, 2) for o in (10, 11, 12)),
        ("done", "orders", 1, 10, 2),  # the same offset in another partition: another event
    ])  # fmt: skip
    assert checks(spark, "Good") == {
        "dense_output_offsets": (True, "dense"),
        "no_duplicate_done_records": (True, "unique"),
        "cursors_never_move_back": (True, "forward"),
    }


def test_a_gap_or_a_doubled_output_offset_fails_dense_output_offsets(spark, lake: Path) -> None:
    write_pool(spark, "Gap", [*history(), *(("output", "out", 0, o, 2) for o in (5, 5, 7))])
    assert checks(spark, "Gap")["dense_output_offsets"] == (
        False, "out: 3 rows, offsets 5..7, expected from 5",
    )  # fmt: skip


def test_a_second_done_record_for_an_event_fails_no_duplicate_done_records(
    spark, lake: Path
) -> None:
    write_pool(spark, "Twice", [
        *history(),
        *(("done", "orders", 0, o, 2) for o in (10, 11, 11, 12)),
    ])  # fmt: skip
    assert checks(spark, "Twice")["no_duplicate_done_records"] == (
        False, "1 events with more than one done record",
    )  # fmt: skip
