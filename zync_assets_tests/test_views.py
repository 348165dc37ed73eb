"""`type: view` rules: a keyed output that equals SQL over the current rows of its inputs.
Real Kafka, ingest and ETL passes on Spark, to-kafka; the output topic read back and
replayed as an upserting sink would, against the same SQL evaluated by SQLite over the
source rows the test keeps itself (view_source.py)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from zync_assets.core.errors import ZyncError
from zync_assets.etl.compile import compile_rules
from zync_assets.etl.report import explain_spec
from zync_assets.etl.run import run_etl
from zync_assets.kafka.registry import Registry
from zync_assets.lake.pools import pool_path
from zync_assets.specs.model import load_spec
from zync_assets.tokafka.sync import sync_pool
from zync_assets_tests.conftest import Stack, run_zync
from zync_assets_tests.test_transactions import Source as TxnSource
from zync_assets_tests.test_transactions import Txn, etl_pass, kafka_offsets
from zync_assets_tests.view_source import Source, reached_path, records_in, sink_table

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


def step(spark, stack: Stack, registry: Registry, spec: Path, source: Source) -> dict[int, dict]:
    """One ETL pass and its to-kafka; the sink's table after it, checked against the query."""
    source.flush()
    etl_pass(spark, stack, registry, spec)
    sync_pool(spark, f"{source.p}_staging", stack.kafka, registry, default_format="json")
    table = sink_table(stack, f"{source.p}_view")
    assert table == source.query(REFERENCE_SQL)
    return table


# Nine passes: 217 s alone, 416 s beside the model test (the longest-first order starts
# them together, as CI does): 600 s is too close.
@pytest.mark.timeout(900)
def test_a_view_equals_its_query_over_current_rows_through_every_kind_of_change(
    spark, stack: Stack, registry: Registry, lake: Path, tmp_path: Path
) -> None:
    src = Source(stack, f"vw{uuid.uuid4().hex[:6]}")
    spec = tmp_path / "view.yaml"
    spec.write_text(VIEW_SPEC.format(p=src.p))
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

    # An update that leaves a TOASTed column out (Debezium's placeholder) keeps its value:
    # from the pass's earlier change of the row, or from the rows committed before.
    src.upsert("customers", {"id": 2, "name": "bo", "tier": "green"})
    src.upsert_leaving_out("customers", {"id": 2, "name": "-", "tier": "red"}, "name")
    src.upsert_leaving_out("customers", {"id": 1, "name": "-", "tier": "gold"}, "name")
    table = step(spark, stack, registry, spec, src)
    assert (table[104]["customer"], table[104]["tier"]) == ("bo", "RED")
    assert (table[9102]["customer"], table[9102]["tier"]) == ("ann", "GOLD")

    # Debezium re-sends after a crash: the rows are what they were, nothing is sent.
    before = records_in(stack, f"{src.p}_view")
    src.resend_last(3)
    step(spark, stack, registry, spec, src)
    assert records_in(stack, f"{src.p}_view") == before

    # A truncate empties the table, and rows after it in the same pass stay.
    src.truncate("accounts")
    src.upsert("accounts", {"id": 105, "balance": 5, "customer_id": 1})
    assert step(spark, stack, registry, spec, src) == {
        105: {"id": 105, "balance": 5, "customer": "ann", "tier": "GOLD"}
    }
    # The view's row versions live in its staging pool, committed with its outputs.
    staging = spark.read.format("delta").load(pool_path(f"{src.p}_staging"))
    assert staging.where("kind = 'view'").count() > 0
    explained = explain_spec(spark, load_spec(spec)).splitlines()
    assert f"rule 1: view → {src.p}_view" in explained
    assert (f"  inputs a = {src.p}.accounts, c = {src.p}.customers: each a table of its "
            "current rows (key, after)") in explained  # fmt: skip


def test_a_large_views_search_of_its_reach_keeps_toasted_values_and_moved_keys(
    spark, stack: Stack, registry: Registry, lake: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The every-kind test's view is small, so each pass evaluates it whole; a view above
    WHOLE_VIEW_ROWS searches the rows its changes reach instead (the view model test's
    path). Here that search meets what the model does not make: an update that leaves a
    TOASTed column out, filled from the rows committed before, and a key that moves."""
    reached = reached_path(monkeypatch)
    src = Source(stack, f"vr{uuid.uuid4().hex[:6]}")
    spec = tmp_path / "view.yaml"
    spec.write_text(VIEW_SPEC.format(p=src.p))
    src.upsert("customers", {"id": 1, "name": "ann", "tier": "gold"})
    src.upsert("accounts", {"id": 101, "balance": 10, "customer_id": 1})
    src.upsert("accounts", {"id": 102, "balance": 20, "customer_id": 1})
    step(spark, stack, registry, spec, src)
    src.upsert_leaving_out("customers", {"id": 1, "name": "-", "tier": "blue"}, "name")
    src.move("accounts", 102, 9102)
    table = step(spark, stack, registry, spec, src)
    assert (table[101]["customer"], table[9102]["tier"]) == ("ann", "BLUE") and 102 not in table
    assert reached, "the second pass did not search the rows its changes reach"


# Before the view: stateless rules copy both inputs out of the same staging pool, so that
# pool's cursors have moved past the events the view is then added over.
COPY_SPEC = """
inputs:
  - {{topic: {p}.accounts, pool: {p}_raw, format: json}}
  - {{topic: {p}.customers, pool: {p}_raw, format: json}}
outputs:
  - {{topic: {p}_copy, pool: {p}_staging, format: json}}
transforms:
  - {{type: stateless, in: {p}.accounts, out: {p}_copy, sql: "in.key AS key, in.after AS value"}}
  - {{type: stateless, in: {p}.customers, out: {p}_copy, sql: "in.key AS key, in.after AS value"}}
"""


def test_a_view_added_over_history_starts_from_all_of_it_and_a_rebuild_sends_the_difference(
    spark, stack: Stack, registry: Registry, lake: Path, tmp_path: Path
) -> None:
    src = Source(stack, f"vh{uuid.uuid4().hex[:6]}")
    spec = tmp_path / "v.yaml"
    spec.write_text(COPY_SPEC.format(p=src.p))
    src.upsert("customers", {"id": 1, "name": "ann", "tier": "gold"})
    for account in (101, 102):
        src.upsert("accounts", {"id": account, "balance": account, "customer_id": 1})
    src.upsert("accounts", {"id": 103, "balance": 3, "customer_id": 7})
    src.flush()
    assert etl_pass(spark, stack, registry, spec).done == 4
    # The spec now has the view instead: it starts from the whole history, not the cursors.
    spec.write_text(VIEW_SPEC.format(p=src.p))
    src.upsert("accounts", {"id": 104, "balance": 4, "customer_id": 1})
    assert sorted(step(spark, stack, registry, spec, src)) == [101, 102, 103, 104]

    # A rebuild of a view that is right sends nothing.
    sent = records_in(stack, f"{src.p}_view")
    [rebuilt] = run_etl(spark, load_spec(spec), rebuild=frozenset({f"{src.p}_view"}))
    assert rebuilt.run is not None and rebuilt.outputs == {}
    sync_pool(spark, f"{src.p}_staging", stack.kafka, registry, default_format="json")
    assert records_in(stack, f"{src.p}_view") == sent
    # After its SQL changed, a rebuild sends the rows that differ, and only those.
    spec.write_text(VIEW_SPEC.format(p=src.p).replace("upper(", "lower("))
    [rebuilt] = run_etl(spark, load_spec(spec), rebuild=frozenset({f"{src.p}_view"}))
    assert rebuilt.outputs == {f"{src.p}_view": 3}  # 103 has no customer: no tier to change
    sync_pool(spark, f"{src.p}_staging", stack.kafka, registry, default_format="json")
    assert sink_table(stack, f"{src.p}_view") == src.query(
        REFERENCE_SQL.replace("upper(", "lower(")
    )


def test_rebuilding_a_topic_no_view_writes_is_one_line_naming_the_views(tmp_path: Path) -> None:
    spec = tmp_path / "v.yaml"
    spec.write_text(VIEW_SPEC.format(p="x"))
    done = run_zync("etl", str(spec), "--rebuild-view", "x_copy", timeout=60)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == (
        f"zync: error: {spec}: no view writes x_copy; its views write: x_view"
    )


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


def test_a_gated_view_moves_a_whole_source_transaction_at_a_time(
    spark, stack: Stack, registry: Registry, lake: Path, tmp_path: Path
) -> None:
    """With `gate: transaction` a view takes a source transaction only once it is complete,
    and its changes of a pass reach Kafka in one Kafka transaction."""
    src = TxnSource(stack, f"vg{uuid.uuid4().hex[:6]}")
    orders, items, out = src.topic("orders"), src.topic("items"), f"{src.prefix}_view"
    spec = tmp_path / "gated.yaml"
    spec.write_text(
        f"inputs:\n  - {{topic: {orders}, pool: {src.prefix}_raw, format: json}}\n"
        f"  - {{topic: {items}, pool: {src.prefix}_raw, format: json}}\n"
        f"  - {{topic: {src.transactions}, pool: {src.prefix}_raw, format: json}}\n"
        f"outputs:\n  - {{topic: {out}, pool: {src.prefix}_staging, format: json}}\n"
        "transforms:\n  - type: view\n    gate: transaction\n"
        f"    inputs: {{o: {orders}, i: {items}}}\n    key: id\n    out: {out}\n"
        "    sql: |\n      SELECT o.after:id::bigint AS id, count(i.key) AS items FROM o\n"
        "      LEFT JOIN i ON i.after:id::bigint DIV 10 = o.after:id::bigint GROUP BY 1\n"
    )
    one = Txn(src, "501:100").change("orders", 1, 0).change("items", 10, 0).change("items", 11, 1)
    one.begin()
    one.events(0, 1)  # item 11 and the END are still to come
    src.flush()
    first = etl_pass(spark, stack, registry, spec)
    assert first.outputs == {} and first.pending >= 2  # the order and item 10 wait
    one.events(2)
    one.end()
    two = Txn(src, "502:200").change("orders", 2, 1).change("items", 20, 0).change("items", 12, 1)
    two.begin()
    two.events()
    two.end()
    src.flush()
    second = etl_pass(spark, stack, registry, spec)
    assert second.outputs == {out: 2} and second.pending == 0
    sync_pool(spark, f"{src.prefix}_staging", stack.kafka, registry, default_format="json")
    assert sink_table(stack, out) == {1: {"id": 1, "items": 3}, 2: {"id": 2, "items": 1}}
    assert [offset for offset, _value in kafka_offsets(stack, out)] == [0, 1]  # one transaction
