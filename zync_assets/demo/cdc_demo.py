"""The demo as a user runs it: zync's invoice story, made with SQL in a real database.

PostgreSQL `shop` ─ Debezium ─▶ Kafka ─ zync's continuous pipeline (raw/ShopRaw,
staging/ShopStaging, kafka/shop_invoices; etl_specs/shop.yaml) ─▶ Kafka ─ Debezium's
JDBC sink ─▶ PostgreSQL `warehouse`, table shop_invoices.

Beside it the same table kept as a view (etl_specs/demo/shop_view.yaml: one `view` rule, the
SQL join of the tables' current rows; raw/ShopViewRaw, staging/ShopViewStaging) fills
table shop_invoice_view: each step's status changes reach it through the join.

The pipeline is the stack's `pipeline` service (`zync stack up --follow`): one warm
Spark, each stage as soon as the one before committed, every commit recorded in the
stack's Dagster as its asset's materialization (the UI shows the lineage filling; the
Kafka sensors stand aside while it runs). `--sensors` leaves the pipeline out and lets
Dagster's sensors start a run per stage instead: slower (a Spark start per run).

Each step's SQL is shown, committed in the source database, and the demo waits until
the warehouse table equals the source's join of invoices and statuses. It ends with
zync's result: Alice closed, Bob paid, Charlie paid, Dan collections.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table

from zync_assets.core.errors import ZyncError
from zync_assets.core.locations import state_dir
from zync_assets.core.settings import kafka_settings
from zync_assets.demo.chain import Chain
from zync_assets.demo.lake import HISTORY, INVOICES, LakeTables
from zync_assets.demo.via_dagster import open_instance, running_runs
from zync_assets.lake.pools import drop_pool_files, drop_table_files
from zync_assets.spark.connect import SPARK_CONNECT_PORT
from zync_assets.stack.dagster import dagster_home, dagster_service, dagster_url
from zync_assets.stack.pipeline_service import pipeline_service
from zync_assets.stack.registry import registry_v2_url
from zync_assets.stack.services import CdcPorts, StackPorts, stack_up

CHAIN = "shop"  # etl_specs/shop.yaml reads topics shop.public.* and writes shop_invoices
POOLS = ("ShopRaw", "ShopStaging", "ShopViewRaw", "ShopViewStaging")
SPEC = Path(__file__).resolve().parents[2] / "etl_specs" / "shop.yaml"
# raw/ShopViewRaw, staging/ShopViewStaging. Beside etl_specs/, not in it: the stack's
# Dagster shows etl_specs/ alone, as the lineage test checks it.
VIEW_SPEC = SPEC.parent / "demo" / "shop_view.yaml"
EXPECTED_END = [
    (100, "Alice", "taco", "closed"),
    (101, "Bob", "burrito", "paid"),
    (102, "Charlie", "enchilada", "paid"),
    (103, "Dan", "beans", "collections"),
]


@dataclass(frozen=True)
class Step:
    title: str
    sql: str


SNAPSHOT = Step(
    "Alice and Bob order before Debezium starts: its snapshot reads them (op r)",
    """INSERT INTO invoices (id, customer, item, amount) VALUES
    (100, 'Alice', 'taco', 8.50), (101, 'Bob', 'burrito', 11.25);
INSERT INTO invoice_status (id, invoice_id, status) VALUES
    (80, 101, 'pending'), (32, 100, 'pending');""",
)
STEPS = [
    Step(
        "Charlie and Dan order; only Charlie's status is in yet (Dan's row waits for it)",
        """INSERT INTO invoices (id, customer, item, amount) VALUES
    (102, 'Charlie', 'enchilada', 9.75), (103, 'Dan', 'beans', 4.20);
INSERT INTO invoice_status (id, invoice_id, status) VALUES (77, 102, 'pending');""",
    ),
    Step(
        "Dan's status arrives; Alice's invoice is closed",
        """INSERT INTO invoice_status (id, invoice_id, status) VALUES (192, 103, 'pending');
UPDATE invoice_status SET status = 'closed' WHERE id = 32;""",
    ),
    Step(
        "One transaction: Dan goes to collections, Charlie and Bob pay",
        """UPDATE invoice_status SET status = 'collections' WHERE id = 192;
UPDATE invoice_status SET status = 'paid' WHERE id = 77;
UPDATE invoice_status SET status = 'paid' WHERE id = 80;""",
    ),
]


def start(console: Console, dagster_port: int, sensors: bool) -> tuple[Chain, str]:
    """The stack with the CDC services, a fresh Dagster and (unless `sensors`) the
    pipeline service; the chain reset and started."""
    ports, cdc, state = StackPorts(), CdcPorts(), state_dir()
    # Sensor-started runs share the stack's warm Spark; the pipeline has its own.
    spark = SPARK_CONNECT_PORT if sensors else None
    with console.status("starting Kafka, the registry, PostgreSQL and Kafka Connect…"):
        stack_up(ports, cdc=cdc, spark_port=spark)
    pipeline_service(state).stop()  # neither it nor the sensors may see the reset half done
    dagster_service(state).stop()
    shutil.rmtree(dagster_home(state), ignore_errors=True)  # cursors of deleted topics
    chain = Chain(
        CHAIN, "avro", cdc.source_db, cdc.warehouse_db, cdc.connect,
        registry_v2_url(ports.registry),
    )  # fmt: skip
    console.print(f"resetting the demo: database {CHAIN}, its topics, tables {chain.output_topic} "
                  f"and {chain.view_topic}, pools {', '.join(POOLS)}, lake tables {INVOICES}, "
                  f"{HISTORY}")  # fmt: skip
    chain.reset(kafka_settings())
    for pool in POOLS:
        drop_pool_files(pool)
    for table in (INVOICES, HISTORY):
        drop_table_files(table)
    chain.create_source_tables()
    run_sql(console, chain, SNAPSHOT)
    with console.status("starting Debezium's PostgreSQL source and JDBC sink connectors…"):
        chain.start_source_connector()
        chain.start_sink_connector((chain.output_topic, chain.view_topic))
    follow = None if sensors else [SPEC, VIEW_SPEC]
    with console.status("starting Dagster: webserver + daemon (about 30 s), then the pipeline…"):
        stack_up(ports, dagster_port=dagster_port, cdc=cdc, follow=follow, spark_port=spark)
    url = dagster_url(dagster_port)
    if sensors:
        console.print(f"Dagster UI: {url}  (sensors: raw_ShopRaw_kafka_sensor, zync_automation)")
    else:
        console.print(f"Dagster UI: {url}  (the pipeline: `zync run {SPEC.name} "
                      f"{VIEW_SPEC.name} --follow`, its log in `zync stack status`)")  # fmt: skip
    return chain, url


def run_sql(console: Console, chain: Chain, step: Step) -> None:
    console.rule(step.title)
    console.print(Syntax(step.sql, "sql", theme="ansi_dark", background_color="default"))
    with chain.source() as conn, conn.transaction():
        for statement in step.sql.split(";"):
            if statement.strip():
                conn.execute(statement)


def wait_for_warehouse(
    console: Console, chain: Chain, url: str, table: str | None = None, timeout: float = 600
) -> float:
    """Wait until the warehouse's `table` (default: the rules' output) equals the source's
    join; the seconds it took."""
    instance = open_instance(dagster_home(state_dir()))
    expected, started = chain.expected_rows(), time.monotonic()
    with console.status(f"waiting for the warehouse's {table or chain.output_topic}…") as status:
        while chain.warehouse_rows(table) != expected:
            waited = time.monotonic() - started
            if waited > timeout:
                raise ZyncError(
                    f"the warehouse did not match the source within {timeout:.0f}s; see the "
                    f"runs at {url}/runs and the logs listed by `zync stack status`"
                )
            runs = running_runs(instance)
            doing = "; ".join(runs) or "Debezium, zync and the JDBC sink at work"
            status.update(f"{waited:4.0f}s  {doing}")
            time.sleep(1.0)
    return time.monotonic() - started


def warehouse_table(console: Console, chain: Chain) -> Table:
    query = f"SELECT id, customer, item, amount, status FROM {chain.output_topic} ORDER BY id;"
    console.print(f"[bold]warehouse=#[/bold] {query}", highlight=False)
    table = Table()
    for column in ("id", "customer", "item", "amount", "status"):
        table.add_column(column)
    for row in chain.warehouse_rows():
        table.add_row(*(str(v) for v in row))
    return table


def run_cdc_demo(console: Console, dagster_port: int, sensors: bool = False) -> None:
    chain, url = start(console, dagster_port, sensors)
    lake = LakeTables()
    started = time.monotonic()
    for step in [None, *STEPS]:
        if step is not None:
            run_sql(console, chain, step)
        seconds = wait_for_warehouse(console, chain, url)
        after = " after the commit" if step is not None else ""
        console.print(f"the warehouse matches the source ({seconds:.0f}s{after})")
        console.print(warehouse_table(console, chain))
        view = wait_for_warehouse(console, chain, url, chain.view_topic)
        console.print(f"the view's table {chain.view_topic} matches it too ({view:.0f}s later)")
        lagged = lake.wait(console, chain)
        console.print(f"the lake tables match the source ({lagged:.0f}s after the warehouse)")
        lake.show(console)
    console.print(f"all steps: {time.monotonic() - started:.0f}s")
    final = [(i, c, item, s) for i, c, item, _amount, s in chain.warehouse_rows()]
    if final != EXPECTED_END:
        raise ZyncError(f"the warehouse ended as {final}, not zync's result {EXPECTED_END}")
    console.rule("the demo is done: zync's result, in a real warehouse; Dagster keeps running")
    console.print(f"Dagster UI: {url}  (asset lineage: {url}/asset-groups)")
    console.print(
        "Change the source and watch it arrive, e.g.\n"
        f"  psql -h 127.0.0.1 -p {chain.source_port} -U postgres {CHAIN} "
        "-c \"UPDATE invoice_status SET status = 'paid' WHERE id = 192\"\n"
        f"  psql -h 127.0.0.1 -p {chain.warehouse_port} -U postgres warehouse "
        f'-c "SELECT * FROM {chain.output_topic}"'
    )
    console.print(
        "Stop everything (Dagster, Connect, PostgreSQL, Kafka, registry):  zync stack down"
    )
    print(json.dumps({"warehouse": final, "dagster": url}))
