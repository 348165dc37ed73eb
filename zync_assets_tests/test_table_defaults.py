"""Lake tables that take Debezium's keys and order (a spec gives neither), primary-key
moves, truncates, and one table per topic of a pattern. Real Kafka, registry, Spark, Delta."""

from __future__ import annotations

import dataclasses
import time
import uuid
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance, materialize

from zync_assets.core.config import ZyncConfig, in_force
from zync_assets.core.errors import ZyncError
from zync_assets.kafka.registry import Registry
from zync_assets.lake.pools import pool_exists, table_path
from zync_assets.orchestration.definitions import build_zync_definitions
from zync_assets.pipeline.run import Pipeline as LivePipeline
from zync_assets.specs.model import load_spec
from zync_assets.tables.together import run_tables
from zync_assets_tests.conftest import Stack, produce_json
from zync_assets_tests.test_etl import Pipeline

pytestmark = pytest.mark.integration

SPEC = """
inputs:
  - {topic: $Items, pool: Raw}
  - {topic: $Keyless, pool: Raw}
tables:
  - {name: items, source: $Items}
  - {name: items_history, source: $Items, stored-as: scd2}
  - {name: keyless, source: $Keyless}
"""

ROW = {
    "type": "record", "name": "Row", "fields": [
        {"name": "shop", "type": "string"},
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
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


def row(shop: str, id: int, name: str) -> dict:
    return {"shop": shop, "id": id, "name": name}


def change(op: str, lsn: int, before: dict | None = None, after: dict | None = None):
    image = after or before
    key = {"shop": image["shop"], "id": image["id"]} if image else None
    return key, {"op": op, "before": before, "after": after, "source": {"lsn": lsn}}


class Tables(Pipeline):
    def send(self, topic: str, events: list, partitions: int = 1) -> None:  # type: ignore[override]
        produce_json(self.stack, self.topic[topic], events, value_schema=ENVELOPE)

    def apply(self, only: str | None = None) -> list:
        self.ingest()
        return run_tables(self.spark, self.spec, Registry(self.stack.registry_settings), only=only)

    def rows(self, name: str) -> list[tuple]:
        frame = self.spark.read.format("delta").load(table_path(name))
        found = [r.asDict() for r in frame.collect()]
        return sorted(
            (r["shop"], r["id"], r["name"], (r.get("__END_AT") or {"s0": None})["s0"])
            for r in found
        )


@pytest.fixture
def tables(spark, stack: Stack, tmp_path: Path, lake: Path) -> Tables:
    return Tables(spark, stack, tmp_path, SPEC, ["Items", "Keyless"])


def test_a_table_without_keys_takes_the_message_keys_fields_and_the_connectors_order(
    tables: Tables,
) -> None:
    """Keys from the Kafka key (composite here); order by the LSN, so an older event sent
    again after a newer one never wins (SCD2 puts it in its place); a primary-key update
    (Debezium's delete, tombstone, create) moves the row. The tombstone counts as a
    delete, as any topic's does, at the least of sequences (it has no LSN): it changes
    nothing the delete before it did not."""
    tables.send("Items", [
        change("r", 10, after=row("a", 1, "apple")),
        change("r", 10, after=row("a", 2, "pear")),  # a snapshot: one LSN for all
        change("r", 10, after=row("b", 1, "fig")),
        change("u", 30, row("a", 1, "apple"), row("a", 1, "apple v2")),
        change("u", 25, row("a", 1, "apple"), row("a", 1, "stale")),  # sent again, later
        change("d", 40, before=row("b", 1, "fig")),  # UPDATE ... SET id = 9
        ({"shop": "b", "id": 1}, None),
        change("c", 40, after=row("b", 9, "fig")),
    ])  # fmt: skip
    items, _history = tables.apply(only="items") + tables.apply(only="items_history")
    assert (items.run, items.upserts, items.deletes) == (1, 6, 2)
    assert tables.rows("items") == [
        ("a", 1, "apple v2", None), ("a", 2, "pear", None), ("b", 9, "fig", None),
    ]  # fmt: skip
    stored = tables.spark.read.format("delta").load(table_path("items"))
    assert stored.schema["__SEQUENCE"].dataType.simpleString().startswith("struct<s0:bigint")
    assert tables.rows("items_history") == [
        ("a", 1, "apple", 25), ("a", 1, "apple v2", None), ("a", 1, "stale", 30),
        ("a", 2, "pear", None), ("b", 1, "fig", 40), ("b", 9, "fig", None),
    ]  # fmt: skip
    # The keys are recorded: a later pass keys by them, and a source keyed otherwise now
    # (its primary key changed) stops the table with the command that keys it anew.
    tables.send("Items", [({"id": 5}, {"op": "c", "after": row("c", 5, "kiwi"),
                                       "source": {"lsn": 50}})])  # fmt: skip
    with pytest.raises(ZyncError, match=r"now keyed by id, but the table by id, shop.*rebuild"):
        tables.apply(only="items")
    assert tables.rows("items")[-1] == ("b", 9, "fig", None)  # nothing written


def test_a_source_without_keys_stops_its_table_with_what_to_do(tables: Tables) -> None:
    produce_json(tables.stack, tables.topic["Keyless"],
                 [(None, {"op": "c", "after": row("a", 1, "x"), "source": {"lsn": 1}})],
                 value_schema=ENVELOPE)  # fmt: skip
    with pytest.raises(ZyncError, match=r"carry no key .* give it keys in the spec"):
        tables.apply(only="keyless")
    assert not pool_exists(table_path("keyless"))


def test_a_truncate_empties_the_current_table_and_ends_every_open_version(
    tables: Tables,
) -> None:
    tables.send("Items", [
        change("c", 10, after=row("a", 1, "apple")),
        change("c", 11, after=row("a", 2, "pear")),
    ])  # fmt: skip
    tables.apply()
    # One pass: a row before the truncate (gone with it), the truncate, a row after it.
    tables.send("Items", [
        change("c", 20, after=row("a", 3, "fig")),
        (None, {"op": "t", "before": None, "after": None, "source": {"lsn": 30}}),
        change("c", 40, after=row("a", 1, "apple again")),
    ])  # fmt: skip
    items, _history = tables.apply(only="items") + tables.apply(only="items_history")
    assert (items.truncates, items.upserts) == (1, 2)
    assert tables.rows("items") == [("a", 1, "apple again", None)]
    assert tables.rows("items_history") == [  # fig lived from 20 to the truncate
        ("a", 1, "apple", 30), ("a", 1, "apple again", None), ("a", 2, "pear", 30),
        ("a", 3, "fig", 30),
    ]  # fmt: skip
    # A truncate alone, of rows no event of its pass names.
    tables.send("Items", [(None, {"op": "t", "before": None, "after": None,
                                  "source": {"lsn": 50}})])  # fmt: skip
    tables.apply()
    assert tables.rows("items") == []
    assert [r[3] for r in tables.rows("items_history")] == [30, 50, 30, 30]


class Unheard:
    """A PipelineReporter that says nothing (the test reads the pass's result)."""

    def __getattr__(self, name: str):
        return lambda *args: None


def live_spec(tmp_path: Path, prefix: str) -> Path:
    path = tmp_path / "whole.yaml"
    path.write_text(
        f"inputs:\n  - {{topics: '{prefix}\\.public\\..*', pool: Whole}}\n"
        "tables:\n"
        f"  - {{topics: '{prefix}\\.public\\..*', exclude: ['{prefix}\\.public\\.audit'], "
        "name: '{table}'}\n"
        f"  - {{name: b_by_name, source: {prefix}.public.b, keys: [id]}}\n"
    )
    return path


def simple(n: int, start: int = 0) -> list:
    return [({"id": i}, {"op": "c", "after": {"id": i, "v": f"v{i}"}}) for i in range(start, n)]


def test_a_table_pattern_keeps_one_table_per_topic_new_topics_included(
    spark, stack: Stack, tmp_path: Path, lake: Path
) -> None:
    """A topic a named table reads is that table's; an excluded topic gets none; a topic
    created while the pipeline runs gets its table; one table's failure (a source without
    keys, a name another topic's table has) stops that table alone."""
    prefix = f"tp{uuid.uuid4().hex[:6]}"
    topic = {t: f"{prefix}.public.{t}" for t in ("a", "b", "audit", "c", "d", "x_y", "x-y")}
    produce_json(stack, topic["a"], simple(3))
    produce_json(stack, topic["b"], simple(2))
    produce_json(stack, topic["audit"], simple(1))
    config = dataclasses.replace(ZyncConfig.from_env(), discovery_interval_s=1)
    with in_force(config):
        pipe = LivePipeline(spark, [load_spec(live_spec(tmp_path, prefix))], stack.kafka,
                            Registry(stack.registry_settings), stages=("ingest", "tables"))  # fmt: skip
        first = pipe.pass_once(Unheard())
        assert sorted(r.table for r in first.tabled) == ["a", "b_by_name"]
        produce_json(stack, topic["c"], simple(2))  # a table created in the database
        produce_json(stack, topic["d"], [(None, {"op": "c", "after": {"id": 1}})])  # no key
        produce_json(stack, topic["a"], simple(4, start=3))
        produce_json(stack, topic["x_y"], simple(1))  # two topics, one table name: x_y
        produce_json(stack, topic["x-y"], simple(1))
        time.sleep(1.2)
        second = pipe.pass_once(Unheard())
    applied = {r.table: (r.run, r.upserts) for r in second.tabled if r.run}
    assert applied == {"a": (2, 1), "c": (1, 2), "x_y": (1, 1)}  # x_y is x-y's (sorted first)
    assert "carry no key" in second.failures.pop("table d")
    collision = second.failures.pop(f"table of {topic['x_y']}")
    assert collision.startswith(f"topic {topic['x_y']} would make table x_y, which {topic['x-y']} "
                                "makes: change the spec's name template '{table}'")  # fmt: skip
    assert not second.failures
    counts = {
        name: spark.read.format("delta").load(table_path(name)).count()
        for name in ("a", "b_by_name", "c")
    }
    assert counts == {"a": 4, "b_by_name": 2, "c": 2}
    assert not pool_exists(table_path("b")) and not pool_exists(table_path("audit"))


def test_dagster_shows_a_patterns_tables_as_one_asset_that_grows_with_new_topics(
    spark, stack: Stack, tmp_path: Path, lake: Path
) -> None:
    """One asset for the pattern's tables: each materialization lists the tables it
    applied, a new topic's table joins it with no new definition, and a failing table
    fails its check by name while the others are applied."""
    prefix = f"tg{uuid.uuid4().hex[:6]}"
    topic = {t: f"{prefix}.public.{t}" for t in ("a", "b", "c", "d")}
    produce_json(stack, topic["a"], simple(3))
    produce_json(stack, topic["b"], simple(2))
    defs = build_zync_definitions([load_spec(live_spec(tmp_path, prefix))])
    key = AssetKey(["table", "whole_tables"])
    tables = defs.get_assets_def(key)
    assert AssetKey(["raw", "Whole"]) in tables.dependency_keys
    raw = defs.get_assets_def(AssetKey(["raw", "Whole"]))
    instance = DagsterInstance.ephemeral()

    def materialized() -> dict:
        done = materialize([raw, tables], instance=instance, resources=defs.resources,
                           raise_on_error=False)  # fmt: skip
        (event,) = done.asset_materializations_for_node(tables.op.name)
        (check,) = [c for c in done.get_asset_check_evaluations() if c.asset_key == key]
        return {"meta": event.metadata, "check": check}

    first = materialized()
    assert first["meta"]["tables"].value == 1  # a; b is the named table's
    assert "| a | 1 | 3 |" in first["meta"]["passes"].value and first["check"].passed
    produce_json(stack, topic["c"], simple(2))
    produce_json(stack, topic["d"], [(None, {"op": "c", "after": {"id": 1}})])  # no key
    second = materialized()
    assert second["meta"]["tables"].value == 3
    assert "| c | 1 | 2 |" in second["meta"]["passes"].value
    assert not second["check"].passed
    assert list(second["check"].metadata["failing"].value) == ["d"]
    assert spark.read.format("delta").load(table_path("c")).count() == 2
