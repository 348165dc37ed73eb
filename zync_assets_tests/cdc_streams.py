"""Random Debezium-shaped change streams of orders and payments, for the ETL model test.

A *case* is a short story about a few orders and payments: creates (or snapshot reads),
updates, deletes followed by tombstones, re-creates, payments whose order arrives
first, later, twice or never, payments that move to another order. Each case has its
own ids, so many cases share two topics without meeting, and each is cut into chunks
that reach Kafka in different rounds.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

ORDERS, PAYMENTS = "Orders", "Payments"
PARTITIONS = {ORDERS: 3, PAYMENTS: 2}


# The spec these streams go through ($Name: the test's own topic names). Partial rows
# for updates (an upserting sink keeps the other columns), a tombstone for a delete.
EXPIRE_OFFSETS = 30

SPEC = f"""
inputs:
  - {{topic: $Orders, pool: Raw}}
  - {{topic: $Payments, pool: Raw}}
outputs:
  - {{topic: $Out, pool: Staging}}
transforms:
  - type: denorm
    where: op IN ('c', 'r')
    left: $Orders
    right: $Payments
    join-on: left.after:id::bigint = right.after:order_id::bigint
    out: $Out
    expire-after: {EXPIRE_OFFSETS} offsets
    sql: |
      named_struct('id', left.after:id::bigint) AS key,
      named_struct('id', left.after:id::bigint, 'item', left.after:item::string,
                   'status', right.after:status::string,
                   'amount', right.after:amount::bigint) AS value
  - type: stateless
    where: op = 'u'
    in: $Payments
    out: $Out
    sql: |
      named_struct('id', in.after:order_id::bigint) AS key,
      named_struct('id', in.after:order_id::bigint, 'status', in.after:status::string,
                   'amount', in.after:amount::bigint) AS value
  - type: stateless
    where: op = 'u'
    in: $Orders
    out: $Out
    sql: |
      named_struct('id', in.after:id::bigint) AS key,
      named_struct('id', in.after:id::bigint, 'item', in.after:item::string) AS value
  - type: stateless
    where: op = 'd'
    in: $Orders
    out: $Out
    sql: in.key AS key, NULL AS value
"""


@dataclass(frozen=True)
class Change:
    case: int
    topic: str  # ORDERS or PAYMENTS (before the per-test suffix)
    key: dict
    value: dict | None  # None: a tombstone

    @property
    def partition(self) -> int:
        return self.key["id"] % PARTITIONS[self.topic]


def envelope(op: str, before: dict | None, after: dict | None) -> dict:
    return {"op": op, "before": before, "after": after}


class _Case:
    """The source tables of one case, and the changes that made them."""

    def __init__(self, case: int, rng: random.Random) -> None:
        self.case, self.rng = case, rng
        base = case * 100
        self.order_ids = [base + k for k in range(3)]
        self.never = base + 90  # an order id no order ever has
        self.payment_ids = [base + 50 + k for k in range(3)]
        self.orders: dict[int, dict] = {}
        self.payments: dict[int, dict] = {}
        self.changes: list[Change] = []

    def emit(self, topic: str, key_id: int, value: dict | None) -> None:
        self.changes.append(Change(self.case, topic, {"id": key_id}, value))

    def create_order(self) -> None:
        free = [i for i in self.order_ids if i not in self.orders]
        if not free:
            return self.update_order()
        oid = self.rng.choice(free)
        row = {"id": oid, "item": self.rng.choice(["taco", "burrito", "beans"])}
        self.orders[oid] = row
        self.emit(ORDERS, oid, envelope(self.rng.choice("cccr"), None, row))

    def update_order(self) -> None:
        if not self.orders:
            return self.create_order()
        oid = self.rng.choice(sorted(self.orders))
        before = self.orders[oid]
        row = {**before, "item": before["item"] + "+"}
        self.orders[oid] = row
        self.emit(ORDERS, oid, envelope("u", before, row))

    def delete_order(self) -> None:
        if not self.orders:
            return self.create_order()
        oid = self.rng.choice(sorted(self.orders))
        self.emit(ORDERS, oid, envelope("d", self.orders.pop(oid), None))
        if self.rng.random() < 0.6:
            self.emit(ORDERS, oid, None)  # Debezium's tombstone after a delete

    def create_payment(self) -> None:
        free = [i for i in self.payment_ids if i not in self.payments]
        if not free:
            return self.update_payment()
        pid = self.rng.choice(free)
        order = self.rng.choice([*self.order_ids, *self.order_ids, self.never])
        row = {"id": pid, "order_id": order, "status": "new", "amount": self.rng.randint(1, 99)}
        self.payments[pid] = row
        self.emit(PAYMENTS, pid, envelope(self.rng.choice("cccr"), None, row))

    def update_payment(self) -> None:
        if not self.payments:
            return self.create_payment()
        pid = self.rng.choice(sorted(self.payments))
        before = self.payments[pid]
        row = {**before, "status": self.rng.choice(["paid", "refunded", "disputed"])}
        if self.rng.random() < 0.15:
            row["order_id"] = self.rng.choice(self.order_ids)  # moved to another order
        self.payments[pid] = row
        self.emit(PAYMENTS, pid, envelope("u", before, row))

    def delete_payment(self) -> None:
        if not self.payments:
            return self.create_payment()
        pid = self.rng.choice(sorted(self.payments))
        self.emit(PAYMENTS, pid, envelope("d", self.payments.pop(pid), None))


def case_changes(case: int, rng: random.Random, size: int) -> list[Change]:
    story = _Case(case, rng)
    actions = [
        (story.create_order, 3), (story.update_order, 2), (story.delete_order, 1),
        (story.create_payment, 3), (story.update_payment, 3), (story.delete_payment, 1),
    ]  # fmt: skip
    while len(story.changes) < size:
        action = rng.choices([a for a, _ in actions], [w for _, w in actions])[0]
        action()
    return story.changes


def schedule(
    rng: random.Random, cases: int, rounds: int, sizes: tuple[int, int]
) -> list[list[Change]]:
    """Per round, the changes that reach Kafka then: each case's changes in order, cut
    into one to three chunks sent in increasing rounds, cases interleaved."""
    per_round: list[list[list[Change]]] = [[] for _ in range(rounds)]
    for case in range(cases):
        changes = case_changes(case, rng, rng.randint(*sizes))
        cuts = sorted(
            rng.sample(range(1, len(changes)), k=min(rng.randint(0, 2), len(changes) - 1))
        )
        chunks = [changes[a:b] for a, b in zip([0, *cuts], [*cuts, len(changes)], strict=True)]
        at = sorted(rng.sample(range(rounds), k=len(chunks)))
        for when, chunk in zip(at, chunks, strict=True):
            per_round[when].append(chunk)
    out = []
    for chunks in per_round:
        rng.shuffle(chunks)
        merged: list[Change] = []
        while any(chunks):  # interleave the cases' chunks, each in its own order
            chunk = rng.choice([c for c in chunks if c])
            merged.append(chunk.pop(0))
        out.append(merged)
    return out


AvroRecord = dict[str, Any]
KEY_SCHEMA: AvroRecord = {
    "type": "record", "name": "Key", "fields": [{"name": "id", "type": "long"}],
}  # fmt: skip


def value_schema(topic: str) -> AvroRecord:
    if topic == ORDERS:
        row = {"type": "record", "name": "Order", "fields": [
            {"name": "id", "type": "long"}, {"name": "item", "type": "string"}]}  # fmt: skip
    else:
        row = {"type": "record", "name": "Payment", "fields": [
            {"name": "id", "type": "long"}, {"name": "order_id", "type": "long"},
            {"name": "status", "type": "string"}, {"name": "amount", "type": "long"}]}  # fmt: skip
    return {
        "type": "record", "name": "Envelope", "namespace": topic.lower(),
        "fields": [
            {"name": "op", "type": "string"},
            {"name": "before", "type": ["null", row], "default": None},
            {"name": "after", "type": ["null", row["name"]], "default": None},
        ],
    }  # fmt: skip
