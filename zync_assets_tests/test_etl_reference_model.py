"""The reference model itself (etl_model.py) on hand-made streams: it must say what the
design says before the real ETL is compared with it."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from zync_assets_tests import cdc_streams as cdc
from zync_assets_tests.etl_model import Event, Model, Rule, sink_table

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def rules(expire: int | None = None) -> list[Rule]:
    def denorm(left: Event, right: Event) -> tuple:
        return {"id": left.after["id"]}, {
            "item": left.after["item"],
            "status": right.after["status"],
        }

    return [
        Rule(1, "denorm", "Out", lambda e: e.op in ("c", "r"), denorm, left="Orders",
             right="Payments", left_key=lambda e: e.after.get("id"),
             right_key=lambda e: e.after.get("order_id"), expire_offsets=expire),
        Rule(2, "stateless", "Out", lambda e: e.op == "u",
             lambda e: ({"id": e.after["order_id"]}, {"status": e.after["status"]}), input="Payments"),
        Rule(3, "stateless", "Out", lambda e: e.op == "u",
             lambda e: ({"id": e.after["id"]}, {"item": e.after["item"]}), input="Orders"),
    ]  # fmt: skip


class Stream:
    """Events with increasing timestamps and per-partition offsets."""

    def __init__(self) -> None:
        self.offsets: dict[tuple[str, int], int] = {}
        self.clock = 0

    def event(self, topic: str, key: int, op: str, partition: int = 0, **after: object) -> Event:
        offset = self.offsets.get((topic, partition), 0)
        self.offsets[(topic, partition)] = offset + 1
        self.clock += 1
        stamp = T0 + dt.timedelta(milliseconds=self.clock)
        return Event(topic, partition, offset, stamp, {"id": key}, {"op": op, "after": after})


def test_an_update_behind_a_create_follows_its_late_pair() -> None:
    s, model = Stream(), Model(rules())
    model.ingest([
        s.event("Payments", 7, "c", id=7, order_id=1, status="authorized"),
        s.event("Payments", 7, "u", id=7, order_id=1, status="captured"),
    ])  # fmt: skip
    first = model.etl()
    assert (first.run, first.pending) == (None, 2)
    assert {p.why for p in model.pending} == {"waiting", "key"}
    model.ingest([s.event("Orders", 1, "c", id=1, item="taco")])
    model.etl()
    assert [(o.offset, o.value) for o in model.outputs] == [
        (0, {"item": "taco", "status": "authorized"}),
        (1, {"status": "captured"}),
    ]
    assert sink_table([(o.key, o.value) for o in model.outputs]) == {
        '{"id": 1}': {"item": "taco", "status": "captured"}
    }


def test_a_pair_waits_whole_when_one_side_waits_behind_its_key() -> None:
    s, model = Stream(), Model(rules())
    model.ingest([
        s.event("Payments", 7, "c", id=7, order_id=1, status="new"),  # order 1 never comes
        s.event("Payments", 7, "c", id=7, order_id=2, status="new"),  # re-created for order 2
        s.event("Orders", 2, "c", id=2, item="beans"),
        s.event("Orders", 2, "u", id=2, item="rice"),
    ])  # fmt: skip
    result = model.etl()
    assert result.run is None
    why = {p.coords: p.why for p in model.pending}
    assert why == {
        ("Payments", 0, 0): "waiting",
        ("Payments", 0, 1): "key",
        ("Orders", 0, 0): "partner",
        ("Orders", 0, 1): "key",
    }


def test_expiry_releases_what_waited_behind_the_expired_event() -> None:
    s, model = Stream(), Model(rules(expire=1))
    model.ingest([
        s.event("Payments", 7, "c", id=7, order_id=1, status="new"),
        s.event("Payments", 7, "c", id=7, order_id=2, status="new"),
        s.event("Payments", 8, "c", id=8, order_id=3, status="new"),
        s.event("Orders", 2, "c", id=2, item="beans"),
    ])  # fmt: skip
    result = model.etl()
    assert (result.done, result.expired) == (3, 1)  # payment 7's first create, then the pair
    assert [o.value for o in model.outputs] == [{"item": "beans", "status": "new"}]
    assert model.done[("Payments", 0, 0)][0] == "expired"


def test_outputs_follow_transitively_across_both_sides() -> None:
    s, model = Stream(), Model(rules())
    model.ingest([
        s.event("Payments", 7, "c", id=7, order_id=1, status="authorized"),
        s.event("Payments", 7, "u", id=7, order_id=1, status="captured"),
    ])  # fmt: skip
    model.etl()
    model.ingest([
        s.event("Orders", 1, "c", id=1, item="taco"),
        s.event("Orders", 1, "u", id=1, item="burrito"),
    ])  # fmt: skip
    model.etl()
    assert [o.value for o in model.outputs] == [
        {"item": "taco", "status": "authorized"},
        {"status": "captured"},
        {"item": "burrito"},
    ]


def test_the_generator_tells_stories_with_every_kind_of_change() -> None:
    rounds = cdc.schedule(random.Random(0), 50, 6, (3, 10))
    changes = [c for r in rounds for c in r]
    ops = {(c.topic, None if c.value is None else c.value["op"]) for c in changes}
    assert ops >= {
        (cdc.ORDERS, "c"), (cdc.ORDERS, "r"), (cdc.ORDERS, "u"), (cdc.ORDERS, "d"),
        (cdc.ORDERS, None), (cdc.PAYMENTS, "c"), (cdc.PAYMENTS, "u"), (cdc.PAYMENTS, "d"),
    }  # fmt: skip
    assert any(c.value and c.value["after"] and c.value["after"].get("order_id", 0) % 100 == 90
               for c in changes)  # fmt: skip


@pytest.mark.parametrize("seed", range(3))
def test_the_model_never_emits_an_event_before_an_earlier_one_of_its_key(seed: int) -> None:
    """A property of the model on random streams, passes cut at random."""
    rng = random.Random(seed)
    model = Model(rules(expire=20))
    offsets: dict[tuple[str, int], int] = {}
    clock = 0
    for changes in cdc.schedule(rng, 40, 6, (3, 10)):
        events = []
        for c in changes:
            where = (c.topic, c.partition)
            offsets[where] = offsets.get(where, 0) + 1
            clock += 1
            events.append(Event(c.topic, c.partition, offsets[where] - 1,
                                T0 + dt.timedelta(milliseconds=clock), c.key, c.value))  # fmt: skip
        model.ingest(events)
        model.etl()
    chains: dict[tuple | None, list[int]] = {}
    by_source = {c: o.offset for o in model.outputs for c in (o.source, o.partner) if c}
    for e in sorted(model.ingested, key=lambda e: (e.topic, e.partition, e.offset)):
        if e.coords in by_source:
            chains.setdefault(e.chain, []).append(by_source[e.coords])
    assert all(numbers == sorted(numbers) for numbers in chains.values())
