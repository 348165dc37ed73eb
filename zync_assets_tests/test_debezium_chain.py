"""The real chain, end to end: PostgreSQL → Debezium source → Kafka → zync-assets (ingest,
etl_specs/shop.yaml, to-kafka) → Debezium JDBC sink → PostgreSQL.

Debezium snapshots a few invoices, then a seeded workload commits a few hundred
inserts, updates and deletes (several per transaction, some statuses before their
invoice, one ADD COLUMN). After convergence the warehouse table must equal the inner
join of the source tables, row by row and type by type, and staging must hold each
input's done record once.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from zync_assets.demo.chain import Chain
from zync_assets.demo.workload import Workload
from zync_assets.etl.run import run_etl
from zync_assets.ingest.ingest import ingest
from zync_assets.kafka.registry import Registry
from zync_assets.lake.pools import pool_exists, pool_path, table_path
from zync_assets.specs.ingested import mirrored
from zync_assets.specs.mirror import mirror_sources
from zync_assets.specs.model import Spec, load_spec
from zync_assets.stack.registry import CCOMPAT_PATH
from zync_assets.stack.services import CdcPorts
from zync_assets.tables.together import run_tables
from zync_assets.tokafka.sync import sync_pool
from zync_assets_tests.conftest import Stack

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TRANSACTIONS = 100
# The JSON variant proves the wire format (the schema changes come at the same fractions
# of the workload); the Avro one carries the load.
TRANSACTIONS_BY_FORMAT = {"avro": TRANSACTIONS, "json": 50}
CONVERGE_TIMEOUT_S = 240.0


def make_chain(stack: Stack, ports: CdcPorts, name: str, wire_format: str) -> Chain:
    registry_v2 = stack.registry_settings.url.replace(CCOMPAT_PATH, "/apis/registry/v2")
    return Chain(name, wire_format, ports.source_db, ports.warehouse_db, ports.connect, registry_v2)


def chain_spec(chain: Chain, folder: Path, gated: bool = False) -> Spec:
    return load_spec(chain.write_spec(folder, gated))


def pipeline_pass(
    spark, spec: Spec, stack: Stack, registry: Registry, transaction_size: int = 200_000
) -> None:
    """One pass of every zync stage: ingest, ETL, to-kafka, lake tables."""
    formats = spec.formats()
    for pool, topics in spec.raw_pools().items():
        ingest(spark, pool, topics, stack.kafka, registry, missing_ok=True, formats=formats)
    run_etl(spark, spec)
    expanded = mirrored(spec)  # a mirror's outputs, in their sources' column types
    outputs = {topic: wire.value for topic, wire in expanded.formats().items()}
    for pool in {o.pool for o in expanded.outputs}:
        if pool_exists(pool_path(pool)):  # ETL makes it with its first outputs
            sync_pool(spark, pool, stack.kafka, registry, formats=outputs,
                      transaction_size=transaction_size, sources=mirror_sources(expanded))  # fmt: skip
    run_tables(spark, spec, registry)


def converge(chain: Chain, step, timeout: float = CONVERGE_TIMEOUT_S, spark=None) -> float:
    """Run `step` until the warehouse equals the source's join; the seconds it took.
    With `spark`, a failure also says how far each missing invoice got."""
    started = time.monotonic()
    expected = chain.expected_rows()
    while time.monotonic() - started < timeout:
        step()
        deadline = time.monotonic() + 5  # the sink commits within a second or two
        while time.monotonic() < deadline:
            if chain.warehouse_rows() == expected:
                return time.monotonic() - started
            time.sleep(0.5)
    got = chain.warehouse_rows()
    missing = sorted(set(expected) - set(got))[:5]
    extra = sorted(set(got) - set(expected))[:5]
    trace = "" if spark is None else trace_invoices(spark, chain, [row[0] for row in missing])
    raise AssertionError(
        f"the warehouse did not converge in {timeout:g}s: {len(got)} rows against "
        f"{len(expected)} expected; missing {missing}; unexpected {extra}{trace}"
    )


@dataclass(frozen=True)
class Sent:
    offset: int


def kafka_records(stack: Stack, topic: str) -> list[Sent]:
    """The committed records of one-partition `topic` with their Kafka offsets (read_committed:
    a transaction's commit marker takes an offset, so gaps mark where transactions ended)."""
    consumer = Consumer({**stack.kafka.client_config(), "group.id": uuid.uuid4().hex,
                         "isolation.level": "read_committed", "enable.partition.eof": True})  # fmt: skip
    found = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        while (message := consumer.poll(10)) is not None and not message.error():
            offset = message.offset()
            assert offset is not None  # a record read from its partition has one
            found.append(Sent(offset))
    finally:
        consumer.close()
    return found


def trace_invoices(spark, chain: Chain, ids: list[int]) -> str:
    """Where each invoice's changes got to: its events in the raw pool (topic, offset, op)
    with their done records' status, its output records in staging, and the connectors'
    states, so that a failure names the stage that lost or held back a change."""
    lines = []
    for name in (f"{chain.name}-source", f"{chain.name}-sink"):
        lines.append(f"{name}: {chain.connect.state(name)}")
    raw_path, staging_path = pool_path(f"{chain.name}_raw"), pool_path(f"{chain.name}_staging")
    if not pool_exists(raw_path) or not pool_exists(staging_path):
        return "\n" + "\n".join([*lines, "no raw or staging pool"])
    raw = spark.read.format("delta").load(raw_path)
    staging = spark.read.format("delta").load(staging_path)
    done = staging.where("kind = 'done'").selectExpr("kafka AS k", "status")
    for invoice in ids:
        mine = raw.where(
            f"coalesce(value:after.id, value:before.id)::bigint = {invoice} AND "
            f"kafka.topic LIKE '%invoices' OR coalesce(value:after.invoice_id, "
            f"value:before.invoice_id)::bigint = {invoice}"
        )
        events = mine.join(done, mine.kafka == done.k, "left").selectExpr(
            "kafka.topic", "kafka.offset", "value:op::string AS op", "status"
        )
        outputs = staging.where(f"kind = 'output' AND value:id::bigint = {invoice}")
        lines.append(f"invoice {invoice}: raw events {[tuple(r) for r in events.collect()]}")
        lines.append(
            f"invoice {invoice}: outputs "
            f"{[tuple(r) for r in outputs.selectExpr('kafka.offset', 'run').collect()]}"
        )
    return "\n" + "\n".join(lines)


def assert_same_types(chain: Chain) -> None:
    expected, got = chain.expected_rows(), chain.warehouse_rows()
    assert expected, "the workload left no invoices: the comparison would prove nothing"
    for want, have in zip(expected, got, strict=True):
        assert [type(v) for v in have] == [type(v) for v in want], (want, have)


def assert_column_as_in_source(chain: Chain, column: str) -> None:
    """The warehouse has `column` (only rows written by a rule that copies the whole
    invoice row carry it), and where it is filled it equals the source's invoice."""
    query = f"SELECT id, {column} FROM {{}} WHERE {column} IS NOT NULL"
    with chain.warehouse() as conn:
        filled = conn.execute(query.format(chain.output_topic)).fetchall()
    with chain.source() as conn:
        source: dict[Any, Any] = dict(conn.execute(query.format("invoices")).fetchall())
    assert filled and all(source.get(i) == value for i, value in filled), (column, filled)


def assert_lake_tables_equal_the_source(spark, chain: Chain) -> None:
    """table/invoices (SCD1) holds each source invoice as it is; the current versions of
    table/invoice_status_history (SCD2) each status as it is."""
    with chain.source() as conn:
        invoices = conn.execute("SELECT id, customer, item, amount FROM invoices ORDER BY id")
        want = [tuple(r) for r in invoices.fetchall()]
        statuses = conn.execute("SELECT id, invoice_id, status FROM invoice_status ORDER BY id")
        want_status = [tuple(r) for r in statuses.fetchall()]
    table = spark.read.format("delta").load(table_path("invoices"))
    got = table.select("id", "customer", "item", "amount").orderBy("id").collect()
    assert [tuple(r) for r in got] == want
    history = spark.read.format("delta").load(table_path("invoice_status_history"))
    current = history.where("__END_AT IS NULL").select("id", "invoice_id", "status")
    assert [tuple(r) for r in current.orderBy("id").collect()] == want_status
    assert history.count() > len(want_status)  # statuses changed: history has closed versions


def assert_no_dead_letters(spark, chain: Chain) -> None:
    raw = spark.read.format("delta").load(pool_path(f"{chain.name}_raw"))
    assert raw.where("dead_letter IS NOT NULL").count() == 0
    assert raw.count() > 0


def assert_no_duplicates(spark, chain: Chain) -> None:
    """Each input event has exactly one done record; each output offset one record."""
    staging = spark.read.format("delta").load(str(pool_path(f"{chain.name}_staging")))
    staging.createOrReplaceTempView("staging_check")
    duplicates = spark.sql(
        "SELECT kind, kafka.topic, kafka.partition, kafka.offset, count(*) AS n "
        "FROM staging_check GROUP BY 1, 2, 3, 4 HAVING n > 1"
    ).collect()
    assert duplicates == []


@pytest.mark.timeout(900)
@pytest.mark.parametrize("wire_format", ["avro", "json"])
def test_the_warehouse_equals_the_source_join(
    stack: Stack, cdc_ports: CdcPorts, spark, registry: Registry, lake: Path, tmp_path: Path,
    wire_format: str,
) -> None:  # fmt: skip
    chain = make_chain(stack, cdc_ports, f"e2e_{wire_format}", wire_format)
    spec = chain_spec(chain, tmp_path)
    chain.create_source_tables()
    workload = Workload(seed=16)
    with chain.source() as conn, conn.transaction():  # the snapshot's rows
        for _ in range(8):
            for statement, params in workload.transaction():
                conn.execute(statement, params)
    chain.start_source_connector()
    chain.start_sink_connector()

    workload.run(chain.source, TRANSACTIONS_BY_FORMAT[wire_format])
    seconds = converge(chain, lambda: pipeline_pass(spark, spec, stack, registry))

    assert_same_types(chain)
    assert_no_duplicates(spark, chain)
    assert_no_dead_letters(spark, chain)  # every writer schema, before and after each ALTER
    assert_column_as_in_source(chain, "note")
    with chain.warehouse() as conn:  # region came and went in the source; the sink keeps it
        (regions,) = conn.execute(
            f"SELECT count(region) FROM {chain.output_topic} WHERE region IS NOT NULL"
        ).fetchall()[0]
    assert regions > 0  # the column added mid-topic reached the sink
    # Debezium's ZonedTimestamp (a string on the wire) is a TIMESTAMP in the pools and a
    # timestamptz in the warehouse, the instant the source holds.
    assert_column_as_in_source(chain, "created_at")
    assert_lake_tables_equal_the_source(spark, chain)
    print(f"{wire_format}: converged in {seconds:.1f}s, {workload.transactions} transactions")


@pytest.mark.timeout(900)
def test_gated_by_debeziums_transaction_topic_each_source_transaction_lands_whole(
    stack: Stack, cdc_ports: CdcPorts, spark, registry: Registry, lake: Path, tmp_path: Path
) -> None:
    """The same chain with every rule `gate: transaction`, over the connector's real
    `<prefix>.transaction` topic: the warehouse still equals the source's join, each source
    transaction's outputs are in one staging commit, and to-kafka, asked for one record
    per Kafka transaction, still sends each source transaction in one."""
    chain = make_chain(stack, cdc_ports, "gated_avro", "avro")
    spec = chain_spec(chain, tmp_path, gated=True)
    chain.create_source_tables()
    chain.start_source_connector()
    chain.start_sink_connector()
    workload = Workload(seed=18)
    workload.run(chain.source, TRANSACTIONS // 4)
    step = lambda: pipeline_pass(spark, spec, stack, registry, transaction_size=1)  # noqa: E731
    converge(chain, step, spark=spark)

    assert_no_duplicates(spark, chain)
    assert_no_dead_letters(spark, chain)
    staging = spark.read.format("delta").load(pool_path(f"{chain.name}_staging"))
    outputs = staging.where("kind = 'output'").selectExpr("kafka.offset AS o", "txn", "run")
    rows = sorted(outputs.collect())
    assert [r.o for r in rows] == list(range(len(rows)))
    sent = [r.offset for r in kafka_records(stack, chain.output_topic)]  # i-th: staging i
    assert len(sent) == len(rows)
    spans: dict[str, list] = {}
    for row, at in zip(rows, sent, strict=True):
        if row.txn is not None:
            spans.setdefault(row.txn, []).append((row.run, at))
    assert any(len(members) > 1 for members in spans.values()), "nothing to prove"
    committed = set(sent)
    for txn, members in spans.items():
        assert len({run for run, _ in members}) == 1, (txn, members)  # one staging commit
        low, high = min(at for _, at in members), max(at for _, at in members)
        # No commit marker (an offset holding no record) between its first and last
        # record: one Kafka transaction, whatever else it holds.
        assert all(o in committed for o in range(low, high + 1)), (txn, members)
