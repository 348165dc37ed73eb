"""The real chain, carried by Dagster's sensors: `python -m bench.debezium_bench`.

A private stack with the CDC services and `dagster dev` (the default configuration a
user gets: sensor intervals, one Spark per run). For each wire format, in one run: a
chain (etl_specs/shop.yaml for its own database and topics), Debezium's snapshot, then
the seeded workload of the end-to-end test (150 transactions of inserts, updates and
deletes, some statuses before their invoice, ADD, ADD and DROP COLUMN). Measured:

  convergence_s      the commit of the workload's last change → the warehouse table
                     equal to the source's join (polled each second)
  rows_compared      rows of that join, compared column by column
  rows_mismatched    rows of the warehouse not equal to the source's (must be 0)
  duplicate_outputs  staging records (outputs or done records) written twice (must be 0)

Results are appended to docs/BENCHMARKS.md and written to bench/results/debezium.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import time
from pathlib import Path

import yaml

from bench.common import cdc_work, machine, publish
from zync_assets.demo.chain import Chain
from zync_assets.demo.workload import Workload
from zync_assets.stack.registry import registry_url, registry_v2_url
from zync_assets.stack.services import stack_down, stack_up
from zync_assets_tests.support.ports import free_port

FORMATS = ("avro", "json")


def mismatched(chain: Chain) -> int:
    expected, got = chain.expected_rows(), chain.warehouse_rows()
    return len(set(expected) ^ set(got))


def duplicates(spark, chain: Chain) -> int:
    from zync_assets.lake.pools import pool_path

    staging = spark.read.format("delta").load(pool_path(f"{chain.name}_staging"))
    return (
        staging.groupBy("kind", "kafka.topic", "kafka.partition", "kafka.offset")
        .count()
        .where("count > 1")
        .count()
    )


def measure(chain: Chain, transactions: int, timeout: float) -> dict[str, float]:
    chain.create_source_tables()
    chain.start_source_connector()
    chain.start_sink_connector()
    workload = Workload(seed=16)
    workload.run(chain.source, transactions)
    last_commit = time.monotonic()
    expected = chain.expected_rows()
    while chain.warehouse_rows() != expected and time.monotonic() - last_commit < timeout:
        time.sleep(1.0)
    converged = chain.warehouse_rows() == expected
    return {
        "convergence_s": round(time.monotonic() - last_commit, 1) if converged else -1,
        "rows_compared": len(expected),
        "rows_mismatched": mismatched(chain),
        "transactions": workload.transactions,
        "statements": workload.statements,
    }


def own_tables(spec: Path, prefix: str) -> None:
    """The chains' specs load in one Dagster code location, where each lake table needs a
    name of its own (shop.yaml's are `invoices` and `invoice_status_history`)."""
    text = yaml.safe_load(spec.read_text())
    for table in text.get("tables", []):
        table["name"] = f"{prefix}_{table['name']}"
    spec.write_text(yaml.safe_dump(text, sort_keys=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=150)
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args()

    work = cdc_work("zync-bench-debezium-")
    home, specs, ports, cdc = work.home, work.specs, work.ports, work.cdc
    kafka = f"127.0.0.1:{ports.kafka}"
    chains = {
        fmt: Chain(f"bench_{fmt}", fmt, cdc.source_db, cdc.warehouse_db, cdc.connect,
                   registry_v2_url(ports.registry))
        for fmt in FORMATS
    }  # fmt: skip
    for chain in chains.values():
        own_tables(chain.write_spec(specs), chain.name)
    figures: dict[str, object] = {}
    try:
        stack_up(ports, home, dagster_port=free_port(), cdc=cdc)
        os.environ["ZYNC_KAFKA_BOOTSTRAP"] = kafka
        os.environ["ZYNC_SCHEMA_REGISTRY_URL"] = registry_url(ports.registry)
        for fmt, chain in chains.items():
            result = measure(chain, args.transactions, args.timeout)
            print(fmt, result, flush=True)
            figures |= {f"{fmt}.{name}": value for name, value in result.items()}
        from zync_assets.spark.session import spark_session

        spark = spark_session("bench-debezium")
        for fmt, chain in chains.items():
            figures[f"{fmt}.duplicate_outputs"] = duplicates(spark, chain)
    finally:
        stack_down(home)
    report(figures)


def report(figures: dict[str, object]) -> None:
    rows = "\n".join(
        f"| {fmt} | {figures[f'{fmt}.convergence_s']} | {figures[f'{fmt}.rows_compared']} | "
        f"{figures[f'{fmt}.rows_mismatched']} | {figures[f'{fmt}.duplicate_outputs']} |"
        for fmt in FORMATS
    )
    text = f"""
### The real chain (PostgreSQL → Debezium → zync via Dagster's sensors → JDBC sink), {dt.date.today()} — {machine()}

{figures["avro.transactions"]} source transactions, {figures["avro.statements"]} statements (inserts, updates, deletes; statuses before their
invoice; ADD, ADD and DROP COLUMN mid-stream), default configuration (`dagster dev`, one Spark per run):

| format | last commit → warehouse equal (s) | rows compared | rows mismatched | duplicate staging records |
|---|---:|---:|---:|---:|
{rows}
"""
    publish("debezium", text, figures)


if __name__ == "__main__":
    main()
