"""A whole database with one spec, on the real chain: `python -m bench.mirror_bench`.

A private stack (`zync stack up --cdc`: Kafka, the registry, PostgreSQL, Kafka Connect
with Debezium) and `zync run --follow` of the six-line whole-database spec (its default
configuration: local Spark, one loop), over a source database of --tables tables of six
shapes (zync_assets/demo/whole_database.py: bigint, UUID and composite keys, a wide row,
a TOASTed column, and a row of jsonb, text[], an enum, numeric(18,4), uuid and smallint)
plus one without a primary key, which the spec leaves out. Debezium
captures the whole schema; the JDBC sink upserts every mirrored topic (topics.regex).

  mirror.tables                the source tables mirrored
  mirror.spec_lines            the spec's lines
  mirror.snapshot_rows_per_s   the seeded rows (--rows per table, Debezium's snapshot)
                               over the seconds from the pipeline's start to the last
                               lake table holding all of its rows (Spark's start included)
  mirror.snapshot_s            those seconds
  mirror.steady.p50_s, p95_s   a single-row UPDATE of a random table, one at a time →
                               its lake table applied it (its row holds the new value)
  mirror.steady_warehouse.p50_s, p95_s   … → its warehouse row holds it
  mirror.new_table_visible_s   CREATE TABLE and its first row, committed → the new
                               table's lake table holds the row
  mirror.rows_mismatched       after all that and a workload over every table: rows that
                               differ between each source table and its lake table, and
                               its warehouse table (0 is right)

The figures go to bench/results/mirror.json, the table to docs/BENCHMARKS.md. About
15 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import psycopg

from bench.common import cdc_work, machine, percentiles, publish, wait_until
from zync_assets.core.settings import KafkaSettings
from zync_assets.demo import whole_database as db
from zync_assets.demo.chain import Chain
from zync_assets.lake.pools import pool_exists, table_path
from zync_assets.stack.register import register_sink, register_source
from zync_assets.stack.registry import registry_url, registry_v2_url
from zync_assets.stack.services import stack_down, stack_up

TIMEOUT_S = 900.0


def lake_holds(spark, table: db.Table, rows: int) -> bool:
    return lake_count(spark, table) == rows


def lake_count(spark, table: db.Table) -> int:
    path = table_path(table.name)
    return spark.read.format("delta").load(path).count() if pool_exists(path) else -1


def lake_value(spark, table: db.Table, where: str, column: str) -> object:
    path = table_path(table.name)
    if not pool_exists(path):
        return None
    rows = spark.read.format("delta").load(path).where(where).select(column).collect()
    return rows[0][0] if rows else None


def warehouse_value(chain: Chain, table: db.Table, where: str, column: str) -> object:
    with chain.warehouse() as conn:
        try:
            row = conn.execute(
                f"SELECT {column} FROM {chain.name}_wh_{table.name} WHERE {where}"
            ).fetchone()
        except psycopg.errors.UndefinedTable:
            return None
    return row[0] if row else None


def mismatched_rows(spark, chain: Chain, chosen: list[db.Table]) -> int:
    """Rows in one copy and not the other, summed over every lake and warehouse table."""
    wrong = 0
    with chain.source() as source, chain.warehouse() as warehouse:
        for table in chosen:
            want = set(db.source_rows(source, table))
            path = table_path(table.name)
            lake = set(db.lake_rows(spark, path, table)) if pool_exists(path) else set()
            try:
                stored = set(db.warehouse_rows(warehouse, table, f"{chain.name}_wh_{table.name}"))
            except psycopg.errors.UndefinedTable:
                stored = set()
            wrong += len(want ^ lake) + len(want ^ stored)
    return wrong


def steady(spark, chain: Chain, chosen: list[db.Table], trials: int) -> dict[str, list[float]]:
    """Single-row updates of a random plain table's row 1, one at a time: the seconds from
    the commit to the warehouse row and to the lake row, both polled in one loop."""
    rng = random.Random(3)
    plain = [t for t in chosen if t.shape == "plain"]
    reached: dict[str, list[float]] = {"lake": [], "warehouse": []}
    for n in range(trials):
        table, name = rng.choice(plain), f"steady-{n}"
        with chain.source() as conn:
            conn.execute(f"UPDATE {table.name} SET name = %s WHERE id = 1", [name])
            conn.commit()
        committed, lake_read = time.monotonic(), 0.0
        seen: dict[str, float] = {}
        while len(seen) < 2:
            if time.monotonic() - committed > TIMEOUT_S:
                raise TimeoutError(f"steady {n}: {table.name} not through")
            if "warehouse" not in seen and warehouse_value(chain, table, "id = 1", "name") == name:
                seen["warehouse"] = time.monotonic() - committed
            # The lake is read by this process's Spark: twice a second, not to take the
            # pipeline's cores (the warehouse poll is a PostgreSQL query).
            if "lake" not in seen and time.monotonic() - lake_read >= 0.5:
                lake_read = time.monotonic()
                if lake_value(spark, table, "id = 1", "name") == name:
                    seen["lake"] = time.monotonic() - committed
            time.sleep(0.05)
        for where, seconds in seen.items():
            reached[where].append(seconds)
        print(f"steady {n}: {table.name}: lake {seen['lake']:.2f} s, warehouse "
              f"{seen['warehouse']:.2f} s", flush=True)  # fmt: skip
    return reached


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=50)
    parser.add_argument("--rows", type=int, default=200, help="seeded rows per table")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--workload", type=int, default=30, help="transactions at the end")
    args = parser.parse_args()
    work = cdc_work("zync-bench-mirror-")
    home, ports, cdc = work.home, work.ports, work.cdc
    chain = Chain("mirror_bench", "avro", cdc.source_db, cdc.warehouse_db, cdc.connect,
                  registry_v2_url(ports.registry))  # fmt: skip
    spec = work.specs / "whole.yaml"
    spec.write_text(db.whole_spec(chain.name))
    kafka = KafkaSettings(f"127.0.0.1:{ports.kafka}")
    os.environ["ZYNC_KAFKA_BOOTSTRAP"] = kafka.bootstrap_servers
    os.environ["ZYNC_SCHEMA_REGISTRY_URL"] = registry_url(ports.registry)
    chosen = db.tables(args.tables)
    figures: dict[str, object] = {
        "mirror.tables": len(chosen), "mirror.spec_lines": len(spec.read_text().splitlines()),
        "mirror.rows_per_table": args.rows,
    }  # fmt: skip
    pipeline: subprocess.Popen | None = None
    try:
        stack_up(ports, home, cdc=cdc)
        chain.create_source_tables(db.schema_ddl(chosen))
        workload = db.Workload(chosen)
        with chain.source() as conn, conn.transaction():
            workload.seed_rows(conn, per_table=args.rows)
        register_source(chain.addresses, f"{chain.name}-source", chain.name, [], "avro",
                        topic_prefix=chain.name, publication=chain.name, schema="public")  # fmt: skip
        register_sink(chain.addresses, f"{chain.name}-sink", [], "avro",
                      topics_regex=f"{chain.name}_wh_.*")  # fmt: skip
        from zync_assets.spark.session import spark_session

        spark = spark_session()
        log = (work.specs.parent / "pipeline.log").open("w")
        started = time.monotonic()
        pipeline = subprocess.Popen(
            [str(Path(sys.executable).parent / "zync"), "run", "--follow", "--no-dagster",
             str(spec)], stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy(),
        )  # fmt: skip
        for table in chosen:
            wait_until(partial(lake_holds, spark, table, args.rows), f"{table.name}", 1.0)
        snapshot_s = time.monotonic() - started
        figures["mirror.snapshot_s"] = round(snapshot_s, 1)
        figures["mirror.snapshot_rows_per_s"] = round(args.rows * len(chosen) / snapshot_s, 1)
        print(f"snapshot: {snapshot_s:.1f} s", flush=True)
        reached = steady(spark, chain, chosen, args.trials)
        figures["mirror.steady.p50_s"], figures["mirror.steady.p95_s"] = percentiles(
            reached["lake"]
        )
        figures["mirror.steady_warehouse.p50_s"], figures["mirror.steady_warehouse.p95_s"] = (
            percentiles(reached["warehouse"])
        )
        added = db.Table(f"t{args.tables + 1:02d}", "plain")
        with chain.source() as conn, conn.transaction():
            conn.execute(added.ddl())
            db.insert(conn, added, 1)
        figures["mirror.new_table_visible_s"] = round(
            wait_until(lambda: lake_count(spark, added) == 1, "the new table", 0.2), 2
        )
        chosen.append(added)
        workload = db.Workload(chosen, seed=11)
        workload.live = {t.name: set(range(args.rows)) for t in chosen}
        workload.live[added.name] = {1}
        for _ in range(args.workload):
            workload.transaction(chain.source)
        deadline = time.monotonic() + TIMEOUT_S
        wrong = mismatched_rows(spark, chain, chosen)
        while wrong and time.monotonic() < deadline:
            time.sleep(10)
            wrong = mismatched_rows(spark, chain, chosen)
        figures["mirror.rows_mismatched"] = wrong
    finally:
        if pipeline is not None:
            pipeline.terminate()
            pipeline.wait(timeout=120)
        stack_down(home)
    report(figures)


def report(figures: dict[str, object]) -> None:
    text = f"""
### A whole database with one spec, the real chain, {dt.date.today()} — {machine()}

`python -m bench.mirror_bench`: PostgreSQL (the whole `public` schema) → Debezium →
Kafka → `zync run --follow` of a {figures["mirror.spec_lines"]}-line spec (default configuration) →
Debezium's JDBC sink (`topics.regex`) → PostgreSQL; a lake table and a warehouse table
per source table.

| figure | value |
|---|---:|
| source tables | {figures["mirror.tables"]} |
| spec lines | {figures["mirror.spec_lines"]} |
| snapshot: {figures["mirror.rows_per_table"]} rows per table → all lake tables | {figures["mirror.snapshot_s"]} s ({figures["mirror.snapshot_rows_per_s"]} rows/s) |
| one row changed → its lake table, p50 / p95 | {figures["mirror.steady.p50_s"]} / {figures["mirror.steady.p95_s"]} s |
| one row changed → its warehouse row, p50 / p95 | {figures["mirror.steady_warehouse.p50_s"]} / {figures["mirror.steady_warehouse.p95_s"]} s |
| a table created → its lake table holds its first row | {figures["mirror.new_table_visible_s"]} s |
| rows mismatched after a workload (lake and warehouse) | {figures["mirror.rows_mismatched"]} |
"""
    publish("mirror", text, figures)


if __name__ == "__main__":
    main()
