"""The product as users meet it: `dagster dev` (webserver + daemon) on the invoice spec.

Nothing here materializes anything: the daemon's sensors start every run. One Dagster
for the whole module, on the session's Kafka and registry, with its own lake.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dagster import AssetKey, DagsterInstance, DagsterRun, DagsterRunStatus, RunsFilter

from zync_assets.demo.invoices import produce_batch, reset
from zync_assets.demo.via_dagster import open_instance
from zync_assets.kafka.registry import Registry
from zync_assets.orchestration.raw import ACTIVE_RUN_STATUSES
from zync_assets.orchestration.sinks import SINK_CHECK
from zync_assets.stack.dagster import (
    dagster_home,
    dagster_service,
    dagster_url,
    graphql,
    launch_dagster,
)
from zync_assets.stack.process import Running
from zync_assets.stack.services import CdcPorts, stack_status
from zync_assets_tests.conftest import Stack, free_port, read_topic, rebuild_table
from zync_assets_tests.sockets import is_loopback, listening
from zync_assets_tests.support.dagster_reads import (
    latest_materialization,
    latest_materialization_entry,
    run_by_id,
    why_failed,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHECKOUT = Path(__file__).resolve().parent.parent
SENSORS = {"raw_Raw_kafka_sensor", "zync_automation"}
FLOW_TIMEOUT_S = 420.0


@dataclass(frozen=True)
class DagsterUI:
    url: str
    instance: DagsterInstance
    lake: Path


@pytest.fixture(scope="module")
def dagster_ui(
    stack: Stack, spark_server: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DagsterUI]:
    """Dagster as `zync stack up --dagster` runs it: its runs share the stack's Spark
    Connect server."""
    state = tmp_path_factory.mktemp("dagster-state")
    lake = state / "lake"
    port = free_port()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ZYNC_LAKE", str(lake))
        env.setenv("ZYNC_SPECS", str(CHECKOUT / "etl_specs"))
        env.setenv("ZYNC_SENSOR_INTERVAL", "3s")
        reset(stack.kafka)  # the demo's topics; its pools live in the fresh lake
        try:
            kafka = stack.kafka.bootstrap_servers
            launch_dagster(state, port, kafka, stack.registry_settings, spark_server)()
            yield DagsterUI(dagster_url(port), open_instance(dagster_home(state)), lake)
        finally:
            dagster_service(state).stop()


def wait_until(what: str, ready: Callable[[], bool], ui: DagsterUI, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            runs = [(r.run_id[:8], r.status.value, r.tags.get("dagster/sensor_name"))
                    for r in ui.instance.get_runs()]  # fmt: skip
            pytest.fail(f"{what} within {timeout:.0f}s; Dagster runs so far: {runs}")
        time.sleep(2)


def sensor_runs(instance: DagsterInstance) -> list:
    """Every run but the hourly pool_maintenance schedule's (it may fire mid-test)."""
    return [r for r in instance.get_runs() if r.job_name != "pool_maintenance"]


def checks_sinks_only(run: DagsterRun) -> bool:
    """A run of the sink checks alone, which the automation sensor starts once a minute by
    design (orchestration/sinks.py): it materializes nothing and reads no Kafka offset."""
    checks = run.asset_check_selection or set()
    return not run.asset_selection and bool(checks) and all(c.name == SINK_CHECK for c in checks)


def data_runs(instance: DagsterInstance) -> list:
    """The sensors' runs that materialize something: neither maintenance nor sink checks."""
    return [r for r in sensor_runs(instance) if not checks_sinks_only(r)]


def pool_rows(spark, lake: Path, pool: str, where: str = "true") -> int:
    from zync_assets.lake.pools import pool_exists

    path = str(lake / pool)
    return spark.read.format("delta").load(path).where(where).count() if pool_exists(path) else 0


def flow_batch(stack: Stack, spark, ui: DagsterUI, batch: int, raw: int, outputs: int) -> None:
    """Produce `batch` and wait, by looking only at the pools and the topic, until the
    raw pool holds `raw` events and NewInvoices `outputs` records."""
    produce_batch(batch, stack.kafka, Registry(stack.registry_settings))
    wait_until(
        f"batch {batch}: raw/Raw did not reach {raw} events",
        lambda: pool_rows(spark, ui.lake, "Raw") == raw, ui, FLOW_TIMEOUT_S,
    )  # fmt: skip
    wait_until(
        f"batch {batch}: NewInvoices did not reach {outputs} records",
        lambda: len(read_topic(stack, "NewInvoices", decode=False)) >= outputs
        if "NewInvoices" in stack_topics(stack) else False,
        ui, FLOW_TIMEOUT_S,
    )  # fmt: skip


def stack_topics(stack: Stack) -> set[str]:
    from zync_assets.kafka.clients import cluster_metadata

    return set(cluster_metadata(stack.kafka).topics)


@pytest.fixture(scope="module")
def first_batch(stack: Stack, spark, dagster_ui: DagsterUI) -> DagsterUI:
    flow_batch(stack, spark, dagster_ui, batch=1, raw=4, outputs=2)
    return dagster_ui


def test_a_new_batch_reaches_raw_staging_and_the_output_topic_with_no_manual_run(
    stack: Stack, spark, first_batch: DagsterUI
) -> None:
    ui = first_batch  # batch 1 produced; raw/Raw holds its 4 events, NewInvoices 2 records
    assert pool_rows(spark, ui.lake, "Staging", "kind = 'output'") == 2
    assert pool_rows(spark, ui.lake, "Staging", "kind = 'done'") == 4
    table = rebuild_table(read_topic(stack, "NewInvoices"), "ID")
    assert {k: (v["customer"], v["invoice_status"]) for k, v in table.items()} == {
        100: ("Alice", "pending"), 101: ("Bob", "pending"),
    }  # fmt: skip
    runs = sensor_runs(ui.instance)
    assert {r.tags.get("dagster/sensor_name") for r in runs} <= SENSORS  # no run by hand
    # One run carried the newest events from Kafka to the output topic: the Kafka sensor's.
    keys = (["raw", "Raw"], ["staging", "Staging"], ["done", "Staging"], ["kafka", "NewInvoices"])
    carriers = {latest_materialization_entry(ui.instance, AssetKey(k)).run_id for k in keys}
    assert len(carriers) == 1, carriers
    carrier = run_by_id(ui.instance, carriers.pop())
    assert carrier.tags.get("dagster/sensor_name") == "raw_Raw_kafka_sensor"
    failed = [r for r in runs if r.status not in [*ACTIVE_RUN_STATUSES, DagsterRunStatus.SUCCESS]]
    assert not failed, [why_failed(ui.instance, r) for r in failed]


def test_no_new_data_launches_no_run_across_several_sensor_ticks(
    dagster_ui: DagsterUI,
) -> None:
    ui = dagster_ui
    instance = ui.instance
    wait_until("runs still active", lambda: not instance.get_runs(RunsFilter(statuses=ACTIVE_RUN_STATUSES)),
               ui, FLOW_TIMEOUT_S)  # fmt: skip

    def ticks_since(since: float) -> dict[str, Sequence[Any]]:
        states = [s for s in instance.all_instigator_state() if s.instigator_name in SENSORS]
        return {
            s.instigator_name: instance.get_ticks(
                s.instigator_origin_id, s.selector_id, after=since
            )
            for s in states
        }

    def ticked(since: float, times: int) -> bool:
        ticks = ticks_since(since)
        return len(ticks) == 2 and all(len(v) >= times for v in ticks.values())

    # Both sensors have evaluated once after the last materializations (what that tick
    # started, if anything, has run) before the count is taken.
    settled = time.time()
    wait_until("both sensors ticked after the last run", lambda: ticked(settled, 1), ui, 120)
    wait_until("runs still active", lambda: not instance.get_runs(RunsFilter(statuses=ACTIVE_RUN_STATUSES)),
               ui, FLOW_TIMEOUT_S)  # fmt: skip
    before = {r.run_id for r in data_runs(instance)}
    since = time.time()

    wait_until("both sensors ticked three times", lambda: ticked(since, 3), ui, 120)
    started = [r for r in data_runs(instance) if r.run_id not in before]
    assert not started, [(r.run_id[:8], r.tags.get("dagster/sensor_name"), r.asset_selection,
                          r.asset_check_selection) for r in started]  # fmt: skip
    for name, ticks in ticks_since(since).items():
        launched = [run_by_id(instance, run_id) for tick in ticks for run_id in tick.run_ids]
        assert all(checks_sinks_only(run) for run in launched), (name, launched)


def test_the_ui_shows_the_lineage_and_the_staging_pools_metadata(first_batch: DagsterUI) -> None:
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    chromium = os.environ.get("ZYNC_CHROMIUM") or shutil.which("chromium")
    if chromium is None and os.environ.get("ZYNC_SKIP_CHROMIUM"):
        pytest.skip("ZYNC_SKIP_CHROMIUM is set and there is no chromium")
    assert chromium, "Debian's chromium is missing: run scripts/install.sh"
    ui = first_batch
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True)
        try:
            graphql(ui.url, "mutation { setNuxSeen }")  # no newsletter dialog over the graph
            page = browser.new_page(viewport={"width": 1800, "height": 900})
            check_lineage(page, ui.url)
            check_staging_metadata(page, ui)
        finally:
            browser.close()


_EDGES_QUERY = "{ assetNodes { assetKey { path } dependencyKeys { path } } }"


def check_lineage(page, url: str) -> None:
    groups = ("kafka", "raw", "staging", "done", "kafka_out", "tables")
    expanded = ",".join(f"global@global:{g}" for g in groups)  # the UI keeps this in the URL
    page.goto(f"{url}/asset-groups?expanded={expanded}", wait_until="networkidle")
    # The graph lays itself out after the page loads: wait for its last node, then count.
    page.locator('[data-tooltip="invoice_status_history"]').first.wait_for(timeout=60_000)
    for label in ("Invoices", "InvoiceStatus", "Raw", "NewInvoices", "invoice_status_history"):
        assert page.locator(f'[data-tooltip="{label}"]').count() == 1, label
    for group in groups:
        assert page.locator(f'[data-tooltip="{group}"]').count() == 1, group
    assert page.locator('[data-tooltip="Staging"]').count() == 2  # staging/ and done/Staging
    # The edges the graph draws, as the page's own GraphQL endpoint serves them.
    answer = page.evaluate(
        """async (query) => (await (await fetch('/graphql', {method: 'POST',
            headers: {'Content-Type': 'application/json'}, body: JSON.stringify({query})}))
            .json()).data.assetNodes""",
        _EDGES_QUERY,
    )
    edges = {
        ("/".join(dep["path"]), "/".join(node["assetKey"]["path"]))
        for node in answer
        for dep in node["dependencyKeys"]
    }
    assert edges == {
        ("kafka/Invoices", "raw/Raw"), ("kafka/InvoiceStatus", "raw/Raw"),
        ("raw/Raw", "staging/Staging"), ("raw/Raw", "done/Staging"),
        ("staging/Staging", "kafka/NewInvoices"), ("done/Staging", "kafka/NewInvoices"),
        # etl_specs/shop.yaml, the real chain's spec (the demo's)
        ("kafka/shop.public.invoices", "raw/ShopRaw"),
        ("kafka/shop.public.invoice_status", "raw/ShopRaw"),
        ("raw/ShopRaw", "staging/ShopStaging"), ("raw/ShopRaw", "done/ShopStaging"),
        ("staging/ShopStaging", "kafka/shop_invoices"),
        ("done/ShopStaging", "kafka/shop_invoices"),
        ("raw/ShopRaw", "table/invoices"), ("raw/ShopRaw", "table/invoice_status_history"),
    }  # fmt: skip
    # The docs' picture (docs/img/lineage.png) only when asked: a test run writes no
    # tracked file. ZYNC_LINEAGE_PNG=docs/img/lineage.png scripts/test.sh -k shows_the_lineage
    if picture := os.environ.get("ZYNC_LINEAGE_PNG"):
        page.wait_for_timeout(1000)
        page.screenshot(path=str(CHECKOUT / picture))


def check_staging_metadata(page, ui: DagsterUI) -> None:
    """The asset page shows the latest materialization's metadata, as the daemon stored it."""
    latest = latest_materialization(ui.instance, AssetKey(["staging", "Staging"]))
    stored = {k: v.value for k, v in latest.metadata.items()}
    page.goto(f"{ui.url}/assets/staging/Staging", wait_until="networkidle")
    for name in ("cursors", "pending", "outputs", "raw_offsets_seen", "lag"):
        page.get_by_text(name, exact=True).first.wait_for(timeout=30_000)
    shown = page.inner_text("body")
    # JSON metadata: the UI prints it indented, as json.dumps(indent=2) does.
    for name in ("cursors", "raw_offsets_seen"):
        assert isinstance(stored[name], dict), stored  # typed, not JSON text
        assert json.dumps(stored[name], indent=2) in shown, (name, shown)


def test_every_service_of_the_stack_listens_on_loopback_only(
    stack: Stack, cdc_ports: CdcPorts, first_batch: DagsterUI
) -> None:
    """Kafka and its controller, the registry, the Spark Connect server (and its driver's
    own ports), both PostgreSQL clusters, Kafka Connect and Dagster (webserver, daemon and
    code server): no port reachable from another machine."""
    running: dict[str, Running | None] = {
        s.name: s.running for s in stack_status(stack.home) if s.running is not None
    }
    running["dagster"] = dagster_service(first_batch.lake.parent).running()
    assert {"kafka", "registry", "spark", "pg-source", "pg-warehouse", "connect", "dagster"} <= {
        name for name, r in running.items() if r is not None
    }
    for name, service in running.items():
        assert service is not None
        ports = listening(service.pid)
        assert ports, f"{name} listens on nothing?"
        exposed = [(address, port) for address, port in ports if not is_loopback(address)]
        assert not exposed, f"{name} listens beyond loopback: {exposed}"


def test_a_killed_run_worker_does_not_stop_its_pool(stack: Stack, first_batch: DagsterUI) -> None:
    """kill -9 of a run's worker (what the OOM killer does): Dagster's code server sees
    its child die and fails the run; the pool's sensor then starts the next run, which
    carries the batch: the sink ends up exactly as the demo's."""
    import re
    import signal

    from dagster import DagsterEventType

    from zync_assets.orchestration.raw import POOL_TAG
    from zync_assets_tests.conftest import DEMO_TABLES

    ui = first_batch
    instance = ui.instance
    wait_until("runs still active", lambda: not instance.get_runs(RunsFilter(statuses=ACTIVE_RUN_STATUSES)),
               ui, FLOW_TIMEOUT_S)  # fmt: skip
    produce_batch(2, stack.kafka, Registry(stack.registry_settings))
    killed: list[str] = []

    def worker_pid(run_id: str) -> int | None:
        for entry in instance.all_logs(run_id, of_type=DagsterEventType.ENGINE_EVENT):
            if found := re.search(r"Started process for run \(pid: (\d+)\)", entry.message):
                return int(found.group(1))
        return None

    def kill_a_worker() -> bool:
        for run in instance.get_runs(RunsFilter(tags={POOL_TAG: "Raw"},
                                                statuses=ACTIVE_RUN_STATUSES)):  # fmt: skip
            if (pid := worker_pid(run.run_id)) is not None:
                os.kill(pid, signal.SIGKILL)
                killed.append(run.run_id)
                return True
        return False

    deadline = time.monotonic() + FLOW_TIMEOUT_S
    while not kill_a_worker():
        assert time.monotonic() < deadline, "no run started for batch 2"
        time.sleep(0.05)
    wait_until("the killed run is marked failed",
               lambda: run_by_id(instance, killed[0]).status == DagsterRunStatus.FAILURE,
               ui, 120)  # fmt: skip
    told = " ".join(e.message for e in instance.all_logs(killed[0]))
    assert "terminated by signal 9" in told, told  # the code server said what happened

    def sink() -> dict:
        table = rebuild_table(read_topic(stack, "NewInvoices"), "ID")
        return {k: (v["customer"], v["item"], v["invoice_status"]) for k, v in table.items()}

    wait_until("batch 2 in NewInvoices after the kill", lambda: sink() == DEMO_TABLES[2],
               ui, FLOW_TIMEOUT_S)  # fmt: skip
