"""`zync run`: ingest → ETL → to-kafka in one process, and a lake table in a loop of its
own beside them (--tables-loop); continuous, reported to Dagster, exactly once under kill -9 and beside a
second pipeline."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import tempfile
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
from zync_assets_tests.conftest import DEMO_TABLES, ZYNC, Stack, read_topic, rebuild_table
from zync_assets_tests.support.dagster_reads import latest_materialization

pytestmark = pytest.mark.integration

INVOICES = Path(__file__).parent.parent / "etl_specs" / "invoices.yaml"
# The invoice spec and a lake table of the invoices: --follow runs it in the tables lane.
INVOICES_TABLE = "tables:\n  - {name: invoices, source: Invoices, keys: [ID]}\n"


def with_table(tmp_path: Path) -> Path:
    spec = tmp_path / "invoices.yaml"
    spec.write_text(INVOICES.read_text() + INVOICES_TABLE)
    return spec


# Two tables of one pool: each pass applies both at once (pipeline/run.py, TABLE_WORKERS).
TWO_TABLES = INVOICES_TABLE + "  - {name: statuses, source: InvoiceStatus, keys: [ID]}\n"


def with_two_tables(tmp_path: Path) -> Path:
    spec = tmp_path / "invoices.yaml"
    spec.write_text(INVOICES.read_text() + TWO_TABLES)
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


def start_pipeline(env: dict[str, str], err: IO[str], spec: Path) -> subprocess.Popen:
    """`zync run --follow --tables-loop` on `spec`, compacting after every commit; its
    stderr to `err` (a file, not a pipe: a pipe nobody reads stalls a chatty command)."""
    return subprocess.Popen(
        [ZYNC, "run", str(spec), "--follow", "--tables-loop", "--interval", "0.2s", "--no-dagster",
         "--compact-every", "1"],
        env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
    )  # fmt: skip


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


def _ready_or_gone(pipeline: subprocess.Popen, err: IO[str]) -> bool:
    return "spark ready" in _read(err) or pipeline.poll() is not None


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


@pytest.mark.slow
def test_kill_9_and_a_second_pipeline_never_duplicate_or_lose_an_output(
    spark, stack: Stack, lake: Path, tmp_path: Path
) -> None:
    reset(stack.kafka)
    env = stack.env(ZYNC_LAKE=str(lake))
    spec = with_two_tables(tmp_path)
    rng = random.Random(17)
    pairs = 0
    # Both compact after every commit: compaction races both writers and the kills.
    with tempfile.TemporaryFile("w+") as second_err:
        second = start_pipeline(env, second_err, spec)
        for _round in range(2):  # the first pipeline killed at a random point of its work
            with tempfile.TemporaryFile("w+") as err:
                first = start_pipeline(env, err, spec)
                wait_until("spark ready", err, partial(_ready_or_gone, first, err))
                for _ in range(3):
                    produce_pairs(stack, range(10_000 + pairs, 10_000 + pairs + 40))
                    pairs += 40
                    time.sleep(rng.uniform(1, 4))
                assert first.poll() is None, _read(err)  # the kill lands in a live pipeline
                os.killpg(first.pid, signal.SIGKILL)
                first.wait()
        second.send_signal(signal.SIGTERM)  # it stops at its next stage: each commits whole
        assert second.wait(timeout=300) == 0, _read(second_err)
    finish = subprocess.run(
        [ZYNC, "run", str(spec), "--no-dagster", "--compact-every", "1"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert finish.returncode == 0, finish.stderr

    # Compaction raced the writers and the kills. Raw's every commit is a file per topic;
    # Staging gets a second file before its upkeep only when a race or a kill lands
    # between them (compaction beside an ETL writer: test_maintenance.py).
    history = spark.sql(f"DESCRIBE HISTORY delta.`{lake / 'Raw'}`")
    assert history.where("operation = 'OPTIMIZE'").count() > 0
    staging = spark.read.format("delta").load(str(lake / "Staging"))
    outputs = sorted(
        r.o for r in staging.where("kind = 'output'").selectExpr("kafka.offset AS o").collect()
    )
    assert outputs == list(range(pairs))
    done = staging.where("kind = 'done'").select("kafka.topic", "kafka.offset")
    assert done.count() == done.distinct().count() == 2 * pairs
    received = read_topic(stack, "NewInvoices")
    assert sorted(r.value["ID"] for r in received) == list(range(10_000, 10_000 + pairs))
    # The tables lane was killed with the rest, its two tables' passes running at once:
    # each holds each invoice (status) once.
    assert table_ids(spark, lake) == list(range(10_000, 10_000 + pairs))
    assert table_ids(spark, lake, "statuses") == list(range(10_000, 10_000 + pairs))


def produce_pairs(stack: Stack, ids: range) -> None:
    """An invoice and its status per id, in the demo's schemas (Debezium creates)."""
    from zync_assets.demo.invoices import schema
    from zync_assets.kafka.clients import ensure_topic
    from zync_assets.kafka.produce import Line, encode_lines, send

    registry = Registry(stack.registry_settings)
    rows = {
        "Invoices": [({"ID": i}, {"ID": i, "customer": f"c{i}", "item": "tea"}) for i in ids],
        "InvoiceStatus": [({"ID": i}, {"ID": i, "InvoiceID": i, "status": "new"}) for i in ids],
    }
    for topic, pairs in rows.items():
        lines = [
            Line(
                n,
                key,
                {
                    "before": None,
                    "after": after,
                    "op": "c",
                    "ts_ms": 1700000000000,
                    "source": {
                        "connector": "postgresql",
                        "db": "shop",
                        "table": topic,
                        "lsn": after["ID"],
                    },
                },
            )
            for n, (key, after) in enumerate(pairs)
        ]
        messages, _, _ = encode_lines(
            topic, lines, registry, schema(f"{topic}-key.avsc"), schema(f"{topic}-value.avsc")
        )
        ensure_topic(stack.kafka, topic)
        send(stack.kafka, topic, messages)


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
