"""A mirror rule: each topic its pattern takes to an output topic of its own, the row
flattened, a delete as a tombstone, a truncate as a tombstone per row, a TOASTed
column Debezium left out filled in from before; a topic that
appears while the pipeline runs gets its output; a topic another rule reads stays that
rule's. Real Kafka, registry, Spark,
Delta; the spec's parsing and expansion are unit tests."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from zync_assets.core.config import ZyncConfig, in_force
from zync_assets.core.errors import ZyncError
from zync_assets.kafka.registry import Registry
from zync_assets.pipeline.run import Pipeline
from zync_assets.specs.mirror import expand_mirrors, mirror_sources
from zync_assets.specs.model import load_spec
from zync_assets.tokafka import shapes
from zync_assets.tokafka.declared import declared_schemas
from zync_assets_tests.conftest import Stack, produce_json, read_topic
from zync_assets_tests.test_table_defaults import Unheard


def spec_text(prefix: str) -> str:
    return (
        "inputs:\n"
        f"  - {{topic: {prefix}.public.special, pool: Shop}}\n"
        f"  - {{topics: '{prefix}\\.public\\..*', pool: Shop}}\n"
        "outputs:\n"
        f"  - {{topic: {prefix}_special_out, pool: Mirror}}\n"
        "transforms:\n"
        f"  - {{type: stateless, in: {prefix}.public.special, out: {prefix}_special_out,\n"
        "     sql: \"in.key AS key, named_struct('special', in.after:id) AS value\"}\n"
        f"  - {{type: mirror, topics: '{prefix}\\.public\\..*', out: 'wh_{prefix}.{{table}}',\n"
        "     pool: Mirror}\n"
    )


def write_spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mirror.yaml"
    path.write_text(text)
    return path


def test_a_mirror_expands_to_the_topics_no_other_rule_reads(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path, spec_text("m")))
    assert [r.type for r in spec.transforms] == ["stateless", "mirror"]
    assert spec.rules_of("Mirror") == spec.transforms  # its pool, before any topic
    topics = dict.fromkeys(
        ["m.public.a", "m.public.special", "m.public.b", "other.x", "m.transaction"], "Shop"
    )
    now = expand_mirrors(spec, topics)
    mirror = now.transforms[1]
    assert mirror.inputs == ("m.public.a", "m.public.b")  # special is the stateless rule's
    assert mirror.mirrored == (("m.public.a", "wh_m.a"), ("m.public.b", "wh_m.b"))
    assert [r.topic for r in now.outputs] == ["m_special_out", "wh_m.a", "wh_m.b"]
    assert expand_mirrors(now, topics) == now  # the same topics: the same spec
    more = {**topics, "m.public.c": "Shop"}
    assert expand_mirrors(now, more).transforms[1].inputs[-1] == "m.public.c"


def test_the_whole_database_example_is_short_and_takes_every_table_but_nopk() -> None:
    path = Path(__file__).parent.parent / "etl_specs" / "whole_database" / "whole.yaml"
    assert len([line for line in path.read_text().splitlines() if not line.startswith("#")]) <= 15
    spec = load_spec(path)
    ingested = {"shop.public.orders": "Shop", "shop.public.order_lines": "Shop"}
    now = expand_mirrors(spec, ingested)
    assert [r.topic for r in now.outputs] == ["warehouse_order_lines", "warehouse_orders"]
    assert [(r.topic, r.pool) for r in now.inputs] == sorted(ingested.items())
    assert not spec.patterns[0].matches("shop.public.nopk")  # no key: left out


def test_two_topics_one_output_topic_is_refused(tmp_path: Path) -> None:
    text = spec_text("m").replace("{table}", "all")
    with pytest.raises(ZyncError, match="name each table's topic with"):
        load_spec(write_spec(tmp_path, text))
    spec = load_spec(write_spec(tmp_path, spec_text("m").replace("{table}", "{prefix}")))
    with pytest.raises(ZyncError, match=r"transforms\[2\] out: topic m.public.b would be mirrored "
                       r"to wh_m.m, which another topic"):  # fmt: skip
        expand_mirrors(spec, {"m.public.a": "Shop", "m.public.b": "Shop"})


@pytest.mark.parametrize(
    ("rule", "error"),
    [
        ("{type: mirror, topics: '(', out: 'w.{table}', pool: M}", r"\[1\] topics: not a regular"),
        ("{type: mirror, topics: 'x', out: 'w.{tabel}', pool: M}", r"\[1\] out: 'w.{tabel}'"),
        ("{type: mirror, topics: 'x', out: 'w.{table}'}", r"\[1\] pool: None: name the staging"),
        ("{type: mirror, topics: 'x', out: 'w.{table}', pool: M, format: xml}", r"\[1\] format"),
        ("{type: mirror, topics: 'x', out: 'w.{table}', pool: M, gate: transaction}",
         r"\[1\] gate: the spec reads no Debezium transaction topic"),
        ("{type: mirror, topics: 'x', out: 'w.{table}', pool: M, in: y}", r"\[1\] in: a mirror"),
    ],
)  # fmt: skip
def test_bad_mirror_rules_say_which_field(tmp_path: Path, rule: str, error: str) -> None:
    text = "inputs:\n  - {topics: 'x', pool: R}\ntransforms:\n  - " + rule + "\n"
    with pytest.raises(ZyncError, match=error):
        load_spec(write_spec(tmp_path, text))


def rows(start: int, n: int) -> list:
    return [({"id": i}, {"op": "c", "after": {"id": i, "name": f"n{i}"}}) for i in range(start, n)]


@pytest.mark.integration
def test_a_mirror_sends_each_tables_rows_to_its_own_topic_new_tables_included(
    spark, stack: Stack, tmp_path: Path, lake: Path
) -> None:
    prefix = f"mr{uuid.uuid4().hex[:6]}"
    topic = {t: f"{prefix}.public.{t}" for t in ("a", "b", "c", "special")}
    produce_json(stack, topic["a"], [*rows(0, 2), ({"id": 0}, {"op": "d", "before": {"id": 0}})])
    produce_json(stack, topic["b"], rows(5, 6))
    produce_json(stack, topic["special"], rows(9, 10))
    config = dataclasses.replace(ZyncConfig.from_env(), discovery_interval_s=1)
    stages = ("ingest", "etl", "to-kafka")
    with in_force(config):
        pipe = Pipeline(spark, [load_spec(write_spec(tmp_path, spec_text(prefix)))], stack.kafka,
                        Registry(stack.registry_settings), stages=stages)  # fmt: skip
        first = pipe.pass_once(Unheard())
        assert not first.failures
        produce_json(stack, topic["c"], rows(7, 8))  # a table created mid-run
        time.sleep(1.2)
        pipe.pass_once(Unheard())
        # b truncated (its one row gone), then a row of it again, in one pass; updates
        # of a's row 1 and c's row 7 that leave their TOASTed name out (two topics'
        # history read at once; each row keeps its own fields).
        produce_json(stack, topic["b"], [(None, {"op": "t"}), *rows(6, 7)])
        toasted = {"id": 1, "name": "__debezium_unavailable_value", "n": 2}
        produce_json(stack, topic["a"], [({"id": 1}, {"op": "u", "after": toasted})])
        toasted_c = {"id": 7, "name": "__debezium_unavailable_value", "m": 3}
        produce_json(stack, topic["c"], [({"id": 7}, {"op": "u", "after": toasted_c})])
        pipe.pass_once(Unheard())

    def received(name: str) -> list:
        return [(r.key, r.value) for r in read_topic(stack, name)]

    assert received(f"wh_{prefix}.a") == [
        ({"id": 0}, {"id": 0, "name": "n0"}), ({"id": 1}, {"id": 1, "name": "n1"}),
        ({"id": 0}, None),  # the delete: a tombstone
        ({"id": 1}, {"id": 1, "name": "n1", "n": 2}),  # the name it left out: kept
    ]  # fmt: skip
    assert received(f"wh_{prefix}.b") == [
        ({"id": 5}, {"id": 5, "name": "n5"}), ({"id": 5}, None), ({"id": 6}, {"id": 6, "name": "n6"}),
    ]  # fmt: skip
    assert received(f"wh_{prefix}.c") == [
        ({"id": 7}, {"id": 7, "name": "n7"}), ({"id": 7}, {"id": 7, "name": "n7", "m": 3}),
    ]  # fmt: skip
    assert received(f"{prefix}_special_out") == [({"id": 9}, {"special": 9})]
    from zync_assets.kafka.clients import topic_names

    assert f"wh_{prefix}.special" not in topic_names(stack.kafka)


def test_only_a_mirror_that_forwards_rows_as_they_are_takes_its_sources_types(
    tmp_path: Path,
) -> None:
    topics = dict.fromkeys(["m.public.a", "m.public.special"], "Shop")
    now = expand_mirrors(load_spec(write_spec(tmp_path, spec_text("m"))), topics)
    assert mirror_sources(now) == {"wh_m.a": "m.public.a"}
    mirror_line = "     pool: Mirror}\n"  # the mirror rule's last line
    own_sql = spec_text("m").replace(
        mirror_line, "     pool: Mirror, sql: 'in.key AS key, in.after AS value, 1 AS x'}\n"
    )
    assert "sql:" in own_sql.splitlines()[-1]
    assert mirror_sources(expand_mirrors(load_spec(write_spec(tmp_path, own_sql)), topics)) == {}
    as_json = spec_text("m").replace(mirror_line, "     pool: Mirror, format: json}\n")
    assert mirror_sources(expand_mirrors(load_spec(write_spec(tmp_path, as_json)), topics)) == {}


def envelope(row_fields: list[Any]) -> dict:
    row = {"type": "record", "name": "Value", "namespace": "src.public.t",
           "connect.name": "src.public.t.Value", "fields": row_fields}  # fmt: skip
    return {
        "type": "record", "name": "Envelope", "namespace": "src.public.t",
        "fields": [
            {"name": "before", "type": ["null", row], "default": None},
            {"name": "after", "type": ["null", "Value"], "default": None},
            {"name": "op", "type": "string"},
        ],
    }  # fmt: skip


def test_a_mirrors_output_schemas_are_its_sources_row_records(stack: Stack) -> None:
    registry = Registry(stack.registry_settings)
    source, out = f"src{uuid.uuid4().hex[:6]}.public.t", f"out_{uuid.uuid4().hex[:6]}"
    doc = {"type": "string", "connect.version": 1, "connect.name": "io.debezium.data.Json"}
    small = {"type": "int", "connect.type": "int16"}
    first = [{"name": "id", "type": small}, {"name": "doc", "type": ["null", doc], "default": None}]
    added = [*first, {"name": "tag", "type": ["null", "string"], "default": None}]
    registry.register(f"{source}-value", envelope(first))
    registry.register(f"{source}-value", envelope(added))  # ADD COLUMN tag
    key = {"type": "record", "name": "Key", "namespace": "src.public.t",
           "fields": [{"name": "id", "type": small}]}  # fmt: skip
    registry.register(f"{source}-key", key)

    declared = declared_schemas(registry, out, source)

    assert declared is not None
    assert list(declared.values) == ["doc,id", "doc,id,tag"]  # one per version, oldest first
    for shape, fields in (("doc,id", first), ("doc,id,tag", added)):
        schema_id, text = declared.values[shape]
        record = json.loads(text)
        assert record["fields"] == fields  # the source's own types, connect.name and all
        assert record["name"] == shapes.shape_record_name(shape)
        assert record["namespace"] == shapes.namespace_of(out) and "connect.name" not in record
        subject = f"{out}-{shapes.namespace_of(out)}.{record['name']}"
        assert registry.latest(subject).schema_id == schema_id == declared.subjects[subject]
    key_id, key_text = declared.key or [None, ""]
    assert json.loads(key_text)["fields"] == key["fields"]
    assert registry.latest(shapes.key_subject(out)).schema_id == key_id
    assert declared.covering("id") == declared.values["doc,id,tag"]  # the newest that has it
    assert declared.covering("id,other") is None
    assert declared_schemas(registry, out, "nothing.registered") is None
