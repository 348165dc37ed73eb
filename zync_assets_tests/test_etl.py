"""ETL against real Kafka, registry, Spark and Delta: zync's semantics and what zync lacked."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from zync_assets.core.errors import ZyncError
from zync_assets.etl.report import pending_report
from zync_assets.etl.run import run_etl
from zync_assets.etl.state import read_state
from zync_assets.ingest.ingest import ingest
from zync_assets.kafka.registry import Registry
from zync_assets.lake.pools import dead_letter_path, pool_path
from zync_assets.specs.model import load_spec
from zync_assets_tests.conftest import (
    DEMO_TABLES,
    Stack,
    produce_json,
    read_topic,
    rebuild_table,
)

pytestmark = pytest.mark.integration


class Pipeline:
    """Topics made unique per test, a spec over them, and helpers to drive each stage."""

    def __init__(self, spark, stack: Stack, tmp_path: Path, spec_text: str, topics: list[str]):
        self.spark, self.stack = spark, stack
        suffix = uuid.uuid4().hex[:6]
        self.topic = {t: f"{t}_{suffix}" for t in topics}
        for name, real in self.topic.items():
            spec_text = spec_text.replace(f"${name}", real)
        path = tmp_path / "spec.yaml"
        path.write_text(spec_text)
        self.spec = load_spec(path)

    def send(
        self, topic: str, events: Sequence[tuple[object, object]], partitions: int = 1
    ) -> None:
        produce_json(self.stack, self.topic[topic], events, partitions=partitions)

    def ingest(self) -> None:
        registry = Registry(self.stack.registry_settings)
        for pool, topics in self.spec.raw_pools().items():
            ingest(self.spark, pool, topics, self.stack.kafka, registry, missing_ok=True)

    def etl(self, now: dt.datetime | None = None):
        (result,) = run_etl(self.spark, self.spec, now)
        return result

    def staging(self, kind: str, *columns: str) -> list[tuple]:
        frame = self.spark.read.format("delta").load(pool_path("Staging")).where(f"kind = '{kind}'")
        names = [f"c{i}" for i in range(len(columns))]
        frame = frame.selectExpr(*(f"{c} AS {n}" for c, n in zip(columns, names, strict=True)))
        return [tuple(r) for r in frame.orderBy(*names).collect()]

    def outputs(self, topic: str = "Out") -> list[tuple[int, Any, Any]]:
        rows = self.staging(
            "output", "kafka.offset", "cast(key as string)", "cast(value as string)",
            f"kafka.topic = '{self.topic.get(topic, topic)}'",
        )  # fmt: skip
        return [
            (o, json.loads(k) if k else None, json.loads(v) if v else None)
            for o, k, v, mine in rows
            if mine
        ]


def dbz(op: str, **after: object) -> dict:
    return {"op": op, "before": None, "after": after}


SIMPLE = """
inputs:
  - {topic: $L, pool: Raw}
  - {topic: $R, pool: Raw}
outputs:
  - {topic: $Out, pool: Staging}
transforms:
  - type: denorm
    where: op IN ('c', 'r')
    left: $L
    right: $R
    join-on: left.after:id::bigint = right.after:l_id::bigint
    out: $Out
    sql: |
      left.key AS key,
      named_struct('id', left.after:id::bigint, 'tag', right.after:tag::string) AS value
  - type: stateless
    where: op = 'u'
    in: $L
    out: $Out
    sql: in.key AS key, in.after AS value
"""


@pytest.fixture
def simple(spark, stack: Stack, tmp_path: Path, lake: Path) -> Pipeline:
    return Pipeline(spark, stack, tmp_path, SIMPLE, ["L", "R", "Out"])


def test_invoice_demo_gives_zyncs_exact_results_and_reaches_a_sink_through_to_kafka(
    spark, stack: Stack, lake: Path
) -> None:
    """End to end: Debezium batches → raw → staging → NewInvoices. After each batch the
    staging pool holds zync's exact output records, and the table rebuilt from the topic
    by a consumer we did not write is the one a JDBC sink would hold."""
    from zync_assets.demo.invoices import produce_batch, reset
    from zync_assets.tokafka.sync import sync_pool

    reset(stack.kafka)  # the demo's topic names are fixed
    spec = load_spec(Path(__file__).parent.parent / "etl_specs" / "invoices.yaml")
    registry = Registry(stack.registry_settings)
    expected: dict[int, list[tuple[Any, ...]]] = {
        1: [(0, 100, "Alice", "taco", "pending"), (1, 101, "Bob", "burrito", "pending")],
        2: [(2, 102, "Charlie", "enchilada", "pending")],
        3: [(3, 103, "Dan", "beans", "pending"), (4, 100, None, None, "closed")],
        4: [(5, 103, None, None, "collections"), (6, 102, None, None, "paid"),
            (7, 101, None, None, "paid")],
    }  # fmt: skip
    done_per_run = {1: 4, 2: 2, 3: 3, 4: 3}
    sent = 0
    for batch in range(1, 5):
        produce_batch(batch, stack.kafka, registry)
        ingest(spark, "Raw", ["Invoices", "InvoiceStatus"], stack.kafka, registry)
        (result,) = run_etl(spark, spec)
        assert (result.run, result.done) == (batch, done_per_run[batch])
        rows = (
            spark.read.format("delta").load(pool_path("Staging"))
            .where(f"kind = 'output' AND run = {batch}").orderBy("kafka.offset")
            .selectExpr("kafka.offset", "cast(key:ID as int)", "value:ID::int", "value:customer::string",
                        "value:item::string", "value:invoice_status::string", "kafka.topic")
            .collect()
        )  # fmt: skip
        assert all(r.topic == "NewInvoices" for r in rows)
        assert [tuple(r)[:5] for r in rows] == [
            (o, i, i, c, it) for o, i, c, it, _ in expected[batch]
        ]
        assert [r[5] for r in rows] == [e[4] for e in expected[batch]]

        (synced,) = sync_pool(spark, "Staging", stack.kafka, registry)
        assert (synced.topic, synced.first_offset) == ("NewInvoices", sent)
        sent = synced.next_offset
        table = rebuild_table(read_topic(stack, "NewInvoices"), "ID")
        assert {
            k: (v["customer"], v["item"], v["invoice_status"]) for k, v in table.items()
        } == DEMO_TABLES[batch]
    assert result.pending == 0 and sent == 8
    done = spark.read.format("delta").load(pool_path("Staging")).where("kind = 'done'")
    assert done.count() == 12
    assert done.select("kafka.topic", "kafka.partition", "kafka.offset").distinct().count() == 12
    (again,) = run_etl(spark, spec)
    assert again.run is None and again.note == "nothing new to ETL"
    assert sync_pool(spark, "Staging", stack.kafka, registry)[0].sent == 0


def test_unpaired_events_wait_for_either_side(simple: Pipeline) -> None:
    simple.send("R", [({"id": 9}, dbz("c", id=9, l_id=1, tag="right-first"))])
    simple.ingest()
    first = simple.etl()
    assert (first.run, first.pending) == (None, 1)  # nothing consumed: no commit
    simple.send("L", [({"id": 1}, dbz("c", id=1))])
    simple.ingest()
    second = simple.etl()
    assert (second.done, second.pending) == (2, 0)
    assert simple.outputs() == [(0, {"id": 1}, {"id": 1, "tag": "right-first"})]


def test_pairs_form_one_to_one_in_offset_order(simple: Pipeline) -> None:
    simple.send("L", [({"id": 1}, dbz("c", id=1)), ({"id": 1}, dbz("r", id=1))])
    simple.send("R", [({"id": 7}, dbz("c", id=7, l_id=1, tag="first"))])
    simple.ingest()
    result = simple.etl()
    assert (result.done, result.pending) == (2, 1)  # zync would have emitted two outputs
    simple.send("R", [({"id": 8}, dbz("c", id=8, l_id=1, tag="second"))])
    simple.ingest()
    simple.etl()
    assert [v["tag"] for _o, _k, v in simple.outputs()] == ["first", "second"]
    assert simple.staging("done", "kafka.topic", "kafka.offset") == sorted(
        [
            (simple.topic["L"], 0),
            (simple.topic["L"], 1),
            (simple.topic["R"], 0),
            (simple.topic["R"], 1),
        ]
    )


def test_an_update_waits_behind_its_pending_create(simple: Pipeline) -> None:
    simple.send("L", [({"id": 5}, dbz("c", id=5)), ({"id": 5}, dbz("u", id=5, note="later"))])
    simple.ingest()
    blocked = simple.etl()
    assert (blocked.run, blocked.pending) == (None, 2)  # zync emitted the update first
    simple.send("R", [({"id": 1}, dbz("c", id=1, l_id=5, tag="t"))])
    simple.ingest()
    simple.etl()
    assert simple.outputs() == [
        (0, {"id": 5}, {"id": 5, "tag": "t"}),
        (1, {"id": 5}, {"id": 5, "note": "later"}),
    ]


def test_expiry_marks_unpaired_events_done_and_keeps_them(
    spark, stack: Stack, tmp_path: Path, lake: Path
) -> None:
    text = SIMPLE.replace("    out: $Out\n    sql: |\n      left.key", "    out: $Out\n    expire-after: 2 offsets\n    sql: |\n      left.key", 1)  # fmt: skip
    pipe = Pipeline(spark, stack, tmp_path, text, ["L", "R", "Out"])
    pipe.send("L", [({"id": i}, dbz("c", id=i)) for i in range(4)])
    pipe.ingest()
    result = pipe.etl()
    assert (result.expired, result.pending) == (1, 3)  # offset 0 has 3 > 2 later offsets
    dead = spark.read.format("delta").load(dead_letter_path("Staging")).collect()
    assert [(d.topic, d.offset, d.reason.split(":")[0]) for d in dead] == [
        (pipe.topic["L"], 0, "expired")
    ]
    assert json.loads(dead[0].value.toJson())["after"] == {"id": 0}
    later = pipe.etl(now=dt.datetime.now(dt.UTC))
    assert later.run is None  # nothing else is older than the bound yet


def test_expiry_by_age(spark, stack: Stack, tmp_path: Path, lake: Path) -> None:
    text = SIMPLE.replace("    out: $Out\n    sql: |\n      left.key", "    out: $Out\n    expire-after: 1h\n    sql: |\n      left.key", 1)  # fmt: skip
    pipe = Pipeline(spark, stack, tmp_path, text, ["L", "R", "Out"])
    pipe.send("L", [({"id": 1}, dbz("c", id=1))])
    pipe.ingest()
    assert pipe.etl().run is None
    result = pipe.etl(now=dt.datetime.now(dt.UTC) + dt.timedelta(hours=2))
    assert (result.expired, result.pending) == (1, 0)


def test_cursors_skip_done_history_and_stop_at_the_oldest_pending(simple: Pipeline) -> None:
    simple.send("L", [({"id": 1}, dbz("c", id=1)), ({"id": 2}, dbz("c", id=2))])
    simple.send("R", [({"id": 1}, dbz("c", id=1, l_id=2, tag="x"))])
    simple.ingest()
    simple.etl()
    state = read_state(pool_path("Staging"), simple.spec.name)
    assert state.cursors[simple.topic["L"]] == {0: 0}  # offset 0 (id 1) still waits
    assert state.cursors[simple.topic["R"]] == {0: 1}
    assert state.next_offsets == {simple.topic["Out"]: 1}
    lines = pending_report(simple.spark, simple.spec)
    assert len(lines) == 1 and f"{simple.topic['L']}[0]@0" in lines[0]
    assert f"waits for a partner on {simple.topic['R']}" in lines[0]


def test_several_outputs_and_partitioned_inputs(
    spark, stack: Stack, tmp_path: Path, lake: Path
) -> None:
    text = """
inputs:
  - {topic: $A, pool: Raw}
outputs:
  - {topic: $Creates, pool: Staging}
  - {topic: $Updates, pool: Staging}
transforms:
  - {type: stateless, where: "op = 'c'", in: $A, out: $Creates, sql: "in.key AS key, in.after AS value"}
  - {type: stateless, where: "op = 'u'", in: $A, out: $Updates, sql: "in.key AS key, in.after AS value"}
"""
    pipe = Pipeline(spark, stack, tmp_path, text, ["A", "Creates", "Updates"])
    events = [({"id": i}, dbz("c" if i % 3 else "u", id=i)) for i in range(30)]
    events.append(({"id": 99}, dbz("d", id=99)))  # no rule takes it
    pipe.send("A", events, partitions=3)
    pipe.ingest()
    result = pipe.etl()
    assert result.outputs == {pipe.topic["Creates"]: 20, pipe.topic["Updates"]: 10}
    assert (result.done, result.unmatched) == (31, 1)
    assert [o for o, _k, _v in pipe.outputs("Creates")] == list(range(20))
    assert [o for o, _k, _v in pipe.outputs("Updates")] == list(range(10))
    partitions = {p for (p,) in pipe.staging("done", "kafka.partition")}
    assert len(partitions) > 1


@pytest.mark.parametrize(
    ("original", "replacement", "message"),
    [
        ("op = 'u'", "op IS NOT A COLUMN", r"transforms\[2\] where: "),
        ("op = 'u'", "op", r"transforms\[2\] where: is string, not a boolean"),
        ("in.key AS key, in.after AS value", "in.key AS key", r"transforms\[2\] sql: must yield exactly"),
        ("in.key AS key, in.after AS value", "in.nope AS key, in.after AS value", r"transforms\[2\] sql: .*nope"),
    ],
)  # fmt: skip
def test_sql_mistakes_are_reported_with_sparks_message(
    spark, stack: Stack, tmp_path: Path, lake: Path, original: str, replacement: str, message: str
) -> None:
    denorm, stateless = SIMPLE.split("  - type: stateless")
    text = denorm + "  - type: stateless" + stateless.replace(original, replacement)
    pipe = Pipeline(spark, stack, tmp_path, text, ["L", "R", "Out"])
    with pytest.raises(ZyncError, match=message) as caught:
        pipe.etl()
    assert str(caught.value).startswith(str(pipe.spec.path)) and "\n" not in str(caught.value)
