"""`type: txn` rules: events grouped by an expression or by Debezium's source transaction,
transformed once, when their group is complete, by SQL over the group. Real Kafka, ingest
and ETL passes on Spark; staging and the dead-letter table read back."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from zync_assets.core.errors import ZyncError
from zync_assets.etl.compile import compile_rules
from zync_assets.etl.report import explain_spec, pending_report
from zync_assets.kafka.clients import ensure_topic
from zync_assets.kafka.registry import Registry
from zync_assets.lake.pools import dead_letter_path, pool_exists, pool_path
from zync_assets.specs.model import load_spec
from zync_assets.tokafka.sync import sync_pool
from zync_assets_tests.conftest import Stack
from zync_assets_tests.test_transactions import Source, Txn, etl_pass, kafka_offsets

pytestmark = pytest.mark.integration

# zync's design document: orders and menu records grouped by `txn`, `done` marking the
# record that completes a group, `total = qty * price`, customers and menu items numbered.
ZYNC_SPEC = """
inputs:
  - {{topic: {p}.order, pool: {p}_raw, format: json}}
  - {{topic: {p}.menu, pool: {p}_raw, format: json}}
outputs:
  - {{topic: {p}_orders, pool: {p}_staging, format: json}}
transforms:
  - type: txn
    inputs: [{p}.order, {p}.menu]
    group-by: value:txn::bigint
    complete-when: bool_or(value:done::boolean)
    out: {p}_orders
    sql: |
      SELECT o.txn,
             NULL AS key,
             named_struct(
               'customerID', map('jane', 1, 'bob', 2, 'sarah', 3)[o.value:row.customer::string],
               'menuID', map('burrito', 100, 'taco', 200, 'chips', 300)[o.value:row.product::string],
               'qty', o.value:row.qty::bigint,
               'total', o.value:row.qty::bigint * m.value:row.price::double) AS value
      FROM events o JOIN events m ON o.txn = m.txn
      WHERE o.kafka.topic = '{p}.order' AND m.kafka.topic = '{p}.menu'
"""


def send(stack: Stack, messages: list[tuple[str, object]]) -> None:
    """Messages a millisecond apart: source order across topics is by Kafka timestamp."""
    producer = Producer({**stack.kafka.client_config(), "enable.idempotence": True})
    start = int(dt.datetime.now(dt.UTC).timestamp() * 1000)
    for n, (topic, value) in enumerate(messages):
        producer.produce(topic, json.dumps(value).encode(), timestamp=start + n)
    assert producer.flush(30) == 0


def record(txn: int, done: bool, **row: object) -> dict:
    return {"txn": txn, "done": done, "row": row}


def staged(spark, staging: str, kind: str) -> list:
    frame = spark.read.format("delta").load(pool_path(staging)).where(f"kind = '{kind}'")
    return frame.orderBy("kind", "kafka.topic", "kafka.offset").collect()


def order_and_menu(stack: Stack) -> str:
    """Fresh `<p>.order` and `<p>.menu` topics: their prefix."""
    p = f"zx{uuid.uuid4().hex[:6]}"
    for topic in (f"{p}.order", f"{p}.menu"):
        ensure_topic(stack.kafka, topic, 1)
    return p


def test_zyncs_own_order_and_menu_example_gives_its_exact_outputs_and_cursor(
    spark, stack: Stack, registry: Registry, lake: Path, tmp_path: Path
) -> None:
    p = order_and_menu(stack)
    spec = tmp_path / "zync.yaml"
    spec.write_text(ZYNC_SPEC.format(p=p))
    # consume-1: jane's taco order and bob's burrito order, then the taco's menu record,
    # which completes transaction 10000.
    send(stack, [
        (f"{p}.order", record(10000, False, customer="jane", product="taco", qty=2)),
        (f"{p}.order", record(10001, False, customer="bob", product="burrito", qty=1)),
        (f"{p}.menu", record(10000, True, product="taco", price=1.99)),
    ])  # fmt: skip
    first = etl_pass(spark, stack, registry, spec)
    [out] = staged(spark, f"{p}_staging", "output")
    assert json.loads(out.value.toJson()) == {
        "customerID": 1, "menuID": 200, "qty": 2, "total": 3.98
    }  # fmt: skip
    assert (out.kafka.topic, out.kafka.offset, out.run) == (f"{p}_orders", 0, 1)
    # As zync's staging-1: the output sits at its group's completing record (seqno 3, the
    # menu record), and the cursor at the first record still pending (seqno 2, bob's order).
    assert (out.source.topic, out.source.offset) == (f"{p}.menu", 0)
    assert first.cursors == {f"{p}.order": {0: 1}, f"{p}.menu": {0: 1}}
    assert (first.outputs, first.done, first.pending) == ({f"{p}_orders": 1}, 2, 1)
    assert pending_report(spark, load_spec(spec))[0].startswith("open group 10001 of rule 1 ")

    # consume-2: the burrito's menu record completes transaction 10001.
    send(stack, [(f"{p}.menu", record(10001, True, product="burrito", price=5.99))])
    second = etl_pass(spark, stack, registry, spec)
    outs = staged(spark, f"{p}_staging", "output")
    assert [(o.kafka.offset, o.run, json.loads(o.value.toJson())) for o in outs] == [
        (0, 1, {"customerID": 1, "menuID": 200, "qty": 2, "total": 3.98}),
        (1, 2, {"customerID": 2, "menuID": 100, "qty": 1, "total": 5.99}),
    ]
    assert second.cursors == {f"{p}.order": {0: 2}, f"{p}.menu": {0: 2}}
    assert second.pending == 0
    done = staged(spark, f"{p}_staging", "done")
    assert sorted((d.kafka.topic, d.kafka.offset, d.run) for d in done) == [
        (f"{p}.menu", 0, 1), (f"{p}.menu", 1, 2), (f"{p}.order", 0, 1), (f"{p}.order", 1, 2)
    ]  # fmt: skip
    # Nothing new: nothing changes.
    third = etl_pass(spark, stack, registry, spec)
    assert third.run is None and len(staged(spark, f"{p}_staging", "output")) == 2
    explained = explain_spec(spark, load_spec(spec)).splitlines()
    assert f"rule 1: txn → {p}_orders" in explained
    assert f"  inputs {p}.order, {p}.menu, grouped by value:txn::bigint" in explained
    assert "  a group is transformed once, when bool_or(value:done::boolean) holds" in explained


SIMPLE_SQL = (
    "SELECT txn, NULL AS key, named_struct('n', count(*)) AS value, '{p}_orders' AS topic "
    "FROM events GROUP BY txn"
)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT 'x' AS txn, NULL AS key, named_struct('n', 1) AS value, '{p}_orders' AS topic "
         "FROM events",
         "transforms[1] sql: yielded 2 row(s) whose `txn` is not one of the complete groups it "
         "was given: yield each row's group as `txn`"),
        ("SELECT txn, NULL AS key, named_struct('n', 1) AS value, 'nope' AS topic FROM events",
         "transforms[1] sql: yielded topic 'nope', not one of its `out` topics ({p}_orders, "
         "{p}_other)"),
    ],
)  # fmt: skip
def test_sql_yielding_rows_of_no_group_or_topic_stops_the_pass_and_loses_nothing(
    spark, stack: Stack, registry: Registry, lake: Path, tmp_path: Path, sql: str, message: str
) -> None:
    p = order_and_menu(stack)
    text = (
        ZYNC_SPEC.format(p=p)
        .replace(
            f"  - {{topic: {p}_orders, pool: {p}_staging, format: json}}",
            f"  - {{topic: {p}_orders, pool: {p}_staging, format: json}}\n"
            f"  - {{topic: {p}_other, pool: {p}_staging, format: json}}",
        )
        .replace(f"    out: {p}_orders", f"    out: [{p}_orders, {p}_other]")
    )
    good_sql = text[text.index("    sql: |") :]
    spec = tmp_path / "zync.yaml"
    spec.write_text(text.replace(good_sql, f'    sql: "{sql.format(p=p)}"\n'))
    send(stack, [
        (f"{p}.order", record(1, False, customer="bob", product="chips", qty=1)),
        (f"{p}.menu", record(1, True, product="chips", price=0.5)),
    ])  # fmt: skip
    with pytest.raises(ZyncError) as caught:
        etl_pass(spark, stack, registry, spec)
    assert str(caught.value) == f"{spec}: {message.format(p=p)}"
    assert not pool_exists(pool_path(f"{p}_staging"))  # nothing committed
    # The SQL mended, the same pass gives the group's output: nothing was lost.
    spec.write_text(text.replace(good_sql, f'    sql: "{SIMPLE_SQL.format(p=p)}"\n'))
    result = etl_pass(spark, stack, registry, spec)
    assert result.outputs == {f"{p}_orders": 1} and result.done == 2


def test_an_open_group_and_an_event_in_no_group_expire_with_their_reasons(
    spark, stack: Stack, registry: Registry, lake: Path, tmp_path: Path
) -> None:
    p = order_and_menu(stack)
    spec = tmp_path / "zync.yaml"
    spec.write_text(ZYNC_SPEC.format(p=p).replace("    out:", "    expire-after: 1h\n    out:"))
    send(stack, [
        (f"{p}.order", record(7, False, customer="sarah", product="chips", qty=3)),
        (f"{p}.order", {"row": {"customer": "nobody"}}),  # no txn: in no group
        (f"{p}.order", record(8, False, customer="jane", product="taco", qty=1)),
        (f"{p}.menu", record(8, True, product="taco", price=1.99)),
    ])  # fmt: skip
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
    result = etl_pass(spark, stack, registry, spec, now=later)
    assert result.expired == 2 and result.outputs == {f"{p}_orders": 1}
    assert result.transactions.expired == 1 and result.transactions.open == 0
    dead = spark.read.format("delta").load(dead_letter_path(f"{p}_staging")).orderBy("offset")
    assert [(r.offset, r.reason) for r in dead.collect()] == [
        (0, "expired: group 7 of rule 1 did not complete within its expire-after (1h): "
            "complete-when bool_or(value:done::boolean) stayed false over its 1 event(s)"),
        (1, "expired: rule 1's group-by value:txn::bigint is null for this event: it belongs "
            "to no group"),
    ]  # fmt: skip
    assert result.cursors == {f"{p}.order": {0: 3}, f"{p}.menu": {0: 1}}


DEBEZIUM_RULE = """
  - type: txn
    inputs: [{orders}, {items}]
    complete-when: debezium-transaction
    expire-after: 1h
    out: [{p}_summary, {p}_lines]
    sql: |
      SELECT txn, to_variant_object(named_struct('txn', txn)) AS key,
             to_variant_object(named_struct('txn', txn, 'events', count(*),
                               'items', count_if(kafka.topic = '{items}'))) AS value,
             '{p}_summary' AS topic
      FROM events GROUP BY txn
      UNION ALL
      SELECT txn, key, to_variant_object(named_struct('txn', txn, 'item', after:id::bigint)),
             '{p}_lines' AS topic
      FROM events WHERE kafka.topic = '{items}'
"""


def debezium_spec(folder: Path, source: Source) -> Path:
    p, orders, items = source.prefix, source.topic("orders"), source.topic("items")
    inputs = "\n".join(
        f"  - {{topic: {t}, pool: {p}_raw, format: json}}"
        for t in (orders, items, source.transactions)
    )
    outputs = "\n".join(
        f"  - {{topic: {p}_{name}, pool: {p}_staging, format: json}}"
        for name in ("summary", "lines")
    )
    path = folder / f"{p}.yaml"
    path.write_text(
        f"inputs:\n{inputs}\noutputs:\n{outputs}\ntransforms:"
        + DEBEZIUM_RULE.format(p=p, orders=orders, items=items)
    )
    return path


def outputs_by_topic(spark, staging: str) -> dict[str, list[tuple[int, int, dict]]]:
    found: dict[str, list[tuple[int, int, dict]]] = {}
    for o in staged(spark, staging, "output"):
        found.setdefault(o.kafka.topic, []).append(
            (o.kafka.offset, o.run, json.loads(o.value.toJson()))
        )
    return found


def test_a_debezium_transaction_is_transformed_once_when_its_end_and_events_are_in(
    spark, stack: Stack, registry: Registry, lake: Path, tmp_path: Path
) -> None:
    source = Source(stack, f"tx{uuid.uuid4().hex[:6]}")
    p, staging = source.prefix, f"{source.prefix}_staging"
    spec = debezium_spec(tmp_path, source)
    t1 = Txn(source, "701:10").change("orders", 1, 0).change("items", 11, 1).change("items", 12, 0)
    t2 = Txn(source, "702:20").change("orders", 2, 1)
    t3 = Txn(source, "703:30").change("items", 13, 0)  # never ends
    # Pass 1: t1's END before its last event; t2 whole; t3 without END; an insert
    # without transaction metadata (a transaction of its own).
    t1.begin()
    t1.events(0, 1)
    t2.begin()
    t2.events()
    t2.end()
    t1.end()
    t3.begin()
    t3.events()
    source.send(source.topic("orders"), 0, {"id": 9}, {"op": "c", "after": {"id": 9}})
    source.flush()
    first = etl_pass(spark, stack, registry, spec)
    found = outputs_by_topic(spark, staging)
    single = f"{source.topic('orders')}[0]@1"
    assert sorted((v for _o, _r, v in found[f"{p}_summary"]), key=lambda v: v["txn"]) == [
        {"txn": "702:20", "events": 1, "items": 0},
        {"txn": single, "events": 1, "items": 0},
    ]
    assert f"{p}_lines" not in found
    assert first.transactions.open == 2  # t1 and t3

    # Pass 2: t1's last event: one summary and two lines, in one commit.
    t1.events(2)
    source.flush()
    second = etl_pass(spark, stack, registry, spec)
    found = outputs_by_topic(spark, staging)
    assert found[f"{p}_summary"][-1] == (2, second.run, {"txn": "701:10", "events": 3, "items": 2})
    assert found[f"{p}_lines"] == [
        (0, second.run, {"txn": "701:10", "item": 11}),
        (1, second.run, {"txn": "701:10", "item": 12}),
    ]
    assert second.outputs == {f"{p}_summary": 1, f"{p}_lines": 2}

    # Two hours on, t3 (no END) expires: the dead letters say what it lacked.
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
    third = etl_pass(spark, stack, registry, spec, now=later)
    assert third.expired == 1 and third.transactions.expired == 1
    [dead] = spark.read.format("delta").load(dead_letter_path(staging)).collect()
    assert dead.reason == (
        "expired: source transaction 703:30 did not complete within its rule's expire-after: "
        "its END record"
    )
    # to-kafka: each topic's records of one source transaction in one Kafka transaction,
    # even one record per transaction asked.
    sync_pool(spark, staging, stack.kafka, registry, transaction_size=1, default_format="json")
    lines = kafka_offsets(stack, f"{p}_lines")
    assert [offset for offset, _v in lines] == [0, 1]  # no commit marker between them


def text_spec(folder: Path, rule: str) -> Path:
    path = folder / "bad.yaml"
    path.write_text(
        "inputs:\n  - {topic: o, pool: Raw}\n  - {topic: m, pool: Raw}\n"
        "outputs:\n  - {topic: Out, pool: Staging}\n  - {topic: Two, pool: Staging}\n"
        "transforms:\n" + rule
    )
    return path


GOOD = {
    "group-by": "value:txn::bigint",
    "complete-when": "bool_or(value:done::boolean)",
    "sql": "SELECT txn, NULL AS key, named_struct('n', count(*)) AS value FROM events GROUP BY txn",
}


@pytest.mark.parametrize(
    ("field", "text", "message"),
    [
        ("group-by", "max(value:txn::bigint)", r"transforms\[1\] group-by: "),
        ("complete-when", "value:done::boolean", r"transforms\[1\] complete-when: "),
        ("complete-when", "count(*)", r"transforms\[1\] complete-when: is bigint, not a boolean aggregate"),
        ("sql", "SELECT NULL AS key, value FROM events", r"transforms\[1\] sql: must yield key, txn, value"),
        ("sql", "DROP TABLE events", r"transforms\[1\] sql: "),
        ("sql", "SELECT txn, key, nope AS value FROM events", r"transforms\[1\] sql: .*nope"),
    ],
)  # fmt: skip
def test_txn_rule_mistakes_are_reported_with_sparks_message(
    spark, tmp_path: Path, field: str, text: str, message: str
) -> None:
    fields = {**GOOD, field: text}
    rule = "  - type: txn\n    inputs: [o, m]\n    out: Out\n" + "".join(
        f"    {name}: {json.dumps(value)}\n" for name, value in fields.items()
    )
    spec = load_spec(text_spec(tmp_path, rule))
    with pytest.raises(ZyncError, match=message) as caught:
        compile_rules(spark, spec)
    assert str(caught.value).startswith(str(spec.path)) and "\n" not in str(caught.value)
