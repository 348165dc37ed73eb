"""`type: view` rules: a keyed output that equals SQL over the current rows of its inputs.
Real Kafka, ingest and ETL passes on Spark, to-kafka; the output topic read back and
replayed as an upserting sink would, against the same SQL evaluated by SQLite over the
source rows the test keeps itself."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from zync_assets.errors import ZyncError
from zync_assets.etl.compile import compile_rules
from zync_assets.kafka.clients import ensure_topic
from zync_assets.kafka.registry import Registry
from zync_assets.pools import pool_path
from zync_assets.spec import load_spec
from zync_assets.tokafka.sync import sync_pool
from zync_assets_tests.conftest import Stack
from zync_assets_tests.test_transactions import etl_pass

pytestmark = pytest.mark.integration

# Accounts with their customer's columns: many accounts per customer (one-to-many seen
# from customers, many-to-one from accounts), an account without a customer kept (LEFT).
VIEW_SPEC = """
inputs:
  - {{topic: {p}.accounts, pool: {p}_raw, format: json}}
  - {{topic: {p}.customers, pool: {p}_raw, format: json}}
outputs:
  - {{topic: {p}_view, pool: {p}_staging, format: json}}
transforms:
  - type: view
    inputs: {{a: {p}.accounts, c: {p}.customers}}
    key: id
    out: {p}_view
    sql: |
      SELECT a.after:id::bigint AS id,
             a.after:balance::bigint AS balance,
             c.after:name::string AS customer,
             upper(c.after:tier::string) AS tier
      FROM a LEFT JOIN c ON a.after:customer_id::bigint = c.after:id::bigint
      WHERE a.after:balance::bigint >= 0
"""

# The same query over plain tables, for SQLite (the reference).
REFERENCE_SQL = """
SELECT a.id, a.balance, c.name AS customer, upper(c.tier) AS tier
FROM accounts a LEFT JOIN customers c ON a.customer_id = c.id
WHERE a.balance >= 0
"""


class Source:
    """The source database as the test sees it, and Debezium's events for its changes."""

    def __init__(self, stack: Stack, p: str) -> None:
        self.p = p
        self.rows: dict[str, dict[int, dict]] = {"accounts": {}, "customers": {}}
        self.producer = Producer({**stack.kafka.client_config(), "enable.idempotence": True})
        self.sent: list[tuple[str, bytes | None, bytes | None, int]] = []
        self.clock = int(dt.datetime.now(dt.UTC).timestamp() * 1000)

    def _send(self, table: str, key: Any, value: Any) -> None:
        self.clock += 1
        topic = f"{self.p}.{table}"
        raw_key = None if key is None else json.dumps(key).encode()
        raw_value = None if value is None else json.dumps(value).encode()
        self.sent.append((topic, raw_key, raw_value, self.clock))
        self.producer.produce(topic, raw_value, raw_key, timestamp=self.clock)

    def upsert(self, table: str, row: dict) -> None:
        before = self.rows[table].get(row["id"])
        self.rows[table][row["id"]] = row
        op = "u" if before else "c"
        self._send(table, {"id": row["id"]}, {"op": op, "before": before, "after": row})

    def delete(self, table: str, row_id: int) -> None:
        before = self.rows[table].pop(row_id)
        self._send(table, {"id": row_id}, {"op": "d", "before": before, "after": None})
        self._send(table, {"id": row_id}, None)  # Debezium's tombstone

    def move(self, table: str, old: int, new: int) -> None:
        """A primary-key update: Debezium's delete of the old key, then a create."""
        row = dict(self.rows[table][old], id=new)
        self.delete(table, old)
        self.upsert(table, row)

    def truncate(self, table: str) -> None:
        self.rows[table].clear()
        self._send(table, None, {"op": "t", "before": None, "after": None})

    def resend_last(self, n: int) -> None:
        """Debezium's at-least-once delivery after a crash: the last n events again."""
        for topic, key, value, _ts in self.sent[-n:]:
            self.clock += 1
            self.producer.produce(topic, value, key, timestamp=self.clock)

    def flush(self) -> None:
        assert self.producer.flush(30) == 0

    def expected(self) -> dict[int, dict]:
        """The query over the source's current rows (SQLite), by view key."""
        db = sqlite3.connect(":memory:")
        db.execute("CREATE TABLE accounts (id INTEGER, balance INTEGER, customer_id INTEGER)")
        db.execute("CREATE TABLE customers (id INTEGER, name TEXT, tier TEXT)")
        for row in self.rows["accounts"].values():
            db.execute("INSERT INTO accounts VALUES (?, ?, ?)",
                       (row["id"], row["balance"], row.get("customer_id")))  # fmt: skip
        for row in self.rows["customers"].values():
            db.execute("INSERT INTO customers VALUES (?, ?, ?)",
                       (row["id"], row["name"], row["tier"]))  # fmt: skip
        cursor = db.execute(REFERENCE_SQL)
        names = [d[0] for d in cursor.description]
        return {r[0]: dict(zip(names, r, strict=True)) for r in cursor.fetchall()}


def sink_table(stack: Stack, topic: str) -> dict[int, dict]:
    """What an upserting sink builds from the topic: per key the latest value, none after
    a tombstone. Reads committed records only."""
    consumer = Consumer({**stack.kafka.client_config(), "group.id": uuid.uuid4().hex,
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         "auto.offset.reset": "earliest"})  # fmt: skip
    table: dict[int, dict] = {}
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        while (message := consumer.poll(10)) is not None and not message.error():
            key = json.loads(message.key())
            key = key.get("payload", key)
            if message.value() is None:
                table.pop(key["id"], None)
            else:
                value = json.loads(message.value())
                table[key["id"]] = value.get("payload", value)
    finally:
        consumer.close()
    return table


def view_topics(stack: Stack) -> str:
    p = f"vw{uuid.uuid4().hex[:6]}"
    for topic in (f"{p}.accounts", f"{p}.customers"):
        ensure_topic(stack.kafka, topic, 1)
    return p


def step(spark, stack: Stack, registry: Registry, spec: Path, source: Source) -> dict[int, dict]:
    """One ETL pass and its to-kafka; the sink's table after it, checked against the query."""
    source.flush()
    etl_pass(spark, stack, registry, spec)
    sync_pool(spark, f"{source.p}_staging", stack.kafka, registry, default_format="json")
    table = sink_table(stack, f"{source.p}_view")
    assert table == source.expected()
    return table


def test_a_view_equals_its_query_over_current_rows_through_every_kind_of_change(
    spark, stack: Stack, registry: Registry, lake: Path, tmp_path: Path
) -> None:
    p = view_topics(stack)
    spec = tmp_path / "view.yaml"
    spec.write_text(VIEW_SPEC.format(p=p))
    src = Source(stack, p)
    # Accounts first (their customers arrive later): a LEFT join keeps them, without.
    src.upsert("accounts", {"id": 101, "balance": 10, "customer_id": 1})
    src.upsert("accounts", {"id": 102, "balance": 20, "customer_id": 1})
    src.upsert("accounts", {"id": 103, "balance": 30, "customer_id": 2})
    first = step(spark, stack, registry, spec, src)
    assert first[101] == {"id": 101, "balance": 10, "customer": None, "tier": None}

    src.upsert("customers", {"id": 1, "name": "ann", "tier": "gold"})
    src.upsert("customers", {"id": 2, "name": "bob", "tier": "blue"})
    assert step(spark, stack, registry, spec, src)[102]["customer"] == "ann"

    # One customer's change reaches all of its accounts; a key update moves the row.
    src.upsert("customers", {"id": 1, "name": "ann", "tier": "platinum"})
    src.move("accounts", 102, 9102)
    table = step(spark, stack, registry, spec, src)
    assert {table[101]["tier"], table[9102]["tier"]} == {"PLATINUM"} and 102 not in table

    # A deleted customer leaves its accounts without; re-inserted, it is back. An account
    # that stops matching the filter goes; within one pass the last change of a key wins.
    src.delete("customers", 2)
    src.upsert("accounts", {"id": 101, "balance": -5, "customer_id": 1})
    src.upsert("accounts", {"id": 104, "balance": 1, "customer_id": 2})
    src.upsert("accounts", {"id": 104, "balance": 2, "customer_id": 2})
    table = step(spark, stack, registry, spec, src)
    assert 101 not in table and table[103]["customer"] is None and table[104]["balance"] == 2
    src.upsert("customers", {"id": 2, "name": "bob", "tier": "green"})
    assert step(spark, stack, registry, spec, src)[104]["tier"] == "GREEN"

    # Debezium re-sends after a crash: the rows are what they were, nothing is sent.
    before = kafka_count(stack, f"{p}_view")
    src.resend_last(3)
    step(spark, stack, registry, spec, src)
    assert kafka_count(stack, f"{p}_view") == before

    # A truncate empties the table, and rows after it in the same pass stay.
    src.truncate("accounts")
    src.upsert("accounts", {"id": 105, "balance": 5, "customer_id": 1})
    assert step(spark, stack, registry, spec, src) == {
        105: {"id": 105, "balance": 5, "customer": "ann", "tier": "PLATINUM"}
    }
    # The view's row versions live in its staging pool, committed with its outputs.
    staging = spark.read.format("delta").load(pool_path(f"{p}_staging"))
    assert staging.where("kind = 'view'").count() > 0


def kafka_count(stack: Stack, topic: str) -> int:
    consumer = Consumer({**stack.kafka.client_config(), "group.id": uuid.uuid4().hex})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()
    return high - low


def bad_view(folder: Path, rule: str) -> Path:
    path = folder / "bad.yaml"
    path.write_text(
        "inputs:\n  - {topic: a, pool: Raw}\n  - {topic: c, pool: Raw}\n"
        "outputs:\n  - {topic: Out, pool: Staging}\n  - {topic: Two, pool: Staging}\n"
        "transforms:\n" + rule
    )
    return path


VIEW = "  - type: view\n    inputs: {a: a, c: c}\n    key: id\n    out: Out\n"


@pytest.mark.parametrize(
    ("rule", "error"),
    [
        (VIEW + "    sql: SELECT a.after:id::bigint AS id FROM a JOIN nope n ON true\n",
         "transforms[1] sql: [TABLE_OR_VIEW_NOT_FOUND]"),
        (VIEW + "    sql: SELECT a.after:x::bigint AS x FROM a\n",
         "transforms[1] sql: yields no column 'id' of its key (id); it yields x"),
        (VIEW + "    sql: SELECT 1 AS id, 2 AS id FROM a\n",
         "transforms[1] sql: yields column 'id' twice"),
    ],
)  # fmt: skip
def test_a_view_whose_sql_cannot_run_is_refused_before_any_data_is_read(
    spark, tmp_path: Path, rule: str, error: str
) -> None:
    with pytest.raises(ZyncError) as caught:
        compile_rules(spark, load_spec(bad_view(tmp_path, rule)))
    assert error in str(caught.value)
