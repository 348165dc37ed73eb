"""Pool upkeep against real Delta: compaction beside a live writer, writer states carried
past Delta's own log cleanup."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from zync_assets.core.errors import ZyncError
from zync_assets.etl.state import read_state
from zync_assets.lake.commits import metadata
from zync_assets.lake.delta_writes import append_once
from zync_assets.lake.progress import commit_metadata, read_progress
from zync_assets.pipeline.maintenance import Maintenance, MaintenancePolicy

pytestmark = pytest.mark.integration


def ingest_run(spark, path: str, run: int, rows: int = 10) -> None:
    """What an ingest commit writes: rows, and the progress in the same commit."""
    frame = spark.range(run * rows, (run + 1) * rows).selectExpr("id", f"{run} AS run")
    progress = {"topic": {0: (run + 1) * rows}}
    append_once(frame, path, "zync-ingest/Raw", run, commit_metadata(run, f"a{run}", progress))


def etl_run(spark, path: str, spec: str, run: int) -> None:
    frame = spark.range(1).selectExpr(f"'{spec}' AS spec", f"{run} AS run")
    meta = metadata("zync_etl", spec=spec, run=run, cursors={}, next={"Out": run})
    append_once(frame, path, f"zync-etl/{spec}/Staging", run, meta)


def test_compaction_beside_a_writer_loses_and_duplicates_nothing(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "Raw")
    ingest_run(spark, path, 0)
    runs = 20

    def write() -> None:
        for r in range(1, runs):
            ingest_run(spark, path, r)

    writer = threading.Thread(target=write)
    upkeep = Maintenance(spark, MaintenancePolicy(compact_every=1))
    writer.start()
    compacted = 0
    while writer.is_alive():
        compacted += upkeep.maintain(path, vacuum=False).files_removed
    writer.join()
    final = upkeep.maintain(path, vacuum=False)

    rows = spark.read.format("delta").load(path)
    assert rows.count() == rows.select("id").distinct().count() == runs * 10
    assert read_progress(path).run == runs - 1
    assert read_progress(path).offsets == {"topic": {0: runs * 10}}
    assert compacted + final.files_removed > runs  # it did compact while the writer wrote
    files = [p for p in Path(path).rglob("*.parquet") if "_delta_log" not in p.parts]
    assert len(spark.read.format("delta").load(path).inputFiles()) <= 2 < len(files)


def test_a_pool_is_compacted_every_n_commits(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "Raw")
    upkeep = Maintenance(spark, MaintenancePolicy(compact_every=5))
    for run in range(4):
        ingest_run(spark, path, run)
        assert upkeep.run_due(path) is None
    ingest_run(spark, path, 4)
    done = upkeep.run_due(path)
    assert done is not None and done.files_removed >= 5 and done.carried == 1
    assert upkeep.run_due(path) is None  # the carry counts as the last maintenance
    assert len(spark.read.format("delta").load(path).inputFiles()) == 1


def expire_log_before(path: str, version: int) -> None:
    """What Delta's log cleanup does once commits are older than delta.logRetentionDuration:
    delete the commit files a checkpoint at `version` makes unnecessary. (Its age rule is
    Delta's business, not under test: the commits here are minutes old.)"""
    for file in (Path(path) / "_delta_log").glob("*.json"):
        if int(file.stem) < version:
            file.unlink()


def test_a_carry_keeps_an_idle_writers_state_after_log_retention(spark, tmp_path: Path) -> None:
    carried, control = str(tmp_path / "Staging"), str(tmp_path / "Unmaintained")
    for path in (carried, control):
        etl_run(spark, path, "idle", 1)
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = 3)")
        for run in range(1, 4):  # a checkpoint at version 3
            etl_run(spark, path, "busy", run)
    Maintenance(spark).maintain(carried, compact=False, vacuum=False)  # the periodic carry
    for path in (carried, control):
        for run in range(4, 7):
            etl_run(spark, path, "busy", run)
        assert (Path(path) / "_delta_log" / f"{3:020d}.checkpoint.parquet").exists()
        expire_log_before(path, 3)
        assert spark.read.format("delta").load(path).count() == 7  # still a sound table

    assert read_state(carried, "idle").run == 1
    assert read_state(carried, "idle").next_offsets == {"Out": 1}
    assert read_state(carried, "busy").run == read_state(control, "busy").run == 6
    assert read_state(carried, "new").run == 0  # the carry says it never had a state
    with pytest.raises(ZyncError, match="removed by log retention"):
        read_state(control, "idle")  # not a silent fresh start at offset 0


def view_run(spark, path: str, run: int, rows: list[str]) -> None:
    """An ETL commit of a pool with views: `rows` are SQL select lists of staging rows."""
    frame = spark.sql(" UNION ALL ".join(f"SELECT {row}" for row in rows))
    meta = metadata("zync_etl", spec="s", run=run, cursors={}, next={}, views=["v", "w"])
    append_once(frame, path, "zync-etl/s/Staging", run, meta)


def staging_row(kind: str, view: str, run: int, offset: int, key: int, n: int | None) -> str:
    value = "CAST(NULL AS STRUCT<n: INT>)" if n is None else f"named_struct('n', {n})"
    return (
        f"'{kind}' AS kind, '{view}' AS status, {run}L AS run, "
        f"named_struct('topic', 'a', 'partition', 0, 'offset', {offset}L) AS kafka, "
        f"named_struct('id', {key}) AS key, {value} AS value"
    )


def test_maintenance_keeps_only_each_view_rows_newest_version(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "Staging")
    view_run(spark, path, 1, [
        staging_row("view", "v", 1, 10, key=1, n=1), staging_row("view", "v", 1, 11, key=2, n=1),
        staging_row("view", "w", 1, 10, key=1, n=1),  # another view's row 1: its own
        staging_row("output", "v", 1, 0, key=1, n=1),  # not a row version: never touched
    ])  # fmt: skip
    view_run(spark, path, 2, [staging_row("view", "v", 2, 12, key=1, n=2)])
    view_run(spark, path, 3, [staging_row("view", "v", 3, 13, key=1, n=None)])  # deleted

    done = Maintenance(spark).maintain(path, vacuum=False)

    assert done.pruned == 2 and "deleted 2 superseded view row versions" in done.describe()
    left = (
        spark.read.format("delta")
        .load(path)
        .selectExpr("kind", "status", "run", "key.id", "value.n")
    )
    assert sorted(tuple(r) for r in left.collect()) == [
        ("output", "v", 1, 1, 1),
        ("view", "v", 1, 2, 1),  # row 2's only version
        ("view", "v", 3, 1, None),  # row 1's newest: its delete
        ("view", "w", 1, 1, 1),
    ]
    assert read_state(path, "s").run == 3  # the ETL state is the pass's, as before
    assert Maintenance(spark).maintain(path, vacuum=False).pruned == 0
