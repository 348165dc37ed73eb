"""A row changed in the source database → the warehouse row, and → the lake table, on the
demo's real stack: `python -m bench.realchain_bench [--trials N]`.

The stack as `zync stack up --cdc --dagster --follow SPEC` starts it, on private ports:
PostgreSQL `shop` → Debezium's source → Kafka → the stack's `zync run --follow` (local
Spark, default configuration, reporting to the stack's Dagster) → Kafka → Debezium's JDBC
sink → PostgreSQL `warehouse`. The spec is etl_specs/shop.yaml for the chain (invoices
joined with their status for the sink; lake tables `invoices` and its status history),
in Avro. Dagster and Kafka Connect run throughout, as they do for a user.

Once ten invoices with their statuses are in the warehouse, --trials single-row changes,
one at a time, each `UPDATE invoices SET item = ...` committed on its own:

  realchain.p50_s, p95_s          commit → the warehouse row shows the new item
                                  (polled every 50 ms)
  realchain.tables_p50_s, p95_s   commit → lake table `invoices` has applied the change:
                                  its log records applied offsets beyond the change's
                                  (polled every 100 ms from the commit files, no Spark)

Then a stream: --stream changes committed every --every seconds, whatever the pipeline
is doing (a change may arrive while the lake tables are applied: in one loop it waited
for them), each measured the same way:

  realchain.stream_p50_s, stream_p95_s                 → the warehouse row
  realchain.stream_tables_p50_s, stream_tables_p95_s   → lake table `invoices`

Then a sustained load (--load-rate changes a second for --load-seconds, each an
`UPDATE` of its own invoice in a transaction of its own):

  realchain.load.p50_s, p95_s     each change's commit → its warehouse row
  realchain.load.rate             the changes committed a second (what PostgreSQL took)

`--mode sensors` measures the same single changes with Dagster's sensors starting every
run instead of `zync run --follow` (the stack as `zync stack up --cdc --dagster` starts
it: the runs share the stack's Spark Connect server; sensors every 1 s, the default):

  realchain.sensor_p50_s, sensor_p95_s                 → the warehouse row
  realchain.sensor_tables_p50_s, sensor_tables_p95_s   → lake table `invoices`

The figures join the others in bench/results/latency.json; the table is appended to
docs/BENCHMARKS.md. About 8 minutes on 2 cores; --mode sensors about 20.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import time

import psycopg

from bench.common import cdc_work, lake_applied, machine, percentiles, publish_joined
from bench.common import wait_until as common_wait_until
from zync_assets.core.settings import KafkaSettings
from zync_assets.demo.chain import Chain
from zync_assets.kafka.offsets import high_marks, watermarks
from zync_assets.stack.registry import registry_url, registry_v2_url
from zync_assets.stack.services import stack_down, stack_up
from zync_assets_tests.support.ports import free_port

SEED_INVOICES = 10
TIMEOUT_S = 300.0


def seed(chain: Chain, ids: range = range(1, SEED_INVOICES + 1)) -> None:
    """Invoices `ids` (by default the ten the trials change), each with its status, in one
    transaction."""
    with chain.source() as conn:
        for n in ids:
            conn.execute(
                "INSERT INTO invoices (id, customer, item, amount) VALUES (%s, %s, %s, %s)",
                [n, f"customer-{n}", "seed", n * 10],
            )
            conn.execute(
                "INSERT INTO invoice_status (id, invoice_id, status) VALUES (%s, %s, 'new')",
                [n, n],
            )


def wait_until(condition, what: str, poll_s: float) -> float:
    return common_wait_until(condition, what, poll_s, TIMEOUT_S)


def warehouse_item(chain: Chain, invoice: int) -> str | None:
    with chain.warehouse() as conn:
        try:
            row = conn.execute(
                f"SELECT item FROM {chain.output_topic} WHERE id = %s", [invoice]
            ).fetchone()
        except psycopg.errors.UndefinedTable:  # the sink has not made its table yet
            return None
    return row[0] if row else None


def trial(chain: Chain, kafka: KafkaSettings, n: int) -> tuple[float, float]:
    """(commit → warehouse row, commit → lake table) of one UPDATE."""
    invoice, item = n % SEED_INVOICES + 1, f"trial-{n}"
    topic = chain.topics[0]
    before = high_marks(watermarks(kafka, [topic]))[topic].get(0, 0)
    with chain.source() as conn:
        conn.execute("UPDATE invoices SET item = %s WHERE id = %s", [item, invoice])
        conn.commit()
        committed = time.monotonic()
    wait_until(lambda: warehouse_item(chain, invoice) == item, "the warehouse row", 0.05)
    warehouse_s = time.monotonic() - committed
    # The change's offset is the first beyond `before` (nothing else writes the table).
    wait_until(lambda: lake_applied("invoices", topic) > before, "the lake table", 0.1)
    return warehouse_s, time.monotonic() - committed


def stream(chain: Chain, kafka: KafkaSettings, changes: int, every_s: float) -> dict[str, list]:
    """Commit a change every `every_s` seconds, not waiting for any; each change's time to
    the warehouse row (polled every 50 ms) and to the lake table (every 200 ms)."""
    topic = chain.topics[0]
    waiting: dict[int, tuple[int, str, int, float]] = {}  # n → invoice, item, before, commit
    reached: dict[str, list[float]] = {"warehouse": [], "tables": []}
    seen_warehouse: set[int] = set()
    started, n = time.monotonic(), 0
    applied, lake_read_at = 0, 0.0
    while n < changes or waiting:
        if time.monotonic() - started > TIMEOUT_S + changes * every_s:
            raise TimeoutError(f"the stream: {len(waiting)} changes not through")
        if n < changes and time.monotonic() >= started + n * every_s:
            invoice, item = n % SEED_INVOICES + 1, f"stream-{n}"
            before = high_marks(watermarks(kafka, [topic]))[topic].get(0, 0)
            with chain.source() as conn:
                conn.execute("UPDATE invoices SET item = %s WHERE id = %s", [item, invoice])
                conn.commit()
            waiting[n] = (invoice, item, before, time.monotonic())
            n += 1
        if time.monotonic() - lake_read_at >= 0.2:  # it reads the table's whole log
            applied, lake_read_at = lake_applied("invoices", topic), time.monotonic()
        for m, (invoice, item, before, committed) in list(waiting.items()):
            if m not in seen_warehouse and warehouse_item(chain, invoice) == item:
                seen_warehouse.add(m)
                reached["warehouse"].append(time.monotonic() - committed)
            if m in seen_warehouse and applied > before:
                reached["tables"].append(time.monotonic() - committed)
                del waiting[m]
        time.sleep(0.05)
    return reached


def load(chain: Chain, rate: float, seconds: float) -> dict[str, object]:
    """`rate` single-row changes a second for `seconds`, each of an invoice of its own
    (seeded first, out of the measurement), not waiting for any; each one's commit → its
    warehouse row, the warehouse read whole every 100 ms."""
    changes = round(rate * seconds)
    ids = range(1_000, 1_000 + changes)
    seed(chain, ids)
    wait_until(lambda: len(chain.warehouse_rows()) == SEED_INVOICES + changes,
               "the load's seeded rows", 0.5)  # fmt: skip
    committed: dict[int, float] = {}
    reached: list[float] = []
    started = time.monotonic()
    with chain.source() as conn:
        for n, invoice in enumerate(ids):
            time.sleep(max(0.0, started + n / rate - time.monotonic()))
            conn.execute("UPDATE invoices SET item = 'load' WHERE id = %s", [invoice])
            conn.commit()
            committed[invoice] = time.monotonic()
    took = time.monotonic() - started
    while committed:
        if time.monotonic() - started > TIMEOUT_S + seconds:
            raise TimeoutError(f"the load: {len(committed)} changes not through")
        with chain.warehouse() as conn:
            rows = conn.execute(
                f"SELECT id FROM {chain.output_topic} WHERE item = 'load'"
            ).fetchall()
        now = time.monotonic()
        for (invoice,) in rows:
            if invoice in committed:
                reached.append(now - committed.pop(invoice))
        time.sleep(0.1)
    figures: dict[str, object] = {"realchain.load.changes": changes,
                                  "realchain.load.rate": round(changes / took, 1)}  # fmt: skip
    figures["realchain.load.p50_s"], figures["realchain.load.p95_s"] = percentiles(reached)
    print("load:", figures, flush=True)
    return figures


def measure(
    chain: Chain, kafka: KafkaSettings, trials: int, prefix: str = "realchain."
) -> dict[str, object]:
    chain.create_source_tables()
    chain.start_source_connector()
    chain.start_sink_connector()
    seed(chain)
    first_s = wait_until(
        lambda: len(chain.warehouse_rows()) == SEED_INVOICES, "the seeded rows", 0.5
    )
    print(f"seeded rows in the warehouse after {first_s:.1f} s", flush=True)
    warehouse, tables = [], []
    for n in range(trials):
        to_warehouse, to_table = trial(chain, kafka, n)
        warehouse.append(to_warehouse)
        tables.append(to_table)
        print(f"trial {n}: warehouse {to_warehouse:.2f} s, lake table {to_table:.2f} s",
              flush=True)  # fmt: skip
    figures: dict[str, object] = {f"{prefix}trials": trials}
    figures[f"{prefix}p50_s"], figures[f"{prefix}p95_s"] = percentiles(warehouse)
    figures[f"{prefix}tables_p50_s"], figures[f"{prefix}tables_p95_s"] = percentiles(tables)
    return figures


def measure_stream(
    chain: Chain, kafka: KafkaSettings, changes: int, every_s: float
) -> dict[str, object]:
    reached = stream(chain, kafka, changes, every_s)
    print("stream:", {k: [round(v, 2) for v in vs] for k, vs in reached.items()}, flush=True)
    figures: dict[str, object] = {"realchain.stream_changes": changes,
                                  "realchain.stream_every_s": every_s}  # fmt: skip
    figures["realchain.stream_p50_s"], figures["realchain.stream_p95_s"] = percentiles(
        reached["warehouse"]
    )
    tables = percentiles(reached["tables"])
    figures["realchain.stream_tables_p50_s"], figures["realchain.stream_tables_p95_s"] = tables
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--stream", type=int, default=20, help="changes in the stream")
    parser.add_argument("--every", type=float, default=3.0, help="seconds between them")
    parser.add_argument("--load-rate", type=float, default=20.0, help="changes a second")
    parser.add_argument("--load-seconds", type=float, default=30.0)
    parser.add_argument("--mode", choices=("continuous", "sensors"), default="continuous")
    args = parser.parse_args()
    work = cdc_work("zync-bench-realchain-")
    home, ports, cdc = work.home, work.ports, work.cdc
    chain = Chain("bench_chain", "avro", cdc.source_db, cdc.warehouse_db, cdc.connect,
                  registry_v2_url(ports.registry))  # fmt: skip
    spec = chain.write_spec(work.specs)
    kafka = KafkaSettings(f"127.0.0.1:{ports.kafka}")
    os.environ["ZYNC_KAFKA_BOOTSTRAP"] = kafka.bootstrap_servers
    os.environ["ZYNC_SCHEMA_REGISTRY_URL"] = registry_url(ports.registry)
    sensors = args.mode == "sensors"
    try:
        if sensors:  # nothing but Dagster's sensors starts a run
            stack_up(ports, home, dagster_port=free_port(), cdc=cdc, spark_port=free_port())
            figures = measure(chain, kafka, args.trials, prefix="realchain.sensor_")
        else:
            stack_up(ports, home, dagster_port=free_port(), cdc=cdc, follow=[spec])
            figures = measure(chain, kafka, args.trials)
            if args.stream:
                figures |= measure_stream(chain, kafka, args.stream, args.every)
            if args.load_seconds:
                figures |= load(chain, args.load_rate, args.load_seconds)
    finally:
        stack_down(home)
    (report_sensors if sensors else report)(figures)


def report(figures: dict[str, object]) -> None:
    trials = figures["realchain.trials"]
    text = f"""
### A source row → the warehouse and the lake table, the real chain in continuous mode, {dt.date.today()} — {machine()}

`python -m bench.realchain_bench`: the stack as `zync stack up --cdc --dagster --follow
SPEC` starts it (PostgreSQL, Debezium's source and JDBC sink on Kafka Connect, Dagster,
`zync run --follow` with local Spark; default configuration), etl_specs/shop.yaml in
Avro. {trials} single-row `UPDATE invoices` one at a time; from the source commit:

| figure | p50 (s) | p95 (s) |
|---|---:|---:|
| → the warehouse row (JDBC sink) | {figures["realchain.p50_s"]} | {figures["realchain.p95_s"]} |
| → lake table `invoices` | {figures["realchain.tables_p50_s"]} | {figures["realchain.tables_p95_s"]} |
"""
    if "realchain.stream_p50_s" in figures:
        text += f"""
Then a stream: {figures["realchain.stream_changes"]} changes, one every {figures["realchain.stream_every_s"]} s, whatever the pipeline is doing:

| figure | p50 (s) | p95 (s) |
|---|---:|---:|
| → the warehouse row (JDBC sink) | {figures["realchain.stream_p50_s"]} | {figures["realchain.stream_p95_s"]} |
| → lake table `invoices` | {figures["realchain.stream_tables_p50_s"]} | {figures["realchain.stream_tables_p95_s"]} |
"""
    if "realchain.load.p50_s" in figures:
        text += f"""
Then a sustained load: {figures["realchain.load.changes"]} changes at {figures["realchain.load.rate"]} a second, each its own invoice and transaction: → the warehouse row p50 **{figures["realchain.load.p50_s"]} s**, p95 {figures["realchain.load.p95_s"]} s.
"""
    publish_joined("latency", text, figures)


def report_sensors(figures: dict[str, object]) -> None:
    text = f"""
### A source row → the warehouse and the lake table, the real chain through Dagster's sensors, {dt.date.today()} — {machine()}

`python -m bench.realchain_bench --mode sensors`: the stack as `zync stack up --cdc
--dagster` starts it (PostgreSQL, Debezium's source and JDBC sink on Kafka Connect, Kafka,
Dagster; no `zync run --follow`): each run is started by a sensor (every 1 s, the
default) and does its Spark work on the stack's Spark Connect server. etl_specs/shop.yaml
in Avro. {figures["realchain.sensor_trials"]} single-row `UPDATE invoices` one at a time; from the source commit:

| figure | p50 (s) | p95 (s) |
|---|---:|---:|
| → the warehouse row (JDBC sink) | {figures["realchain.sensor_p50_s"]} | {figures["realchain.sensor_p95_s"]} |
| → lake table `invoices` | {figures["realchain.sensor_tables_p50_s"]} | {figures["realchain.sensor_tables_p95_s"]} |
"""
    publish_joined("latency", text, figures)


if __name__ == "__main__":
    main()
