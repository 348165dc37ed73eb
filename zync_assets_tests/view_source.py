"""A source database of accounts and customers as view tests see it: its rows, the
Debezium events its changes make (JSON envelopes on Kafka), and its views evaluated by
SQLite over its current rows, the reference a view's output is held to."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from zync_assets.etl import views
from zync_assets.kafka.clients import ensure_topic
from zync_assets_tests.conftest import Stack

TABLES = {
    "accounts": ("id", "balance", "customer_id"),
    "customers": ("id", "name", "tier"),
}
PARTITIONS = {"accounts": 3, "customers": 2}
PLACEHOLDER = "__debezium_unavailable_value"  # Debezium's, for an unchanged TOASTed column


class Source:
    """The source's current rows, and Debezium's events for each change, sent to
    `<p>.accounts` and `<p>.customers` (a key's events to one partition, by its id)."""

    def __init__(self, stack: Stack, p: str) -> None:
        self.p = p
        self.rows: dict[str, dict[int, dict]] = {table: {} for table in TABLES}
        self.producer = Producer({**stack.kafka.client_config(), "enable.idempotence": True})
        self.sent: list[tuple[str, int, bytes | None, bytes | None]] = []
        self.clock = int(dt.datetime.now(dt.UTC).timestamp() * 1000)
        for table, partitions in PARTITIONS.items():
            ensure_topic(stack.kafka, f"{p}.{table}", partitions)

    def _send(self, table: str, key: Any, value: Any) -> None:
        topic = f"{self.p}.{table}"
        partition = 0 if key is None else key["id"] % PARTITIONS[table]
        raw_key = None if key is None else json.dumps(key).encode()
        raw_value = None if value is None else json.dumps(value).encode()
        self.sent.append((topic, partition, raw_key, raw_value))
        self._produce(topic, partition, raw_key, raw_value)

    def _produce(self, topic: str, partition: int, key: bytes | None, value: bytes | None) -> None:
        self.clock += 1  # source order across topics is by Kafka timestamp
        self.producer.produce(topic, value, key, partition=partition, timestamp=self.clock)

    def upsert(self, table: str, row: dict) -> None:
        before = self.rows[table].get(row["id"])
        self.rows[table][row["id"]] = row
        op = "u" if before else "c"
        self._send(table, {"id": row["id"]}, {"op": op, "before": before, "after": row})

    def upsert_leaving_out(self, table: str, row: dict, column: str) -> None:
        """An update that leaves TOASTed `column` as it was: Debezium sends its placeholder
        (PostgreSQL's default replica identity)."""
        before = self.rows[table][row["id"]]
        self.rows[table][row["id"]] = dict(row, **{column: before[column]})
        after = dict(row, **{column: PLACEHOLDER})
        self._send(table, {"id": row["id"]}, {"op": "u", "before": None, "after": after})

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
        for topic, partition, key, value in self.sent[-n:]:
            self._produce(topic, partition, key, value)

    def flush(self) -> None:
        assert self.producer.flush(30) == 0

    def query(self, sql: str, keyed_by: int = 1) -> dict[Any, dict]:
        """`sql` over the source's current rows (SQLite), by its first column (by the tuple
        of its first `keyed_by` columns)."""
        db = sqlite3.connect(":memory:")
        for table, columns in TABLES.items():
            db.execute(f"CREATE TABLE {table} ({', '.join(columns)})")
            marks = ", ".join("?" for _ in columns)
            db.executemany(
                f"INSERT INTO {table} VALUES ({marks})",
                [tuple(row.get(c) for c in columns) for row in self.rows[table].values()],
            )
        cursor = db.execute(sql)
        names = [d[0] for d in cursor.description]
        return {
            r[0] if keyed_by == 1 else tuple(r[:keyed_by]): dict(zip(names, r, strict=True))
            for r in cursor.fetchall()
        }


def sink_table(stack: Stack, topic: str, key: tuple[str, ...] = ("id",)) -> dict[Any, dict]:
    """What an upserting sink builds from a one-partition topic: per key the latest value,
    none after a tombstone. Committed records only. Keyed by the key's `id`, or by the
    tuple of the `key` columns named when there are several."""
    consumer = Consumer({**stack.kafka.client_config(), "group.id": uuid.uuid4().hex,
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         "auto.offset.reset": "earliest"})  # fmt: skip
    table: dict[Any, dict] = {}
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        while (message := consumer.poll(10)) is not None and not message.error():
            fields = json.loads(message.key() or b"null")
            fields = fields.get("payload", fields)
            name = fields[key[0]] if len(key) == 1 else tuple(fields.get(c) for c in key)
            if (raw := message.value()) is None:
                table.pop(name, None)
            else:
                value = json.loads(raw)
                table[name] = value.get("payload", value)
    finally:
        consumer.close()
    return table


def records_in(stack: Stack, topic: str) -> int:
    """The offsets a one-partition topic has taken (records and commit markers)."""
    consumer = Consumer({**stack.kafka.client_config(), "group.id": uuid.uuid4().hex})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()
    return high - low


def reached_path(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every view evaluated over the rows its changes reach (view_reach.py), the path a
    view above views.WHOLE_VIEW_ROWS takes, however small the test's view is. Returns
    a list that gets an entry per pass that took the path: a test asserts it is not
    empty, so a forced path that stopped being forced fails instead of passing unseen."""
    monkeypatch.setattr(views, "WHOLE_VIEW_ROWS", -1)
    taken: list[int] = []
    reached = views._reached_view

    def counted(*args: Any, **kwargs: Any) -> Any:
        taken.append(1)
        return reached(*args, **kwargs)

    monkeypatch.setattr(views, "_reached_view", counted)
    return taken
