"""The real ETL against a reference model of its semantics, on random CDC streams.

Each seed builds a story per *case* (orders and payments that are created, updated,
deleted, re-created, paired twice or never: cdc_streams.py), cuts every case into
chunks that reach Kafka in different rounds, and after each round maybe ingests and
maybe runs ETL (sometimes twice). The cases have their own ids, so they share the
topics (3 and 2 partitions) and the passes without meeting. Each pass runs through
the real ingest and ETL, and through the model (etl_model.py); at the end the staging
pool, the pending view, the dead letters and what to-kafka sent (synced half way and
at the end) are compared with the model: records in order, the table an upserting
sink keeps, the pending events with the reason they wait, the done records.

The default (CI) is one seed of 200 cases, about four minutes; more by hand, e.g.
    ZYNC_ETL_MODEL_FIRST_SEED=1 ZYNC_ETL_MODEL_SEEDS=20 scripts/test.sh -k etl_model
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
from collections import defaultdict
from functools import partial
from pathlib import Path

import pytest
from fastavro import parse_schema

from zync_assets.codec.avro import encode
from zync_assets.etl.report import waiting_events
from zync_assets.kafka.clients import ensure_topic, producer
from zync_assets.kafka.registry import Registry
from zync_assets.lake.pools import dead_letter_path, pool_exists, pool_path
from zync_assets.tokafka.sync import sync_pool
from zync_assets_tests import cdc_streams as cdc
from zync_assets_tests.cdc_streams import EXPIRE_OFFSETS, SPEC
from zync_assets_tests.conftest import Stack, read_topic
from zync_assets_tests.etl_model import Event, Model, Rule, sink_table
from zync_assets_tests.test_etl import Pipeline

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FIRST_SEED = int(os.environ.get("ZYNC_ETL_MODEL_FIRST_SEED", "0"))
SEEDS = int(os.environ.get("ZYNC_ETL_MODEL_SEEDS", "1"))
CASES = int(os.environ.get("ZYNC_ETL_MODEL_CASES", "200"))
ROUNDS = 7


def model_rules(topic: dict[str, str]) -> list[Rule]:
    """The spec above, as the model reads it."""
    orders, payments, out = topic["Orders"], topic["Payments"], topic["Out"]

    def denorm(left: Event, right: Event) -> tuple:
        order, payment = left.after, right.after
        value = {"id": order["id"], "item": order["item"], "status": payment["status"],
                 "amount": payment["amount"]}  # fmt: skip
        return {"id": order["id"]}, value

    def payment_update(e: Event) -> tuple:
        a = e.after
        return {"id": a["order_id"]}, {
            "id": a["order_id"],
            "status": a["status"],
            "amount": a["amount"],
        }

    def order_update(e: Event) -> tuple:
        return {"id": e.after["id"]}, {"id": e.after["id"], "item": e.after["item"]}

    return [
        Rule(1, "denorm", out, lambda e: e.op in ("c", "r"), denorm, left=orders, right=payments,
             left_key=lambda e: e.after.get("id"), right_key=lambda e: e.after.get("order_id"),
             expire_offsets=EXPIRE_OFFSETS),
        Rule(2, "stateless", out, lambda e: e.op == "u", payment_update, input=payments),
        Rule(3, "stateless", out, lambda e: e.op == "u", order_update, input=orders),
        Rule(4, "stateless", out, lambda e: e.op == "d", lambda e: (e.key, None), input=orders),
    ]  # fmt: skip


class Producer:
    """Sends changes as Confluent-framed Avro with chosen partitions and timestamps, and
    returns them as the model's events (with the offsets Kafka gave them)."""

    def __init__(self, stack: Stack, topic: dict[str, str], rng: random.Random) -> None:
        registry = Registry(stack.registry_settings)
        self.topic, self.rng = topic, rng
        self.encoders = {}
        for name in (cdc.ORDERS, cdc.PAYMENTS):
            real = topic[name]
            ensure_topic(stack.kafka, real, cdc.PARTITIONS[name])
            key_id = registry.register(f"{real}-key", cdc.KEY_SCHEMA)
            value_schema = cdc.value_schema(name)
            value_id = registry.register(f"{real}-value", value_schema)
            self.encoders[name] = (
                (key_id, parse_schema(cdc.KEY_SCHEMA)), (value_id, parse_schema(value_schema))
            )  # fmt: skip
        self.producer = producer(stack.kafka)
        # Kafka refuses timestamps far ahead of its clock; ties across topics happen.
        self.clock = int(dt.datetime.now(dt.UTC).timestamp() * 1000) - 3_600_000

    def send(self, changes: list[cdc.Change]) -> list[Event]:
        sent: list[Event] = []

        def delivered(err, msg, change: cdc.Change) -> None:
            assert err is None, err
            stamp = dt.datetime.fromtimestamp(msg.timestamp()[1] / 1000, dt.UTC)
            sent.append(
                Event(msg.topic(), msg.partition(), msg.offset(), stamp, change.key, change.value)
            )

        for change in changes:
            (key_id, key_schema), (value_id, value_schema) = self.encoders[change.topic]
            if self.rng.random() > 0.2:
                self.clock += 1
            self.producer.produce(
                self.topic[change.topic],
                key=encode(key_id, key_schema, change.key),
                value=None
                if change.value is None
                else encode(value_id, value_schema, change.value),
                partition=change.partition,
                timestamp=self.clock,
                on_delivery=partial(delivered, change=change),
            )
        assert self.producer.flush(30) == 0
        assert len(sent) == len(changes)
        return sent


def _json(variant_text: str | None):
    return None if variant_text is None else json.loads(variant_text)


def _case_of(coords_or_key) -> int:
    """A case's ids are case*100 + small numbers (cdc_streams)."""
    return coords_or_key // 100


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("seed", range(FIRST_SEED, FIRST_SEED + SEEDS))
def test_etl_matches_the_reference_model(
    seed: int, spark, stack: Stack, tmp_path: Path, lake: Path
) -> None:
    rng = random.Random(seed)
    pipe = Pipeline(spark, stack, tmp_path, SPEC, ["Orders", "Payments", "Out"])
    out = pipe.topic["Out"]
    model = Model(model_rules(pipe.topic))
    kafka = Producer(stack, pipe.topic, rng)
    registry = Registry(stack.registry_settings)
    rounds = cdc.schedule(rng, CASES, ROUNDS, (3, 10))
    sent_events: list[Event] = []
    unread: list[Event] = []
    for number, changes in enumerate(rounds):
        unread += kafka.send(changes)
        last = number == len(rounds) - 1
        if last or rng.random() < 0.8:
            pipe.ingest()
            model.ingest(unread)
            sent_events += unread
            unread = []
        for _ in range(1 if last else rng.choice([0, 1, 1, 2])):
            real, expected = pipe.etl(), model.etl()
            seen = (real.run, real.done, real.expired, real.unmatched, real.pending, real.outputs)
            want = (expected.run, expected.done, expected.expired, expected.unmatched,
                    expected.pending, expected.outputs)  # fmt: skip
            if seen != want:
                pytest.fail(f"seed {seed} round {number}: ETL pass {seen} differs from the model's "
                            f"{want}; {_explain_pass(spark, model, sent_events)}")  # fmt: skip
            assert _nonzero(real.cursors) == _nonzero(model.cursors(_partitions(pipe))), (
                f"seed {seed} round {number}: cursors"
            )
        if number == len(rounds) // 2:
            sync_pool(spark, "Staging", stack.kafka, registry)
    sync_pool(spark, "Staging", stack.kafka, registry)

    _compare_outputs(spark, model, seed, sent_events)
    _compare_done(spark, model, seed)
    _compare_pending(spark, pipe, model, seed)
    _compare_dead_letters(spark, model)
    received = [(r.key, r.value) for r in read_topic(stack, out)]
    sent = [(o.key, o.value) for o in model.outputs]
    assert received == sent, _first_difference(received, sent, "to-kafka records")
    assert sink_table(received) == sink_table(sent)
    assert model.outputs and model.pending and any(s == "expired" for s, _ in model.done.values())


def _partitions(pipe: Pipeline) -> dict[str, int]:
    return {pipe.topic[name]: n for name, n in cdc.PARTITIONS.items()}


def _nonzero(cursors: dict) -> dict:
    return {
        t: {p: o for p, o in parts.items() if o}
        for t, parts in cursors.items()
        if any(parts.values())
    }


def _compare_outputs(spark, model: Model, seed: int, events: list[Event]) -> None:
    rows = (
        spark.read.format("delta").load(pool_path("Staging")).where("kind = 'output'")
        .selectExpr("run", "kafka.topic", "kafka.offset", "cast(key AS string) AS key",
                    "cast(value AS string) AS value", "source")
        .orderBy("kafka.topic", "kafka.offset").collect()
    )  # fmt: skip
    real = [(r.run, r.topic, r.offset, _json(r.key), _json(r.value), tuple(r.source)) for r in rows]
    expected = [(o.run, o.topic, o.offset, o.key, o.value, o.source) for o in model.outputs]
    if real != expected:
        by_coords = {e.coords: e for e in events}
        detail = _first_difference(
            real, expected, "staging outputs (run, topic, offset, key, value, source)"
        )
        bad = [r for r, e in zip(real, expected, strict=False) if r != e][:1] or real[-1:]
        case = _case_of(by_coords[bad[0][5]].key["id"]) if bad else None
        story = [
            (e.topic.split("_")[0], e.partition, e.offset, e.value)
            for e in events
            if _case_of(e.key["id"]) == case
        ]
        pytest.fail(f"seed {seed}: {detail}\ncase {case}'s events:\n" + "\n".join(map(str, story)))


def _explain_pass(spark, model: Model, events: list[Event]) -> str:
    """The first event whose done record in the last run differs from the model's, and
    the story of its case."""
    run = model.run
    rows = (
        spark.read.format("delta").load(pool_path("Staging"))
        .where(f"kind = 'done' AND run = {run}")
        .selectExpr("kafka.topic", "kafka.partition", "kafka.offset", "status").collect()
    )  # fmt: skip
    real = {(r.topic, r.partition, r.offset): r.status for r in rows}
    expected = {c: status for c, (status, r) in model.done.items() if r == run}
    for coords in sorted(set(real) | set(expected)):
        if real.get(coords) != expected.get(coords):
            return (
                f"run {run}: event {coords} is {real.get(coords) or 'pending'}, the model says "
                f"{expected.get(coords) or 'pending'}\n{_story(coords, events)}"
            )
    return f"run {run}: the done records agree"


def _story(coords: tuple, events: list[Event]) -> str:
    """Every event of the case that `coords` belongs to, in the order Kafka got them."""
    by_coords = {e.coords: e for e in events}
    case = _case_of(by_coords[coords].key["id"])
    lines = [
        f"  {e.topic.rsplit('_', 1)[0]}[{e.partition}]@{e.offset} {e.timestamp:%H:%M:%S.%f} "
        f"key {e.key} {e.value}"
        for e in events
        if _case_of(e.key["id"]) == case
    ]
    return f"case {case}'s events:\n" + "\n".join(lines)


def _compare_done(spark, model: Model, seed: int) -> None:
    rows = (
        spark.read.format("delta").load(pool_path("Staging")).where("kind = 'done'")
        .selectExpr("kafka.topic", "kafka.partition", "kafka.offset", "status", "run").collect()
    )  # fmt: skip
    real = {(r.topic, r.partition, r.offset): (r.status, r.run) for r in rows}
    assert len(rows) == len(real), f"seed {seed}: an event has two done records"
    assert real == model.done, _first_difference(
        sorted(real.items()), sorted(model.done.items()), "done records"
    )


def _compare_pending(spark, pipe: Pipeline, model: Model, seed: int) -> None:
    reasons: defaultdict[str, int] = defaultdict(int)
    real = set()
    for w in waiting_events(spark, pipe.spec, "Staging"):
        why = (
            "partner" if w.reason.startswith("paired with")
            else "key" if w.reason.startswith("blocked")
            else "waiting"
        )  # fmt: skip
        reasons[why] += 1
        real.add(((w.topic, w.partition, w.offset), why))
    expected = {(p.coords, p.why) for p in model.pending}
    assert real == expected, (
        f"seed {seed}: pending events: only real {sorted(real - expected)[:5]}, only model {sorted(expected - real)[:5]}"
    )


def _compare_dead_letters(spark, model: Model) -> None:
    expired = {c for c, (status, _run) in model.done.items() if status == "expired"}
    path = dead_letter_path("Staging")
    rows = spark.read.format("delta").load(path).collect() if pool_exists(path) else []
    assert {(r.topic, r.partition, r.offset) for r in rows} == expired
    assert all(r.reason.startswith("expired") for r in rows)


def _first_difference(real: list, expected: list, what: str) -> str:
    for index, (a, b) in enumerate(zip(real, expected, strict=False)):
        if a != b:
            return f"{what} differ at #{index}: real {a}, model {b}"
    return f"{what}: real has {len(real)}, model {len(expected)}"
