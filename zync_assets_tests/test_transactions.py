"""`gate: transaction` with Debezium-shaped transaction metadata: BEGIN/END records on
`<prefix>.transaction` (`id`, `event_count`, `data_collections[]`) and data events carrying
`transaction{id, total_order, data_collection_order}`, on two topics of two partitions.
Real Kafka, ingest and ETL passes on Spark; each pass's outputs read back from staging."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from zync_assets.core.errors import ZyncError
from zync_assets.etl.report import pending_report, waiting_events
from zync_assets.etl.run import run_etl
from zync_assets.ingest.ingest import ingest
from zync_assets.kafka.clients import ensure_topic
from zync_assets.kafka.registry import Registry
from zync_assets.lake.pools import dead_letter_path, pool_exists, pool_path
from zync_assets.specs.model import load_spec
from zync_assets.tokafka.sync import sync_pool, sync_topic
from zync_assets_tests.conftest import Stack

pytestmark = pytest.mark.integration

TABLES = ("orders", "items")


@dataclass
class Source:
    """A Debezium-like connector: a topic per table (two partitions) and the transaction topic."""

    stack: Stack
    prefix: str
    queued: list[tuple[str, int, bytes | None, bytes | None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for table in TABLES:
            ensure_topic(self.stack.kafka, self.topic(table), 2)
        ensure_topic(self.stack.kafka, self.transactions, 1)

    def topic(self, table: str) -> str:
        return f"{self.prefix}.public.{table}"

    @property
    def transactions(self) -> str:
        return f"{self.prefix}.transaction"

    def send(self, topic: str, partition: int, key: object, value: object) -> None:
        encode = lambda v: None if v is None else json.dumps(v).encode()  # noqa: E731
        self.queued.append((topic, partition, encode(key), encode(value)))

    def flush(self) -> None:
        """Send what was queued, in order (a producer per flush: none outlives the test)."""
        producer = Producer({**self.stack.kafka.client_config(), "enable.idempotence": True})
        for topic, partition, key, value in self.queued:
            producer.produce(topic, value, key, partition=partition)
        assert producer.flush(30) == 0
        self.queued.clear()


@dataclass
class Txn:
    """One source transaction: its events in commit order, then BEGIN/END markers."""

    source: Source
    id: str
    rows: list[tuple[str, int, int]] = field(default_factory=list)  # table, row id, partition

    def change(self, table: str, row: int, partition: int) -> Txn:
        self.rows.append((table, row, partition))
        return self

    def begin(self) -> None:
        self.source.send(self.source.transactions, 0, {"id": self.id},
                         {"status": "BEGIN", "id": self.id, "event_count": None,
                          "data_collections": None, "ts_ms": 1})  # fmt: skip

    def end(self) -> None:
        counts = {t: sum(1 for r in self.rows if r[0] == t) for t in TABLES}
        collections = [{"data_collection": f"public.{t}", "event_count": n}
                       for t, n in counts.items() if n]  # fmt: skip
        # As Debezium's PostgreSQL connector writes it: `<txId>:<LSN>`, with the commit's
        # LSN, where BEGIN and the events have the BEGIN's.
        txid, begin_lsn = self.id.split(":")
        end_id = f"{txid}:{int(begin_lsn) + 7}"
        self.source.send(self.source.transactions, 0, {"id": end_id},
                         {"status": "END", "id": end_id, "event_count": len(self.rows),
                          "data_collections": collections, "ts_ms": 2})  # fmt: skip

    def event(self, index: int) -> None:
        """The index-th change of the transaction, as Debezium writes it."""
        table, row, partition = self.rows[index]
        order = sum(1 for r in self.rows[: index + 1] if r[0] == table)
        value = {
            "op": "c", "before": None, "after": {"id": row, "table": table}, "ts_ms": 3,
            "source": {"table": table},
            "transaction": {"id": self.id, "total_order": index + 1,
                            "data_collection_order": order},
        }  # fmt: skip
        self.source.send(self.source.topic(table), partition, {"id": row}, value)

    def events(self, *indexes: int) -> None:
        for index in indexes or range(len(self.rows)):
            self.event(index)


def write_spec(
    folder: Path, source: Source, raw: str, staging: str, expire: str = "", split: bool = False
) -> Path:
    """Gated rules, one per table, to `<prefix>_out` (or, `split`, to `<prefix>_<table>`)."""
    expiry = f", expire-after: {expire}" if expire else ""
    out = {t: f"{source.prefix}_{t if split else 'out'}" for t in TABLES}
    rules = "\n".join(
        f"  - {{type: stateless, gate: transaction, in: {source.topic(t)}, out: {out[t]}"
        f"{expiry}, sql: \"in.key AS key, named_struct('table', '{t}', 'id', in.after:id::bigint,"
        f" 'txn', in.value:transaction.id::string) AS value\"}}"
        for t in TABLES
    )
    inputs = "\n".join(
        f"  - {{topic: {topic}, pool: {raw}, format: json}}"
        for topic in (*(source.topic(t) for t in TABLES), source.transactions)
    )
    outputs = "\n".join(
        f"  - {{topic: {topic}, pool: {staging}, format: json}}"
        for topic in sorted(set(out.values()))
    )
    path = folder / f"{source.prefix}.yaml"
    path.write_text(f"inputs:\n{inputs}\noutputs:\n{outputs}\ntransforms:\n{rules}\n")
    return path


@dataclass(frozen=True)
class Output:
    run: int
    offset: int
    table: str
    id: int
    txn: str | None


def outputs(spark, staging: str) -> list[Output]:
    frame = spark.read.format("delta").load(pool_path(staging)).where("kind = 'output'")
    rows = frame.selectExpr(
        "run", "kafka.offset AS o", "value:table::string AS t", "value:id::bigint AS i",
        "value:txn::string AS x",
    ).collect()  # fmt: skip
    return sorted((Output(r.run, r.o, r.t, r.i, r.x) for r in rows), key=lambda o: o.offset)


def etl_pass(spark, stack: Stack, registry: Registry, spec_path: Path, now=None):
    spec = load_spec(spec_path)
    for pool, topics in spec.raw_pools().items():
        ingest(spark, pool, topics, stack.kafka, registry, formats=spec.formats())
    [result] = run_etl(spark, spec, now=now)
    return result


def kafka_offsets(stack: Stack, topic: str) -> list[tuple[int, dict]]:
    """(offset, JSON value) of each committed record of one-partition `topic`: a Kafka
    transaction's commit marker takes an offset, so a gap marks where one ended."""
    consumer = Consumer({**stack.kafka.client_config(), "group.id": uuid.uuid4().hex,
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         "auto.offset.reset": "earliest"})  # fmt: skip
    found = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        while (message := consumer.poll(10)) is not None and not message.error():
            value = json.loads(message.value() or b"null")
            offset = message.offset()
            assert offset is not None
            found.append((offset, value.get("payload", value)))
    finally:
        consumer.close()
    return found


def by_txn(found: list[Output]) -> dict[str | None, list[Output]]:
    groups: dict[str | None, list[Output]] = {}
    for out in found:
        groups.setdefault(out.txn, []).append(out)
    return groups


def test_a_transactions_outputs_wait_for_its_end_and_all_its_events_then_land_together(
    spark, stack: Stack, registry: Registry, lake: Path, tmp_path: Path
) -> None:
    source = Source(stack, f"txn{uuid.uuid4().hex[:6]}")
    raw, staging = f"{source.prefix}_raw", f"{source.prefix}_staging"
    spec = write_spec(tmp_path, source, raw, staging)
    t1 = Txn(source, "501:10").change("orders", 1, 0).change("items", 11, 1).change("items", 12, 0)
    t2 = Txn(source, "502:20").change("orders", 2, 1)
    t3 = Txn(source, "503:30").change("orders", 3, 0).change("items", 13, 1)  # never ends
    t4 = Txn(source, "504:40").change("orders", 4, 1).change("items", 14, 0)
    # Pass 1: t1's END arrives before its last event; t2 is whole; t3 has no END; t4's
    # events are all in but its END comes only in pass 2 (a transaction across passes).
    t1.begin()
    t1.events(0, 1)
    t2.begin()
    t2.events()
    t2.end()
    t1.end()
    t3.begin()
    t3.events(0)
    t4.begin()
    t4.events()
    source.send(
        source.topic("orders"), 0, {"id": 9}, {"op": "c", "after": {"id": 9}}
    )  # no metadata
    source.flush()
    first = etl_pass(spark, stack, registry, spec)
    found = by_txn(outputs(spark, staging))
    assert set(found) == {"502:20", None}, found  # t2, and the event without metadata
    assert [(o.table, o.id) for o in found["502:20"]] == [("orders", 2)]
    assert first.pending == 6  # t1's two events and END, t3's event, t4's two events
    assert first.transactions.open == 3  # t1, t3, t4
    pending = waiting_events(spark, load_spec(spec), staging)
    reasons = {(w.topic, w.partition, w.offset): w.reason for w in pending}
    items, orders = source.topic("items"), source.topic("orders")
    t1_waits = f"waits for source transaction 501: {items} 1 of 2 events"
    assert reasons[(source.transactions, 0, 3)] == t1_waits  # t1's END
    assert reasons[(items, 1, 0)] == t1_waits
    assert reasons[(orders, 0, 1)] == "waits for source transaction 503: its END record"
    assert reasons[(items, 0, 0)] == "waits for source transaction 504: its END record"
    # Pass 2: t1's last event, t4's END, t3's second event (t3 still has no END).
    t1.events(2)
    t4.end()
    t3.events(1)
    source.flush()
    second = etl_pass(spark, stack, registry, spec)
    found = by_txn(outputs(spark, staging))
    assert set(found) == {"502:20", None, "501:10", "504:40"}
    for txn, rows in (("501:10", 3), ("504:40", 2)):
        assert len(found[txn]) == rows
        assert {o.run for o in found[txn]} == {second.run}  # one staging commit
        offsets = sorted(o.offset for o in found[txn])
        assert offsets == list(range(offsets[0], offsets[0] + rows))  # together
    # t1's END came before t4's: t1's outputs first (commit order).
    assert max(o.offset for o in found["501:10"]) < min(o.offset for o in found["504:40"])
    all_offsets = sorted(o.offset for o in outputs(spark, staging))
    assert all_offsets == list(range(len(all_offsets)))
    assert second.pending == 2  # t3's two events wait for its END
    assert second.transactions.open == 1
    report = pending_report(spark, load_spec(spec))
    assert report[0].startswith("open source transaction 503 age ")
    assert report[0].endswith(": waits for its END record"), report
    # to-kafka, one record per Kafka transaction asked: a source transaction still goes in one.
    sync_pool(spark, staging, stack.kafka, registry, transaction_size=1, default_format="json")
    sent = kafka_offsets(stack, f"{source.prefix}_out")
    assert len(sent) == len(all_offsets)
    for txn in ("501:10", "504:40"):
        mine = sorted(o for o, value in sent if value.get("txn") == txn)
        assert mine == list(range(mine[0], mine[0] + len(mine))), (txn, sent)  # no marker
    singles = sorted(o for o, value in sent if value.get("txn") in ("502:20", None))
    assert all(b - a >= 2 for a, b in itertools.pairwise(singles)), sent  # a marker each
    assert second.cursors[source.topic("orders")][0] == 1  # held at t3's event


def test_a_later_transaction_on_a_held_key_waits_whole_and_an_open_one_expires(
    spark, stack: Stack, registry: Registry, lake: Path, tmp_path: Path
) -> None:
    source = Source(stack, f"txn{uuid.uuid4().hex[:6]}")
    raw, staging = f"{source.prefix}_raw", f"{source.prefix}_staging"
    spec = write_spec(tmp_path, source, raw, staging, expire="1h")
    open_one = Txn(source, "601:10").change("orders", 1, 0)  # never ends
    later = Txn(source, "602:20").change("orders", 1, 0).change("items", 21, 1)  # same key
    open_one.begin()
    open_one.events()
    later.begin()
    later.events()
    later.end()
    source.flush()
    etl_pass(spark, stack, registry, spec)
    # `later` is complete, but its orders event is behind the open one's (same key): the
    # whole transaction waits, its items event too.
    assert not pool_exists(pool_path(staging)) or outputs(spark, staging) == []
    # Two hours on, the open transaction expires into the dead-letter table, and `later`
    # goes, whole, in the same pass.
    result = etl_pass(
        spark, stack, registry, spec, now=dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
    )
    assert result.expired == 1 and result.transactions.expired == 1
    found = by_txn(outputs(spark, staging))
    assert set(found) == {"602:20"} and len(found["602:20"]) == 2
    dead = spark.read.format("delta").load(dead_letter_path(staging)).collect()
    assert [(r.topic, r.offset) for r in dead] == [(source.topic("orders"), 0)]
    assert "source transaction 601:10 did not complete" in dead[0].reason


def test_a_table_from_a_gated_output_applies_each_source_transaction_in_one_commit(
    spark, stack: Stack, registry: Registry, lake: Path, tmp_path: Path
) -> None:
    from zync_assets.lake.pools import table_path
    from zync_assets.tables.together import run_tables

    source = Source(stack, f"txn{uuid.uuid4().hex[:6]}")
    raw, staging = f"{source.prefix}_raw", f"{source.prefix}_staging"
    spec = write_spec(tmp_path, source, raw, staging)
    name = f"{source.prefix}_rows"
    spec.write_text(
        spec.read_text()
        + f"tables:\n  - {{name: {name}, source: {source.prefix}_out, keys: [table, id]}}\n"
    )
    t1 = Txn(source, "801:10").change("orders", 1, 0).change("items", 11, 1).change("items", 12, 0)
    t2 = Txn(source, "802:20").change("orders", 2, 1).change("items", 21, 0)
    # Ingest 1 has all of t2 and all but one event of t1 (END included): the table's first
    # pass applies t2 only; its second, all of t1 at once.
    t1.begin()
    t1.events(0, 1)
    t1.end()
    t2.begin()
    t2.events()
    t2.end()
    source.flush()
    etl_pass(spark, stack, registry, spec)
    [first] = run_tables(spark, load_spec(spec))
    t1.events(2)
    source.flush()
    etl_pass(spark, stack, registry, spec)
    [second] = run_tables(spark, load_spec(spec))
    assert (first.run, second.run) == (1, 2)
    feed = (
        spark.read.format("delta").option("readChangeFeed", "true")
        .option("startingVersion", 0).load(table_path(name))
        .where("_change_type = 'insert'")
        .selectExpr("txn", "_commit_version AS v").collect()
    )  # fmt: skip
    versions: dict[str, set[int]] = {}
    for row in feed:
        versions.setdefault(row.txn, set()).add(row.v)
    assert set(versions) == {"801:10", "802:20"}
    assert all(len(v) == 1 for v in versions.values()), versions  # each in one commit
    assert versions["802:20"] != versions["801:10"]


def test_a_source_transaction_across_two_topics_is_one_kafka_transaction(
    spark, stack: Stack, registry: Registry, lake: Path, tmp_path: Path
) -> None:
    """Orders and items go to two topics of one staging pool: after every Kafka commit, a
    read_committed consumer of both sees each source transaction whole or not at all."""
    source = Source(stack, f"txn{uuid.uuid4().hex[:6]}")
    raw, staging = f"{source.prefix}_raw", f"{source.prefix}_staging"
    spec = write_spec(tmp_path, source, raw, staging, split=True)
    topics = [f"{source.prefix}_{t}" for t in TABLES]
    txns = [
        Txn(source, f"90{n}:{n}0").change("orders", n, n % 2).change("items", 10 + n, 0)
        .change("items", 20 + n, 1)
        for n in range(1, 5)
    ]  # fmt: skip
    txns.append(Txn(source, "909:90").change("orders", 9, 0))  # one table only
    for txn in txns:
        txn.begin()
        txn.events()
        txn.end()
    source.flush()
    etl_pass(spark, stack, registry, spec)
    staged = {txn: len(rows) for txn, rows in by_txn(outputs(spark, staging)).items()}
    assert staged == {**{f"90{n}:{n}0": 3 for n in range(1, 5)}, "909:90": 1}

    def committed() -> dict[str, int]:
        seen: dict[str, int] = {}
        for topic in topics:
            for _, value in kafka_offsets(stack, topic):
                seen[value["txn"]] = seen.get(value["txn"], 0) + 1
        return seen

    views = []

    def after_each_commit(topic: str, sent: int, total: int) -> None:
        view = committed()
        halves = {txn: n for txn, n in view.items() if n != staged[txn]}
        assert not halves, f"after sending {sent} of {topic}: {halves} of {staged}"
        views.append(len(view))

    results = sync_pool(spark, staging, stack.kafka, registry, transaction_size=1,
                        default_format="json", progress=after_each_commit)  # fmt: skip
    assert sorted(r.topic for r in results) == sorted(topics)
    assert sum(r.sent for r in results) == sum(staged.values())
    assert committed() == staged  # each exactly once
    # One source transaction per Kafka transaction (one record asked for each): five
    # commits, each seen with one more transaction than the one before.
    assert sorted(set(views)) == [1, 2, 3, 4, 5]
    again = sync_pool(spark, staging, stack.kafka, registry, default_format="json")
    assert [r.sent for r in again] == [0, 0]
    with pytest.raises(ZyncError, match=r"sent together, not .* alone: sync the pool"):
        sync_topic(spark, staging, topics[0], stack.kafka, registry, wire_format="json")
