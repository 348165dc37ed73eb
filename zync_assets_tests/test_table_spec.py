"""A spec's `tables:` section: parsed as Spark's Auto CDC names it, each error naming the
file, the table and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from zync_assets.core.errors import ZyncError
from zync_assets.lake.pools import check_pool_name
from zync_assets.specs.model import load_spec
from zync_assets.tables.columns import ColumnTypeError, column_type, merged_type, split_fields
from zync_assets.tables.declared import declared_columns

HEAD = """
inputs:
  - {topic: shop.public.items, pool: Raw}
outputs:
  - {topic: items_out, pool: Staging}
transforms:
  - {type: stateless, in: shop.public.items, out: items_out, sql: "in.key AS key, in.after AS value"}
tables:
"""


def spec(tmp_path: Path, tables: str):
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + tables)
    return load_spec(path)


def test_a_table_with_every_option(tmp_path: Path) -> None:
    (table,) = spec(tmp_path, """
  - name: item_history
    source: shop.public.items
    keys: [tenant, id]
    sequence-by: [source:lsn::bigint, source:ts_ms::bigint]
    apply-as-deletes: op = 'd'
    stored-as: scd2
    except-column-list: [secret]
    track-history-column-list: [price]
    deleted-keys-retention: 2d
""").tables  # fmt: skip
    assert table.source_pool == "Raw" and not table.from_staging
    assert table.keys == ("tenant", "id")
    assert table.sequence_by == ("source:lsn::bigint", "source:ts_ms::bigint")
    assert table.scd2 and table.retention_s == 2 * 86400
    assert table.keeps("id") and table.keeps("price") and not table.keeps("secret")
    assert table.tracks("price") and not table.tracks("name")


def test_defaults_and_a_staging_source(tmp_path: Path) -> None:
    (table,) = spec(tmp_path, "  - {name: items, source: items_out, keys: id}\n").tables
    assert (table.source_pool, table.from_staging) == ("Staging", True)
    assert table.sequence_by == ("kafka.offset",)
    assert table.apply_as_deletes is None and table.stored_as == "scd1"
    assert table.retention_s == 7 * 86400


def test_a_table_without_keys_takes_debeziums_and_a_pattern_names_a_table_per_topic(
    tmp_path: Path,
) -> None:
    loaded = spec(tmp_path, (
        "  - {name: items, source: shop.public.items}\n"
        "  - {topics: 'shop\\.public\\..*', exclude: ['shop\\.public\\.audit'], "
        "name: '{schema}_{table}', stored-as: scd2}\n"
    ))  # fmt: skip
    (items,) = loaded.tables
    assert items.keys == () and items.sequence_by[0] == "source:lsn::bigint"
    assert items.sequence_by[-1] == "kafka.offset"
    (pattern,) = loaded.table_patterns
    made = pattern.table_for("shop.public.order-lines", "Raw")
    assert (made.name, made.source, made.source_pool, made.stored_as) == (
        "public_order_lines", "shop.public.order-lines", "Raw", "scd2",
    )  # fmt: skip
    assert pattern.topics.matches("shop.public.x") and not pattern.topics.matches(
        "shop.public.audit"
    )
    with pytest.raises(ZyncError, match=r"makes table name '9_x', which is not one"):
        pattern.table_for("shop.9.x", "Raw")


@pytest.mark.parametrize(
    ("tables", "error"),
    [
        ("  - {name: t, source: nope, keys: [id]}", r"tables\[t\] source: 'nope' is neither"),
        ("  - {topics: 'shop\\..*', name: t}", r"tables\[1\] name: 't': a pattern's tables need"),
        ("  - {topics: 'shop\\..*', name: '{table}_{tabel}'}", r"tables\[1\] name: .*placeholders are"),
        ("  - {topics: '(', name: '{table}'}", r"tables\[1\] topics: not a regular expression"),
        ("  - {topics: 'x', exclude: ['('], name: '{table}'}", r"tables\[1\] exclude: not a regular"),
        ("  - {topics: 'x', source: items_out, name: '{table}'}",
         r"tables\[1\] source: give topics \(a pattern\) or source"),
        ("  - {topics: 'x', name: '{table}', stored-as: scd3}",
         r"tables\[1\] stored-as: 'scd3'"),
        ("  - {name: t, source: items_out, exclude: [x]}",
         r"tables\[t\] exclude: only a table pattern \(topics:\) excludes"),
        ("  - {name: '../x', source: items_out, keys: [id]}", r"tables\[1\] name: '../x' is not"),
        ("  - {name: t, source: items_out, keys: [id], stored-as: scd3}",
         r"tables\[t\] stored-as: 'scd3': expected scd1 or scd2"),
        ("  - {name: t, source: items_out, keys: [id], track-history-column-list: [a]}",
         r"tables\[t\] track-history-column-list: only an scd2 table keeps history"),
        ("  - {name: t, source: items_out, keys: [id], column-list: [a], except-column-list: [b]}",
         r"tables\[t\] except-column-list: give column-list or except-column-list"),
        ("  - {name: t, source: items_out, keys: [id], except-column-list: [id]}",
         r"tables\[t\] except-column-list: 'id' is a key"),
        ("  - {name: t, source: items_out, keys: ['a b']}", r"tables\[t\] keys: 'a b' is not a column"),
        ("  - {name: t, source: items_out, keys: [id, id]}", r"tables\[t\] keys: lists a column twice"),
        ("  - {name: t, source: items_out, keys: [id], sequnce-by: x}",
         r"tables\[t\] sequnce-by: not a field of a table"),
        ("  - {name: t, source: items_out, keys: [id], deleted-keys-retention: soon}",
         r"tables\[t\] deleted-keys-retention: bad duration"),
        ("  - {name: t, source: items_out, keys: [id]}\n  - {name: t, source: items_out, keys: [id]}",
         r"tables\[t\] name: is used by two tables"),
        ("  oops", r"tables: expected a non-empty list"),
    ],
)  # fmt: skip
def test_bad_tables_name_the_file_table_and_field(tmp_path: Path, tables: str, error: str) -> None:
    with pytest.raises(ZyncError, match=r"s\.yaml: " + error):
        spec(tmp_path, tables + "\n")


@pytest.mark.parametrize("folder", ["_tables", "_failing"])
def test_the_lakes_own_folders_are_no_pool_names(folder: str) -> None:
    with pytest.raises(ZyncError, match="the lake keeps its own files there"):
        check_pool_name(folder)


def test_column_types_from_variant_types() -> None:
    fields = split_fields(
        "OBJECT<a: BIGINT, b: DECIMAL(5,2), c: OBJECT<x: STRING, y: INT>, d: VOID>"
    )
    assert [(n, column_type(t)) for n, t in fields] == [
        ("a", "bigint"), ("b", "decimal(38,18)"), ("c", "variant"), ("d", None),
    ]  # fmt: skip  # a VARIANT drops a decimal's declared scale: a wide one serves any
    assert merged_type("t", "a", "decimal(10,2)", "decimal(12,2)") == "decimal(12,2)"
    assert merged_type("t", "a", "decimal(12,2)", "decimal(10,2)") == "decimal(12,2)"
    assert merged_type("t", "a", "float", "double") == "double"
    assert merged_type("t", "a", "double", "float") == "double"
    assert merged_type("t", "a", None, "string") == "string"
    assert merged_type("t", "a", "string", None) == "string"
    with pytest.raises(
        ColumnTypeError,
        match=r"table t: column a is decimal.38,2. but new events hold decimal.38,3.",
    ):
        merged_type("t", "a", "decimal(38,2)", "decimal(38,3)")


def test_column_types_from_a_debezium_envelopes_avro_schemas() -> None:
    """Debezium's time types and decimals get real types; a newer schema version's field
    joins, and its type wins; a reference to the row record by name is followed."""

    def envelope(fields: list) -> dict:
        row = {
            "type": "record",
            "name": "Value",
            "namespace": "shop.public.items",
            "fields": fields,
        }
        return {"type": "record", "name": "Envelope", "fields": [
            {"name": "before", "type": ["null", row]},
            {"name": "after", "type": ["null", "shop.public.items.Value"]},
            {"name": "op", "type": "string"},
        ]}  # fmt: skip

    v1 = envelope([
        {"name": "id", "type": "int"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10,
                                    "scale": 2, "connect.name": "org.apache.kafka.connect.data.Decimal"}},
        {"name": "born", "type": {"type": "int", "connect.name": "io.debezium.time.Date"}},
        {"name": "seen", "type": {"type": "long", "connect.name": "io.debezium.time.MicroTimestamp"}},
        {"name": "at", "type": ["null", {"type": "string", "connect.name": "io.debezium.time.ZonedTimestamp"}]},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "wall", "type": {"type": "long", "connect.name": "io.debezium.time.Timestamp"}},
        {"name": "opens", "type": {"type": "long", "connect.name": "io.debezium.time.MicroTime"}},
        {"name": "doc", "type": {"type": "string", "connect.name": "io.debezium.data.Json"}},
        {"name": "ratio", "type": {"type": "record", "name": "VariableScaleDecimal", "connect.name": "io.debezium.data.VariableScaleDecimal",
                                   "fields": [{"name": "scale", "type": "int"}, {"name": "value", "type": "bytes"}]}},
        {"name": "ref", "type": {"type": "string", "connect.name": "io.debezium.data.Uuid"}},
        {"name": "year", "type": {"type": "int", "connect.name": "io.debezium.time.Year"}},
        {"name": "took", "type": {"type": "long", "connect.name": "io.debezium.time.MicroDuration"}},
    ])  # fmt: skip
    v2 = envelope([{"name": "id", "type": "long"}, {"name": "huge", "type": {
        "type": "bytes", "logicalType": "decimal", "precision": 64, "scale": 4}}])  # fmt: skip
    assert declared_columns([v1, v2], envelope=True) == {
        # Each the type of the value ingest stores (a Date is a DATE there, not its days).
        "id": "bigint",
        "amount": "decimal(10,2)",
        "born": "date",
        "seen": "timestamp_ntz",
        "at": "timestamp",
        "tags": "variant",
        "wall": "timestamp_ntz",
        "opens": "string",
        "doc": "variant",
        "ratio": "variant",
        "ref": "string",
        "year": "bigint",
        "took": "bigint",
        "huge": "decimal(38,4)",
    }


def test_a_table_or_a_staging_pool_belongs_to_one_spec(tmp_path: Path) -> None:
    from zync_assets.orchestration.definitions import build_zync_definitions

    def named(name: str, text: str):
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        return load_spec(path)

    table = HEAD + "  - {name: items, source: shop.public.items, keys: [id]}\n"
    alone = table.replace("Staging", "Staging2").replace("items_out", "items_out2")
    with pytest.raises(
        ZyncError, match="table items is in specs a and b: define each table in one"
    ):
        build_zync_definitions([named("a", table), named("b", alone)])
    other = table.replace("name: items", "name: others")
    with pytest.raises(ZyncError, match="staging pool Staging is in specs a and c: give each spec"):
        build_zync_definitions([named("a", table), named("c", other)])
