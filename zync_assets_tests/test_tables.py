"""Lake tables (SCD1 current state, SCD2 history) against real Kafka, registry, Spark, Delta."""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from zync_assets.core.errors import ZyncError
from zync_assets.kafka.registry import Registry
from zync_assets.lake.pools import pool_exists, table_changes_path, table_path
from zync_assets.tables.together import run_tables
from zync_assets_tests.conftest import Stack, run_zync
from zync_assets_tests.test_etl import Pipeline

pytestmark = pytest.mark.integration

SPEC = """
inputs:
  - {topic: $Items, pool: Raw}
tables:
  - name: items
    source: $Items
    keys: [id]
    sequence-by: source:lsn::bigint
  - name: items_history
    source: $Items
    keys: [id]
    sequence-by: source:lsn::bigint
    stored-as: scd2
    track-history-except-column-list: [note]
"""

ROW = {
    "type": "record", "name": "Row", "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "born", "type": {"type": "int", "logicalType": "date"}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}  # fmt: skip
ENVELOPE = {
    "type": "record", "name": "Envelope", "fields": [
        {"name": "op", "type": "string"},
        {"name": "before", "type": ["null", ROW], "default": None},
        {"name": "after", "type": ["null", "Row"], "default": None},
        {"name": "source", "type": {"type": "record", "name": "Source",
                                    "fields": [{"name": "lsn", "type": "long"}]}},
    ],
}  # fmt: skip


def row(id: int, name: str, price: str = "1.50", note: str | None = None) -> dict:
    return {"id": id, "name": name, "price": price, "born": f"2026-01-0{id % 9 + 1}",
            "note": note}  # fmt: skip


def change(op: str, lsn: int, before: dict | None, after: dict | None) -> tuple[dict, dict]:
    key = {"id": (after or before or {})["id"]}
    return key, {"op": op, "before": before, "after": after, "source": {"lsn": lsn}}


class Tables(Pipeline):
    def send_changes(self, changes: list[tuple[dict, dict | None]]) -> None:
        from zync_assets_tests.conftest import produce_json

        produce_json(self.stack, self.topic["Items"], changes, value_schema=ENVELOPE)

    def apply(self) -> list:
        self.ingest()
        return run_tables(self.spark, self.spec, Registry(self.stack.registry_settings))

    def rows(self, name: str, order: str = "id") -> list[dict]:
        frame = self.spark.read.format("delta").load(table_path(name)).orderBy(*order.split(","))
        return [r.asDict() for r in frame.collect()]


@pytest.fixture
def tables(spark, stack: Stack, tmp_path: Path, lake: Path) -> Tables:
    return Tables(spark, stack, tmp_path, SPEC, ["Items"])


def test_scd1_holds_each_keys_newest_row_typed_and_late_events_never_win(tables: Tables) -> None:
    tables.send_changes([
        change("r", 10, None, row(1, "apple")),
        change("c", 20, None, row(2, "pear")),
        change("u", 30, row(1, "apple"), row(1, "apple", "2.25", note="ripe")),
        change("c", 40, None, row(3, "fig")),
        change("d", 50, row(3, "fig"), None),
    ])  # fmt: skip
    results = tables.apply()
    assert [(r.table, r.run, r.read) for r in results] == [("items", 1, 5), ("items_history", 1, 5)]
    items = tables.rows("items")
    assert [(r["id"], r["name"], r["price"], r["note"]) for r in items] == [
        (1, "apple", Decimal("2.25"), "ripe"), (2, "pear", Decimal("1.50"), None),
    ]  # fmt: skip
    assert items[0]["born"] == dt.date(2026, 1, 2)  # a date, not a string
    assert items[0]["__SEQUENCE"] == 30
    # Late: an update older than the row (lsn 25 < 30), the snapshot of 2 again, an insert of
    # 3 older than its delete: none of them overwrites or resurrects anything.
    tables.send_changes([
        change("u", 25, row(1, "apple"), row(1, "stale")),
        change("r", 5, None, row(2, "old pear")),
        change("c", 45, None, row(3, "fig again")),
        change("u", 60, row(2, "pear"), row(2, "pear", "3.00")),
    ])  # fmt: skip
    tables.apply()
    assert [(r["id"], r["name"], r["price"]) for r in tables.rows("items")] == [
        (1, "apple", Decimal("2.25")), (2, "pear", Decimal("3.00")),
    ]  # fmt: skip
    # Re-running with nothing new changes nothing.
    assert [r.run for r in tables.apply()] == [None, None]


def test_scd2_keeps_history_with_late_events_in_their_place(tables: Tables) -> None:
    tables.send_changes([
        change("c", 10, None, row(1, "a")),
        change("u", 30, row(1, "a"), row(1, "c")),
        change("u", 35, row(1, "c"), row(1, "c", note="untracked")),
        change("d", 50, row(1, "c"), None),
    ])  # fmt: skip
    tables.apply()
    history = tables.rows("items_history", "id,__START_AT")
    assert [(r["name"], r["note"], r["__START_AT"], r["__END_AT"]) for r in history] == [
        ("a", None, 10, 30), ("c", "untracked", 30, 50),
    ]  # fmt: skip
    # lsn 20 belongs between a and c; 60 re-inserts after the delete; 50 again is a duplicate.
    tables.send_changes([
        change("u", 20, row(1, "a"), row(1, "b")),
        change("c", 60, None, row(1, "d")),
        change("d", 50, row(1, "c"), None),
    ])  # fmt: skip
    tables.apply()
    history = tables.rows("items_history", "id,__START_AT")
    assert [(r["name"], r["__START_AT"], r["__END_AT"]) for r in history] == [
        ("a", 10, 20), ("b", 20, 30), ("c", 30, 50), ("d", 60, None),
    ]  # fmt: skip


def test_a_new_source_column_becomes_a_table_column_and_a_decimal_widens(tables: Tables) -> None:
    tables.send_changes([change("c", 10, None, row(1, "a"))])
    tables.apply()
    wider = json.loads(json.dumps(ENVELOPE))
    fields = wider["fields"][1]["type"][1]["fields"]
    fields.append({"name": "colour", "type": "string", "default": ""})
    fields[2]["type"]["precision"] = 12  # numeric(10,2) → numeric(12,2) in the source
    from zync_assets_tests.conftest import produce_json

    after = {**row(2, "b"), "colour": "red"}
    produce_json(tables.stack, tables.topic["Items"], [change("c", 20, None, after)],
                 value_schema=wider)  # fmt: skip
    tables.apply()
    assert [(r["id"], r["colour"], r["price"]) for r in tables.rows("items")] == [
        (1, None, Decimal("1.50")), (2, "red", Decimal("1.50")),
    ]  # fmt: skip
    schema = tables.spark.read.format("delta").load(table_path("items")).schema
    assert schema["price"].dataType.simpleString() == "decimal(12,2)"


def test_a_type_that_cannot_widen_is_refused_and_nothing_is_written(tables: Tables) -> None:
    tables.send_changes([change("c", 10, None, row(1, "a"))])
    tables.apply()
    other = json.loads(json.dumps(ENVELOPE))
    other["fields"][1]["type"][1]["fields"][1] = {"name": "name", "type": "long"}
    from zync_assets_tests.conftest import produce_json

    produce_json(tables.stack, tables.topic["Items"],
                 [change("c", 20, None, {**row(2, "b"), "name": 7})], value_schema=other)  # fmt: skip
    tables.ingest()
    before = tables.spark.sql(f"DESCRIBE HISTORY delta.`{table_path('items')}`").count()
    with pytest.raises(
        ZyncError, match=r"table items: column name is string but new events hold bigint"
    ):
        run_tables(
            tables.spark, tables.spec, Registry(tables.stack.registry_settings), only="items"
        )
    after = tables.spark.sql(f"DESCRIBE HISTORY delta.`{table_path('items')}`").count()
    assert after == before


def test_history_time_travel_and_the_change_feed_from_the_cli(tables: Tables, lake: Path) -> None:
    tables.send_changes([change("c", 10, None, row(1, "a")), change("c", 11, None, row(2, "b"))])
    tables.apply()
    tables.send_changes(
        [change("u", 20, row(1, "a"), row(1, "z")), change("d", 30, row(2, "b"), None)]
    )
    tables.ingest()
    env = tables.stack.env(ZYNC_LAKE=str(lake))
    spec = str(tables.spec.path)
    applied = run_zync("table", "apply", spec, "--table", "items", env=env, timeout=300)
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.splitlines() == [
        "table items: run 2: applied 1 upserts and 1 deletes of 2 events (0 change no row)"
    ]
    unknown = run_zync("table", "apply", spec, "--table", "nope", env=env)
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == (
        f"zync: error: no table 'nope' in {spec} (it has items, items_history)"
    )
    history = run_zync("table", "history", "items", "--format", "json", env=env)
    assert history.returncode == 0, history.stderr
    passes = [json.loads(line) for line in history.stdout.splitlines()]
    merges = [p for p in passes if p["run"] is not None]
    assert [(p["run"], p["upserts"], p["deletes"], p["applied_to"]) for p in merges] == [
        (1, 2, 0, {tables.topic["Items"]: {"0": 2}}), (2, 1, 1, {tables.topic["Items"]: {"0": 4}}),
    ]  # fmt: skip
    first = merges[0]["version"]
    old = run_zync(
        "query", "--as-of", str(first), "SELECT id, name FROM items ORDER BY id", env=env
    )
    assert old.returncode == 0, old.stderr
    assert [json.loads(line) for line in old.stdout.splitlines()] == [
        {"id": 1, "name": "a"}, {"id": 2, "name": "b"},
    ]  # fmt: skip
    feed = run_zync("table", "changes", "items", "--from", str(first + 1), env=env)
    assert feed.returncode == 0, feed.stderr
    kinds = sorted((json.loads(line)["id"], json.loads(line)["_change_type"])
                   for line in feed.stdout.splitlines())  # fmt: skip
    assert kinds == [(1, "update_postimage"), (1, "update_preimage"), (2, "delete")]
    bad = run_zync("query", "--as-of", "yesterday", "SELECT 1", env=env)
    assert bad.returncode == 1 and bad.stderr.startswith(
        "zync: error: --as-of 'yesterday': give a Delta version"
    )
    assert len(bad.stderr.splitlines()) == 1
    missing = run_zync("table", "history", "nope", env=env)
    assert missing.returncode == 1 and "table 'nope' does not exist" in missing.stderr
    no_feed = run_zync("table", "changes", "nope", "--from", "1", env=env)
    assert no_feed.returncode == 1
    assert no_feed.stderr.strip().endswith(f"table 'nope' does not exist in {lake / '_tables'}")


def test_a_delete_is_remembered_for_its_retention_window_then_forgotten(
    spark, stack: Stack, tmp_path: Path, lake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within deleted-keys-retention a late insert older than the delete stays deleted
    (test_scd1_…); past it, the change log forgets the delete and such an insert is
    applied: the window is what the docs say it is."""
    import zync_assets.tables.apply as apply

    monkeypatch.setattr(apply, "PRUNE_EVERY", 1)  # forget on every pass, not every 50th
    short = Tables(spark, stack, tmp_path, SPEC.replace("    sequence-by: source:lsn::bigint\n",
                   "    sequence-by: source:lsn::bigint\n    deleted-keys-retention: 1s\n", 1),
                   ["Items"])  # fmt: skip
    short.send_changes([change("c", 10, None, row(1, "a")), change("d", 30, row(1, "a"), None)])
    short.apply()
    assert short.rows("items") == []
    time.sleep(1.5)
    short.send_changes([change("c", 20, None, row(1, "late"))])
    short.apply()
    assert [(r["id"], r["name"]) for r in short.rows("items")] == [(1, "late")]


def test_a_pass_that_dies_between_its_change_log_and_its_merge_is_retried_whole(
    tables: Tables, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The change log's append and the table's MERGE are two commits: a pass killed
    between them leaves the table and its cursors as they were, and the retry (the same
    run number) appends nothing twice and applies everything once."""
    import zync_assets.tables.apply as apply

    monkeypatch.setattr(apply, "REWRITE_BELOW_BYTES", 0)  # the MERGE path (test_tables_rewrite)
    tables.send_changes([change("c", 10, None, row(1, "a")), change("c", 20, None, row(2, "b"))])
    tables.apply()
    tables.send_changes(
        [change("d", 30, row(1, "a"), None), change("u", 40, row(2, "b"), row(2, "c"))]
    )
    real_merge = apply._merge

    def dies(*args, **kwargs):
        raise RuntimeError("killed")

    monkeypatch.setattr(apply, "_merge", dies)
    with pytest.raises(RuntimeError, match="killed"):
        tables.apply()
    assert [(r["id"], r["name"]) for r in tables.rows("items")] == [(1, "a"), (2, "b")]
    monkeypatch.setattr(apply, "_merge", real_merge)
    results = run_tables(tables.spark, tables.spec, Registry(tables.stack.registry_settings))
    assert [(r.run, r.deletes, r.upserts) for r in results] == [(2, 1, 1), (2, 1, 1)]
    assert [(r["id"], r["name"]) for r in tables.rows("items")] == [(2, "c")]
    log = tables.spark.read.format("delta").load(table_changes_path("items"))
    assert log.count() == 1  # the delete, logged once


def test_maintenance_keeps_a_tables_rows_and_cursors(tables: Tables) -> None:
    """What `zync run` does every --compact-every commits (compaction, vacuum, a carry of
    the table's state): the rows stay, and the next pass goes on from the cursors."""
    from zync_assets.pipeline.maintenance import Maintenance

    for lsn in (10, 20, 30):  # three passes: three small files
        tables.send_changes([change("c", lsn, None, row(lsn, f"n{lsn}"))])
        tables.apply()
    done = Maintenance(tables.spark).maintain(table_path("items"), vacuum=True)
    assert done.describe().startswith("table items: compacted") and done.carried == 1
    tables.send_changes([change("u", 40, row(10, "n10"), row(10, "changed"))])
    (items, _history) = tables.apply()
    assert (items.run, items.read) == (4, 1)  # from the cursors: nothing read twice
    assert [(r["id"], r["name"]) for r in tables.rows("items")] == [
        (10, "changed"), (20, "n20"), (30, "n30"),
    ]  # fmt: skip


def test_events_that_change_no_row_are_counted_and_make_no_table_yet(tables: Tables) -> None:
    """Debezium's tombstone has no `source`, so no sequence here: it changes no row. A
    table whose first events are all such waits for one that does (its keys' types come
    from it), and then applies it."""
    tables.send_changes([({"id": 1}, None)])
    results = tables.apply()
    assert [(r.run, r.read, r.ignored, r.note) for r in results] == [
        (None, 1, 1, "no row changes yet"), (None, 1, 1, "no row changes yet"),
    ]  # fmt: skip
    assert not pool_exists(table_path("items"))
    tables.send_changes([change("c", 10, None, row(1, "a"))])
    results = tables.apply()
    assert [(r.run, r.read, r.ignored, r.upserts) for r in results] == [(1, 2, 1, 1), (1, 2, 1, 1)]
    assert [(r["id"], r["name"]) for r in tables.rows("items")] == [(1, "a")]


SEMANTIC_ROW = {
    "type": "record", "name": "TypedRow", "fields": [
        {"name": "id", "type": "long"},
        {"name": "born", "type": {"type": "int", "connect.name": "io.debezium.time.Date"}},
        {"name": "wall", "type": {"type": "long", "connect.name": "io.debezium.time.Timestamp"}},
        {"name": "seen", "type": {"type": "long", "connect.name": "io.debezium.time.MicroTimestamp"}},
        {"name": "at", "type": {"type": "string", "connect.name": "io.debezium.time.ZonedTimestamp"}},
        {"name": "opens", "type": {"type": "long", "connect.name": "io.debezium.time.MicroTime"}},
        {"name": "doc", "type": {"type": "string", "connect.name": "io.debezium.data.Json"}},
        {"name": "ref", "type": {"type": "string", "connect.name": "io.debezium.data.Uuid"}},
        {"name": "year", "type": {"type": "int", "connect.name": "io.debezium.time.Year"}},
        {"name": "body", "type": ["null", "string"], "default": None},
        {"name": "blob", "type": ["null", "bytes"], "default": None},
    ],
}  # fmt: skip
SEMANTIC_ENVELOPE = {
    "type": "record", "name": "TypedEnvelope", "fields": [
        {"name": "op", "type": "string"},
        {"name": "before", "type": ["null", SEMANTIC_ROW], "default": None},
        {"name": "after", "type": ["null", "TypedRow"], "default": None},
        {"name": "source", "type": {"type": "record", "name": "TypedSource",
                                    "fields": [{"name": "lsn", "type": "long"}]}},
    ],
}  # fmt: skip
PLACEHOLDER = "__debezium_unavailable_value"


def typed_row(id: int, body: str | None, blob: bytes | None = b"\x00\x01") -> dict:
    """A row with one column of each of Debezium's semantic types, as its Avro converter
    writes them (a Date its days, a MicroTime its microseconds, a Json its text); bytes
    as base64, as zync's producer takes them."""
    return {
        "id": id, "born": 18265 + id, "wall": 1_700_000_000_123, "seen": 1_700_000_000_123_456,
        "at": "2026-03-04T05:06:07.5+02:00", "opens": (9 * 3600 + 30 * 60) * 1_000_000 + 250,
        "doc": '{"a": [1, 2]}', "ref": "6f1c2a3e-0000-4000-8000-000000000001", "year": 2026,
        "body": body, "blob": None if blob is None else base64.b64encode(blob).decode(),
    }  # fmt: skip


@pytest.fixture
def typed(spark, stack: Stack, tmp_path: Path, lake: Path) -> Tables:
    spec = SPEC.replace("items_history", "typed_history").replace("name: items", "name: typed")
    return Tables(spark, stack, tmp_path, spec, ["Items"])


def send_typed(typed: Tables, changes: list[tuple[dict, dict]]) -> None:
    from zync_assets_tests.conftest import produce_json

    produce_json(typed.stack, typed.topic["Items"], changes, value_schema=SEMANTIC_ENVELOPE)


def test_debeziums_semantic_types_become_typed_columns(typed: Tables) -> None:
    """A Debezium Date is a DATE column (it stopped the table's first pass, read as days),
    its Timestamps time zone-less timestamps, a ZonedTimestamp the instant, a MicroTime
    its time of day, a Json its document."""
    send_typed(typed, [change("c", 10, None, typed_row(1, "short"))])
    assert [r.run for r in typed.apply()] == [1, 1]
    (got,) = typed.rows("typed")
    assert got["born"] == dt.date(2020, 1, 5)  # day 18,266 of the epoch
    assert got["wall"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123000)
    assert got["seen"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123456)
    table = typed.spark.read.format("delta").load(table_path("typed"))
    assert table.where("at = TIMESTAMP '2026-03-04 05:06:07.5+02:00'").count() == 1
    assert got["opens"] == "09:30:00.000250"
    assert json.loads(got["doc"].toJson()) == {"a": [1, 2]}
    assert (got["ref"], got["year"], got["blob"]) == (typed_row(1, "")["ref"], 2026, b"\x00\x01")
    schema = {f.name: f.dataType.simpleString() for f in table.schema.fields}
    assert (schema["born"], schema["wall"], schema["at"]) == ("date", "timestamp_ntz", "timestamp")


def test_an_unchanged_toasted_value_keeps_its_previous_value(typed: Tables) -> None:
    """Debezium writes `__debezium_unavailable_value` for a TOASTed column an UPDATE left
    unchanged (default replica identity): SCD1 and SCD2 keep the value it had, whether that
    is in the same pass or only in the table."""
    big, blob = "x" * 20_000, b"\x07" * 3000
    send_typed(typed, [
        change("c", 10, None, typed_row(1, big, blob)),
        change("u", 20, None, {**typed_row(1, PLACEHOLDER, PLACEHOLDER.encode()), "year": 2027}),
        change("c", 30, None, typed_row(2, "two")),
    ])  # fmt: skip
    typed.apply()
    current = {r["id"]: r for r in typed.rows("typed")}
    assert (current[1]["body"], current[1]["blob"], current[1]["year"]) == (big, blob, 2027)
    send_typed(typed, [  # only the table holds the values now
        change("u", 40, None, {**typed_row(1, PLACEHOLDER, PLACEHOLDER.encode()), "year": 2028}),
        change("u", 50, None, {**typed_row(2, PLACEHOLDER), "year": 2030}),
    ])  # fmt: skip
    typed.apply()
    current = {r["id"]: r for r in typed.rows("typed")}
    assert (current[1]["body"], current[1]["blob"], current[1]["year"]) == (big, blob, 2028)
    assert (current[2]["body"], current[2]["year"]) == ("two", 2030)
    history = typed.rows("typed_history", "id,__START_AT")
    assert [(r["id"], r["year"], r["body"] == big, r["blob"] == blob) for r in history] == [
        (1, 2026, True, True), (1, 2027, True, True), (1, 2028, True, True),
        (2, 2026, False, False), (2, 2030, False, False),
    ]  # fmt: skip
    assert all(PLACEHOLDER not in (r["body"] or "") for r in history)


NAMED_SPEC = SPEC.replace("keys: [id]", "keys: [name]")


def test_a_pass_bounds_its_merge_by_its_keys_range_whatever_the_keys_hold(
    spark, stack: Stack, tmp_path: Path, lake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The MERGE's join, and SCD2's read of the stored versions, are bounded by the touched
    keys' range, so Delta skips the files outside it (bench/tables_bench.py: recent keys).
    The bounds are SQL literals: string keys holding a quote or a backslash and dates keep
    every touched key inside, and the passes over them stay right. (A table this small is
    merged unbounded by default, apply.KEY_RANGE_FROM_BYTES: here every table is bounded.)"""
    from zync_assets.tables import apply, merge
    from zync_assets.tables.merge import key_bounds, key_range

    monkeypatch.setattr(apply, "KEY_RANGE_FROM_BYTES", 0)
    monkeypatch.setattr(apply, "REWRITE_BELOW_BYTES", 0)  # MERGEs, not the shared job
    bounded: list[merge.Bounds] = []
    found = merge.key_bounds

    def counted(*args: Any) -> merge.Bounds:
        bounded.append(found(*args))
        return bounded[-1]

    monkeypatch.setattr(merge, "key_bounds", counted)

    names = [f"k{n:02d}" for n in range(30)] + ["O'Brien\\", "o'brien", "\\'"]
    frame = spark.createDataFrame(
        [(n, name, dt.date(2026, 1, 1) + dt.timedelta(days=n)) for n, name in enumerate(names)],
        "id bigint, name string, born date",
    )
    bounds = key_bounds(frame.where("id >= 10"), ["id", "name", "born"])
    assert [k for k, _, _ in bounds] == ["id", "name", "born"]
    kept = frame.where(key_range(bounds)).collect()
    assert sorted(r.id for r in kept) == list(range(10, len(names)))  # all inside; 0-9 not
    assert key_range(key_bounds(frame.where("id < 0"), ["id"])) == "TRUE"  # nothing touched

    tables = Tables(spark, stack, tmp_path, NAMED_SPEC, ["Items"])
    tables.send_changes([change("c", n, None, row(n, name)) for n, name in enumerate(names)])
    tables.apply()
    tables.send_changes([
        change("u", 900, row(1, "k25"), row(1, "k25", "9.99")),
        change("u", 901, row(2, "O'Brien\\"), row(2, "O'Brien\\", "8.88")),
    ])  # fmt: skip
    tables.apply()
    prices = {r["name"]: r["price"] for r in tables.rows("items", "name")}
    assert len(prices) == len(names) and prices["k25"] == Decimal("9.99")
    assert prices["O'Brien\\"] == Decimal("8.88") and prices["o'brien"] == Decimal("1.50")
    # Every MERGE was bounded: the history's two and items' second (items' first pass
    # appends to the empty table, no MERGE).
    assert len(bounded) == 3 and all(bounds for bounds in bounded), bounded
    history = [r for r in tables.rows("items_history", "name,__START_AT") if r["name"] == "k25"]
    assert [(r["price"], r["__END_AT"]) for r in history] == [
        (Decimal("1.50"), 900), (Decimal("9.99"), None),
    ]  # fmt: skip


def _vectors_added(path: str) -> int:
    """How many files the table's commits added with a deletion vector."""
    log = Path(path.removeprefix("file:")) / "_delta_log"
    actions = (json.loads(line) for f in sorted(log.glob("*.json")) for line in f.open())
    return sum(1 for a in actions if (a.get("add") or {}).get("deletionVector"))


@pytest.mark.parametrize("from_bytes", ["default", 0])
def test_a_small_tables_merge_rewrites_its_files_a_large_ones_marks_deletion_vectors(
    tables: Tables, monkeypatch: pytest.MonkeyPatch, from_bytes: str | int
) -> None:
    """A table under apply.DELETION_VECTORS_FROM_BYTES (these few rows) has the files its
    MERGE touches rewritten; at or over it (here: a threshold of 0), the changed rows are
    marked with deletion vectors. The rows are the same either way."""
    from zync_assets.tables import apply

    monkeypatch.setattr(apply, "REWRITE_BELOW_BYTES", 0)  # the MERGE path, whatever the size
    if from_bytes != "default":
        monkeypatch.setattr(apply, "DELETION_VECTORS_FROM_BYTES", from_bytes)
    tables.send_changes([change("c", 10 + i, None, row(i, f"n{i}")) for i in range(1, 5)])
    tables.apply()
    tables.send_changes(
        [change("u", 20, row(2, "n2"), row(2, "two")), change("d", 30, row(3, "n3"), None)]
    )
    tables.apply()
    assert [(r["id"], r["name"]) for r in tables.rows("items")] == [
        (1, "n1"),
        (2, "two"),
        (4, "n4"),
    ]
    added = _vectors_added(table_path("items"))
    assert added == 0 if from_bytes == "default" else added > 0, added
