"""`python -m zync_assets.demo`: zync's invoice demo end to end on the local stack.

For each of the four Debezium batches: produce it to Kafka, ingest the spec's topics
into the raw pool (exactly once), run one ETL pass, and print the staging pool's
output records and what is still pending.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from zync_assets.demo.invoices import BATCHES, produce_batch, reset
from zync_assets.errors import ZyncError
from zync_assets.etl.report import pending_report
from zync_assets.etl.run import run_etl
from zync_assets.ingest.ingest import ingest
from zync_assets.kafka.registry import Registry
from zync_assets.pools import pool_path
from zync_assets.settings import kafka_settings, registry_settings
from zync_assets.spark import spark_session
from zync_assets.spec import load_spec
from zync_assets.tokafka.sync import sync_pool

SPEC = Path(__file__).resolve().parent.parent.parent / "etl_specs" / "invoices.yaml"


def staging_table(spark, run: int) -> Table:
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


def sink_table(kafka, registry) -> Table:
    """The table a JDBC sink in upsert mode builds from NewInvoices."""
    from zync_assets.demo.sink import upsert_by_key
    from zync_assets.kafka.consume import Undecodable, consume

    def records():
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


def main() -> None:
    console = Console()
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
            (sent,) = sync_pool(spark, "Staging", kafka, registry)
        console.print(f"to-kafka: {sent.sent} records to {sent.topic} "
                      f"(staging offsets {sent.first_offset}..{sent.next_offset - 1})")  # fmt: skip
    console.print(sink_table(kafka, registry))
    done = spark.read.format("delta").load(pool_path("Staging")).where("kind = 'done'").count()
    console.print(f"\n{done} done records in all (zync's demo: 12).")
    console.print('Query the pools yourself, e.g.:  zync query "SELECT * FROM Staging"')
    print(json.dumps({"done_records": done}))


if __name__ == "__main__":
    try:
        main()
    except ZyncError as exc:
        raise SystemExit(f"demo: error: {exc}") from exc
