"""`python -m zync_assets.demo`: zync's invoice demo end to end on the local stack.

By default it runs the real chain (cdc_demo.py): SQL changes in PostgreSQL, captured by
Debezium, carried through zync by the stack's continuous pipeline (reporting to
Dagster; `--sensors`: by Dagster's sensors), written by Debezium's JDBC sink into a
warehouse table.

`--synthetic` produces zync's four batches of Debezium-shaped events to Kafka instead.
For each, the Kafka sensor starts raw/Raw and the automation sensor starts
staging/Staging and kafka/NewInvoices; the demo only watches, then prints the staging
pool's output records, what is still pending, and the table a JDBC sink rebuilds from
NewInvoices. `--direct` runs those stages in this process instead, without Dagster.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from dagster import AssetKey
from pyspark.sql import SparkSession
from rich.console import Console
from rich.table import Table

from zync_assets.core.errors import ZyncError
from zync_assets.core.locations import state_dir
from zync_assets.core.settings import KafkaSettings, kafka_settings, registry_settings
from zync_assets.demo.cdc_demo import run_cdc_demo
from zync_assets.demo.invoices import BATCHES, TOPICS, produce_batch, reset
from zync_assets.demo.via_dagster import Stage, open_instance, wait_for_stages
from zync_assets.etl.report import pending_report
from zync_assets.etl.run import run_etl
from zync_assets.ingest.ingest import ingest
from zync_assets.kafka.offsets import high_marks, watermarks
from zync_assets.kafka.registry import Registry
from zync_assets.lake.pools import pool_path
from zync_assets.orchestration.raw import PROGRESS_KEY
from zync_assets.orchestration.staging import RAW_SEEN_KEY
from zync_assets.spark.session import spark_session
from zync_assets.specs.model import load_spec
from zync_assets.stack.dagster import DAGSTER_PORT, dagster_home, dagster_service, dagster_url
from zync_assets.stack.services import StackPorts, stack_up
from zync_assets.tokafka.sync import sync_pool

SPEC = Path(__file__).resolve().parent.parent.parent / "etl_specs" / "invoices.yaml"


def staging_table(spark: SparkSession, run: int) -> Table:
    table = Table(title=f"Staging after ETL run {run}: NewInvoices output records")
    table.add_column("offset", justify="right")
    table.add_column("key")
    table.add_column("value", overflow="fold")
    table.add_column("run", justify="right")
    rows = (
        spark.read.format("delta").load(pool_path("Staging"))
        .where("kind = 'output'").orderBy("kafka.offset")
        .selectExpr("kafka.offset", "cast(key as string) AS k", "cast(value as string) AS v", "run")
        .collect()
    )  # fmt: skip
    for row in rows:
        style = "bold green" if row.run == run else None
        table.add_row(str(row.offset), row.k, row.v, str(row.run), style=style)
    return table


def sink_table(kafka: KafkaSettings, registry: Registry) -> Table:
    """The table a JDBC sink in upsert mode builds from NewInvoices."""
    from zync_assets.demo.sink import upsert_by_key
    from zync_assets.kafka.consume import Undecodable, consume

    def records() -> Iterator[tuple[Any, Any]]:
        for record in consume(kafka, registry, "NewInvoices", from_beginning=True, idle_timeout=2):
            if isinstance(record, Undecodable):
                raise ZyncError(f"NewInvoices offset {record.offset}: {record.error}")
            yield record["key"], record["value"]

    rows = upsert_by_key(records(), "ID")
    table = Table(title="The sink's table, rebuilt from topic NewInvoices")
    for column in ("ID", "customer", "item", "invoice_status"):
        table.add_column(column)
    for key in sorted(rows):
        table.add_row(
            *(str(rows[key].get(c)) for c in ("ID", "customer", "item", "invoice_status"))
        )
    return table


STAGES = [
    Stage(AssetKey(["raw", "Raw"]), "raw/Raw", offsets_key=PROGRESS_KEY),
    Stage(AssetKey(["staging", "Staging"]), "staging/Staging", offsets_key=RAW_SEEN_KEY),
    Stage(AssetKey(["kafka", "NewInvoices"]), "kafka/NewInvoices"),
]


def end_offsets(kafka: KafkaSettings) -> dict[str, dict[int, int]]:
    marks = watermarks(kafka, list(TOPICS))
    return high_marks(marks)


def start_dagster(console: Console, port: int) -> str:
    """A fresh Dagster (no memory of earlier demo runs) on the running stack."""
    state = state_dir()
    with console.status("starting Kafka and the schema registry…"):
        stack_up(StackPorts())
    dagster_service(state).stop()  # its sensors must not see the reset half done
    shutil.rmtree(dagster_home(state), ignore_errors=True)  # cursors of the deleted topics
    console.print("resetting the demo's topics (Invoices, InvoiceStatus, NewInvoices) "
                  "and pools (Raw, Staging)")  # fmt: skip
    reset(kafka_settings())
    with console.status("starting Dagster: webserver + daemon (about 30 s)…"):
        stack_up(StackPorts(), dagster_port=port)
    url = dagster_url(port)
    console.print(f"Dagster UI: {url}  (sensors running: raw_Raw_kafka_sensor, zync_automation)")
    return url


def run_via_dagster(console: Console, port: int) -> None:
    url = start_dagster(console, port)
    spec = load_spec(SPEC)
    kafka, registry = kafka_settings(), Registry(registry_settings())
    instance = open_instance(dagster_home(state_dir()))
    with console.status("starting Spark to show the staging pool (about 10 s)…"):
        spark = spark_session("zync-demo")
    for batch in range(1, BATCHES + 1):
        console.rule(f"batch {batch}")
        since = dt.datetime.now(dt.UTC)
        sent = produce_batch(batch, kafka, registry)
        end = end_offsets(kafka)
        console.print(f"produced {sent} Debezium events; Kafka end offsets now {end}")
        with console.status("waiting for the sensors…") as status:

            def report(line: str, n: int = batch) -> None:
                status.update(f"batch {n}: {line}")

            raw, staging, out = wait_for_stages(instance, STAGES, end, since, url, report=report)
        console.print(
            f"raw/Raw: {raw.metadata['rows_written']} rows (run {raw.run_id[:8]}) · "
            f"staging/Staging: {staging.metadata['outputs']} outputs, "
            f"{staging.metadata['done']} done, {staging.metadata['pending']} pending "
            f"(run {staging.run_id[:8]}) · kafka/NewInvoices: "
            f"{out.metadata['records_sent']} records sent"
        )
        etl_run = staging.metadata["run"]  # "nothing new" when the pass committed nothing
        console.print(staging_table(spark, etl_run if isinstance(etl_run, int) else 0))
        for line in pending_report(spark, spec):
            console.print(f"  pending: {line}")
        console.print(sink_table(kafka, registry))
    done = spark.read.format("delta").load(pool_path("Staging")).where("kind = 'done'").count()
    console.print(f"\n{done} done records in all (zync's demo: 12).")
    console.rule("the demo is done; Dagster keeps running")
    console.print(f"Dagster UI: {url}  (asset lineage: {url}/asset-groups)")
    console.print("Produce more events and the sensors carry them through, e.g.\n"
                  "  zync produce --topic Invoices < events.jsonl")  # fmt: skip
    console.print("Stop everything (Dagster, Kafka, registry):  zync stack down")
    print(json.dumps({"done_records": done, "dagster": url}))


def run_direct(console: Console) -> None:
    spec = load_spec(SPEC)
    kafka, registry = kafka_settings(), Registry(registry_settings())
    console.print("resetting the demo's topics (Invoices, InvoiceStatus) and pools (Raw, Staging)")
    reset(kafka)
    with console.status("starting Spark (about 10 s)…"):
        spark = spark_session("zync-demo")
    for batch in range(1, BATCHES + 1):
        console.rule(f"batch {batch}")
        sent = produce_batch(batch, kafka, registry)
        with console.status(f"ingesting batch {batch} into pool Raw…"):
            started = time.monotonic()
            result = ingest(
                spark, "Raw", ["Invoices", "InvoiceStatus"], kafka, registry, missing_ok=True
            )
        console.print(f"produced {sent} Debezium events; ingested {result.rows} "
                      f"({result.dead_letters} dead letters) in {time.monotonic() - started:.1f}s")  # fmt: skip
        with console.status("running the ETL spec…"):
            (etl,) = run_etl(spark, spec)
        console.print(f"ETL: {etl.done} done records, {sum(etl.outputs.values())} outputs, "
                      f"{etl.pending} pending")  # fmt: skip
        console.print(staging_table(spark, etl.run or 0))
        for line in pending_report(spark, spec):
            console.print(f"  pending: {line}")
        with console.status("sending staging to Kafka…"):
            (synced,) = sync_pool(spark, "Staging", kafka, registry)
        console.print(f"to-kafka: {synced.sent} records to {synced.topic} "
                      f"(staging offsets {synced.first_offset}..{synced.next_offset - 1})")  # fmt: skip
    console.print(sink_table(kafka, registry))
    done = spark.read.format("delta").load(pool_path("Staging")).where("kind = 'done'").count()
    console.print(f"\n{done} done records in all (zync's demo: 12).")
    console.print('Query the pools yourself, e.g.:  zync query "SELECT * FROM Staging"')
    print(json.dumps({"done_records": done}))


@click.command()
@click.option("--synthetic", is_flag=True,
              help="Produce zync's four batches of Debezium-shaped events instead of running "
              "PostgreSQL, Debezium and the JDBC sink.")  # fmt: skip
@click.option("--direct", is_flag=True,
              help="With --synthetic: run the stages in this process, without Dagster.")  # fmt: skip
@click.option("--sensors", is_flag=True,
              help="Let Dagster's sensors start the runs instead of running the continuous "
              "pipeline (slower: a Dagster run per change, on the stack's Spark Connect "
              "server).")  # fmt: skip
@click.option("--dagster-port", default=DAGSTER_PORT, show_default=True, help="Dagster UI port.")
def main(synthetic: bool, direct: bool, sensors: bool, dagster_port: int) -> None:
    """zync's invoice demo: PostgreSQL → Debezium → Kafka → zync → Kafka → JDBC sink →
    warehouse, carried by the continuous pipeline (or, with --sensors, Dagster's sensors)."""
    console = Console()
    try:
        if direct:
            run_direct(console)
        elif synthetic:
            run_via_dagster(console, dagster_port)
        else:
            run_cdc_demo(console, dagster_port, sensors)
    except ZyncError as exc:
        raise SystemExit(f"demo: error: {exc}") from exc


if __name__ == "__main__":
    main()
