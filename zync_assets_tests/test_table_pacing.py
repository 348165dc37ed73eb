"""A following pipeline's lake tables take a pass's share, not the whole pass: as long as
the warehouse path before them (at least TABLES_FLOOR_S), one table per worker whatever
the share, those applied longest ago first; the rest wait for the next pass, and every
table still ends equal to its events. A single pass applies them all. Real Kafka, the
registry, Spark and Delta."""

from __future__ import annotations

from pathlib import Path

import pytest

from zync_assets.kafka.registry import Registry
from zync_assets.pipeline import run as pipeline_run
from zync_assets.pipeline.run import Pipeline as StagePipeline
from zync_assets_tests.conftest import Stack
from zync_assets_tests.test_etl import Pipeline
from zync_assets_tests.test_table_failures import Recorded, event, rows

pytestmark = pytest.mark.integration

NAMES = ("first", "second", "third")
SPEC = "inputs:\n  - {topic: $Items, pool: Raw}\ntables:\n" + "".join(
    f"  - {{name: {name}, source: $Items, keys: [id]}}\n" for name in NAMES
)


def test_paced_tables_take_turns_oldest_first_and_all_arrive(
    spark, stack: Stack, tmp_path: Path, lake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No share at all (no floor, and no warehouse path in these passes: the ingest runs
    # apart): each pass applies its one worker's table, the one applied longest ago, and
    # says how many wait.
    monkeypatch.setattr(pipeline_run, "TABLES_FLOOR_S", 0.0)
    pipe = Pipeline(spark, stack, tmp_path, SPEC, ["Items"])
    registry = Registry(stack.registry_settings)
    paced = StagePipeline(spark, [pipe.spec], stack.kafka, registry, stages=("tables",),
                          table_workers=1, paced_tables=True)  # fmt: skip
    reporter = Recorded()
    pipe.send("Items", [event(1, 10), event(2, 20)])
    pipe.ingest()
    turns = []
    for _ in NAMES:
        result = paced.pass_once(reporter)
        turns.append(([r.table for r in result.tabled], result.tables_waiting))
    assert [applied for applied, _ in turns] == [["first"], ["second"], ["third"]]
    assert [waiting for _, waiting in turns] == [2, 1, 0]
    assert all(rows(spark, name) == [(1, 10), (2, 20)] for name in NAMES)

    # New events for all three: the first to go is the one that waited longest. Then
    # more, with `first` just applied: `second` and `third` go before it (in the spec's
    # order, `first` would again).
    pipe.send("Items", [event(3, 30)])
    pipe.ingest()
    assert [r.table for r in paced.pass_once(reporter).tabled] == ["first"]
    pipe.send("Items", [event(4, 40)])
    pipe.ingest()
    nexts = [[r.table for r in paced.pass_once(reporter).tabled] for _ in NAMES]
    assert nexts == [["second"], ["third"], ["first"]]
    assert paced.pass_once(reporter).tabled == []  # nothing left: no table pass at all
    assert all(rows(spark, name) == [(1, 10), (2, 20), (3, 30), (4, 40)] for name in NAMES)

    # Unpaced (a single `zync run`, the tables' own loop): every table in the one pass.
    pipe.send("Items", [event(5, 50)])
    whole = StagePipeline(spark, [pipe.spec], stack.kafka, registry,
                          stages=("ingest", "tables"), table_workers=1)  # fmt: skip
    result = whole.pass_once(reporter)
    assert sorted(r.table for r in result.tabled) == sorted(NAMES)
    assert result.tables_waiting == 0
