"""`zync run`: ingest → ETL → to-kafka in one process, and a lake table in a loop of its
own beside them (--tables-loop); continuous and reported to Dagster. Exactly once under
kill -9 beside a second pipeline, compacting after every commit: test_soak.py."""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import IO

import pytest

from zync_assets.demo.invoices import batch_lines, produce_batch, reset
from zync_assets.kafka.registry import Registry
from zync_assets.lake.pools import TABLES_FOLDER
from zync_assets_tests.conftest import DEMO_TABLES, Stack, read_topic, rebuild_table
from zync_assets_tests.support.dagster_reads import latest_materialization

pytestmark = pytest.mark.integration

INVOICES = Path(__file__).parent.parent / "etl_specs" / "invoices.yaml"
# The invoice spec and a lake table of the invoices: --follow runs it in the tables lane.
INVOICES_TABLE = "tables:\n  - {name: invoices, source: Invoices, keys: [ID]}\n"


def with_table(tmp_path: Path) -> Path:
    spec = tmp_path / "invoices.yaml"
    spec.write_text(INVOICES.read_text() + INVOICES_TABLE)
    return spec


def table_ids(spark, lake: Path, table: str = "invoices") -> list[int]:
    rows = spark.read.format("delta").load(str(lake / TABLES_FOLDER / table)).select("ID")
    return sorted(r.ID for r in rows.collect())


def sink_table(stack: Stack) -> dict:
    from zync_assets.kafka.clients import topic_names

    if "NewInvoices" not in topic_names(stack.kafka):
        return {}
    table = rebuild_table(read_topic(stack, "NewInvoices"), "ID")
    return {k: (v["customer"], v["item"], v["invoice_status"]) for k, v in table.items()}


def holds_batch(stack: Stack, batch: int) -> bool:
    """The sink's table is the demo's after `batch`."""
    return sink_table(stack) == DEMO_TABLES[batch]


@pytest.fixture
def dagster_home(tmp_path: Path) -> Path:
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return home


def test_the_pipeline_service_carries_each_batch_reports_to_dagster_and_stops_cleanly(
    spark, stack: Stack, lake: Path, dagster_home: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """`zync run --follow` as the stack runs it (`zync stack up --follow`), its lake table
    in the lane beside the warehouse path."""
    from dagster import AssetKey, DagsterInstance, build_sensor_context

    from zync_assets.lake.lease import pipeline_feeding
    from zync_assets.orchestration.definitions import build_zync_definitions
    from zync_assets.specs.model import load_spec
    from zync_assets.stack.pipeline_service import launch_pipeline, pipeline_service
    from zync_assets.stack.services import stack_status

    reset(stack.kafka)
    registry = Registry(stack.registry_settings)
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    monkeypatch.setenv("ZYNC_TABLES_LOOP", "1")  # the lake table in a loop of its own
    spec = with_table(tmp_path)
    running = launch_pipeline(
        stack.home, [spec], stack.kafka.bootstrap_servers, registry.settings, ["Raw"]
    )()
    try:
        line = {s.name: s.line() for s in stack_status(stack.home)}["pipeline"]
        assert "running" in line and "zync run --follow" in line
        for batch in range(1, 5):
            produce_batch(batch, stack.kafka, registry)
            wait_until(f"batch {batch} in NewInvoices", running.log,
                       partial(holds_batch, stack, batch),
                       timeout=300 if batch == 1 else 120)  # the first waits on Spark's start  # fmt: skip
        feeder = pipeline_feeding("Raw")
        assert feeder is not None and feeder.pid == running.pid
        instance = DagsterInstance.from_config(str(dagster_home))
        defs = build_zync_definitions([load_spec(spec)])
        context = build_sensor_context(
            instance=instance, resources=defs.resources, definitions=defs
        )
        tick = defs.get_sensor_def("raw_Raw_kafka_sensor").evaluate_tick(context)
        assert not tick.run_requests and f"pid {running.pid}" in (tick.skip_message or ""), tick
    finally:
        assert pipeline_service(stack.home).stop()
    log = running.log.read_text()
    assert "stopping after the current commit" in log, log[-2000:]
    assert pipeline_feeding("Raw") is None  # the lease went with it
    assert pipeline_service(stack.home).running() is None

    latest = {
        name: latest_materialization(instance, AssetKey(name.split("/")))
        for name in (
            "raw/Raw", "staging/Staging", "done/Staging", "kafka/NewInvoices", "table/invoices",
        )
    }  # fmt: skip
    # The tables lane caught up before the pipeline stopped, and Dagster recorded it.
    assert table_ids(spark, lake) == sorted(DEMO_TABLES[4])
    assert "tables pass:" in log
    progress = latest["raw/Raw"].metadata["progress"].value
    produced = Counter(e["topic"] for b in range(1, 5) for e in batch_lines(b))
    assert progress == {topic: {"0": n} for topic, n in produced.items()}
    staging = latest["staging/Staging"].metadata
    assert staging["pending"].value == 0
    sent = latest["kafka/NewInvoices"].metadata
    assert sent["next_staging_offset"].value == 8 and sent["unsent"].value == 0
    checks = instance.event_log_storage.get_latest_asset_check_execution_by_key(
        [k for k in defs.resolve_asset_graph().asset_check_keys if k.name != "no_expired_events"]
    )
    outcomes = {key.name: record.status.value for key, record in checks.items()}
    assert outcomes and set(outcomes.values()) == {"SUCCEEDED"}, outcomes


def _read(file: IO[str]) -> str:
    file.seek(0)
    return file.read()


def wait_until(
    what: str, log: Path | IO[str], ready: Callable[[], bool], timeout: float = 120
) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, (
            f"no {what} in {timeout:.0f}s: "
            f"{(log.read_text() if isinstance(log, Path) else _read(log))[-2000:]}"
        )
        time.sleep(0.3)


def test_bad_invocations_fail_in_one_line_before_spark_starts(tmp_path: Path) -> None:
    from zync_assets_tests.conftest import run_zync

    env = {**os.environ, "ZYNC_HOME": str(tmp_path / "home"), "DAGSTER_HOME": ""}
    no_dagster = run_zync("run", str(INVOICES), "--dagster", env=env, timeout=60)
    assert no_dagster.returncode == 1
    assert no_dagster.stderr.strip().splitlines() == [
        "zync: error: --dagster: no Dagster instance (set DAGSTER_HOME, or start the stack "
        "with `zync stack up --dagster`)"
    ]
    empty = tmp_path / "empty.yaml"
    empty.write_text("outputs:\n  - {topic: Out, pool: Staging}\n")
    done = run_zync("run", str(empty), env=env, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"zync: error: {empty}: inputs: missing: list {{topic, pool}} entries"
    ]
    shaped = tmp_path / "shaped.yaml"  # the spec's shaper is the pipeline's, as for from-kafka
    shaped.write_text(INVOICES.read_text() + "shaper: missing.sql\n")
    no_shaper = run_zync("run", str(shaped), env=env, timeout=60)
    assert no_shaper.returncode == 1
    assert no_shaper.stderr.strip() == (
        f"zync: error: cannot read shaper {tmp_path / 'missing.sql'}: No such file or directory"
    )
