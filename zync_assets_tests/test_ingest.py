"""Raw ingestion against the real broker, registry and Spark/Delta."""

from __future__ import annotations

from pathlib import Path

import pytest

from zync_assets.codec.wire import frame
from zync_assets.core.errors import ZyncError
from zync_assets.ingest.dead_letters import dead_letters_added
from zync_assets.ingest.ingest import ingest
from zync_assets.ingest.shaper import Shaper
from zync_assets.kafka.offsets import watermarks
from zync_assets.kafka.registry import Registry
from zync_assets.lake.pools import dead_letter_path, pool_path
from zync_assets.lake.progress import read_progress
from zync_assets_tests.conftest import Stack, produce_bytes, produce_json

pytestmark = pytest.mark.integration


def run(spark, stack: Stack, pool: str, topics: list[str], **kwargs):
    return ingest(spark, pool, topics, stack.kafka, Registry(stack.registry_settings), **kwargs)


def raw_rows(spark, pool: str, *columns: str) -> list[tuple]:
    frame = spark.read.format("delta").load(pool_path(pool))
    names = [f"c{i}" for i in range(len(columns))]
    selected = frame.selectExpr(*(f"{c} AS {n}" for c, n in zip(columns, names, strict=True)))
    return [tuple(r) for r in selected.orderBy(*names).collect()]


def offsets(spark, pool: str) -> list[tuple]:
    return raw_rows(spark, pool, "kafka.topic", "kafka.partition", "kafka.offset")


def test_ingest_resumes_where_it_stopped_and_reruns_write_nothing(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    produce_json(stack, topic, [({"id": i}, {"n": i}) for i in range(3)])
    first = run(spark, stack, "Raw", [topic])
    assert (first.run, first.rows, first.dead_letters) == (1, 3, 0)
    assert run(spark, stack, "Raw", [topic]).run is None  # nothing new: no commit

    produce_json(stack, topic, [({"id": i}, {"n": i}) for i in range(3, 5)])
    second = run(spark, stack, "Raw", [topic])
    assert (second.run, second.rows, second.progress) == (2, 2, {topic: {0: 5}})
    assert offsets(spark, "Raw") == [(topic, 0, o) for o in range(5)]
    values = raw_rows(spark, "Raw", "variant_get(value, '$.n', 'int')", "cast(key:id as int)")
    assert values == [(i, i) for i in range(5)]


def test_a_first_commit_cut_short_by_kill_9_is_simply_redone(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    # kill -9 during the very first commit leaves `_delta_log/` with no version in it.
    (Path(pool_path("Cut")) / "_delta_log").mkdir(parents=True)
    produce_json(stack, topic, [(None, {"n": i}) for i in range(3)])
    assert run(spark, stack, "Cut", [topic]).run == 1
    assert offsets(spark, "Cut") == [(topic, 0, o) for o in range(3)]


def test_several_topics_and_partitions_land_exactly_once(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    other = f"{topic}_b"
    produce_json(stack, topic, [({"id": i}, {"n": i}) for i in range(30)], partitions=3)
    produce_json(stack, other, [(None, {"s": "x"}), (None, None)])
    result = run(spark, stack, "Multi", [topic, other])
    marks = watermarks(stack.kafka, [topic, other])
    expected = sorted(
        (t, p.partition, o) for t, ps in marks.items() for p in ps for o in range(p.high)
    )
    assert offsets(spark, "Multi") == expected
    assert len({p.partition for p in marks[topic] if p.high}) > 1  # keys really spread
    assert result.rows == 32


def test_explicit_end_offsets_bound_the_run(spark, stack: Stack, topic: str, lake: Path) -> None:
    produce_json(stack, topic, [(None, {"n": i}) for i in range(6)])
    result = run(spark, stack, "Bounded", [topic], end_offsets={topic: {0: 4}})
    assert result.progress == {topic: {0: 4}}
    assert offsets(spark, "Bounded") == [(topic, 0, o) for o in range(4)]
    with pytest.raises(ZyncError, match="beyond the partition's end"):
        run(spark, stack, "Bounded", [topic], end_offsets={topic: {0: 99}})


def test_a_schema_that_evolves_mid_topic_keeps_each_records_shape(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    v1 = {"type": "record", "name": "Row", "fields": [
        {"name": "id", "type": "long"}, {"name": "old", "type": "string"}]}  # fmt: skip
    v2 = {"type": "record", "name": "Row", "fields": [
        {"name": "id", "type": "long"},
        {"name": "new", "type": ["null", "string"], "default": None}]}  # fmt: skip
    produce_json(stack, topic, [(None, {"id": 1, "old": "a"})], value_schema=v1)
    produce_json(stack, topic, [(None, {"id": 2, "new": None}), (None, {"id": 3, "new": "c"})], value_schema=v2)  # fmt: skip
    run(spark, stack, "Evolve", [topic])
    rows = raw_rows(
        spark, "Evolve",
        "cast(value:id as int)",
        "variant_get(value, '$.old', 'string')",
        "variant_get(value, '$.new') IS NULL",  # missing field
        "is_variant_null(variant_get(value, '$.new'))",  # field present, value null
    )  # fmt: skip
    assert rows == [(1, "a", True, False), (2, None, False, True), (3, None, False, False)]


def test_each_dead_letter_reason_keeps_the_bytes_and_the_good_messages(
    spark, stack: Stack, topic: str, lake: Path, registry: Registry
) -> None:
    produce_json(stack, topic, [(None, {"n": 1})])  # offset 0, registers the schema
    schema_id = registry.client.get_latest_version(f"{topic}-value").schema_id
    assert schema_id is not None
    bad: list[tuple[bytes | None, bytes | None]] = [
        (None, b"plain text"),  # 1: not framed
        (None, frame(987654, b"\x02")),  # 2: unknown schema id
        (None, frame(schema_id, b"\xff\xff\xff")),  # 3: corrupt payload
        (b"\x07", frame(schema_id, b"\x02")),  # 4: key not framed
    ]
    produce_bytes(stack, topic, bad)
    produce_json(stack, topic, [(None, {"n": 5})])  # offset 5
    result = run(spark, stack, "Dlq", [topic])
    assert (result.rows, result.dead_letters) == (2, 4)
    # Every message is a row of the pool; the undecodable ones are flagged, with no value.
    flagged = raw_rows(spark, "Dlq", "kafka.offset", "dead_letter IS NOT NULL", "value IS NULL")
    assert flagged == [
        (0, False, False),
        *((o, True, True) for o in range(1, 5)),
        (5, False, False),
    ]
    dead = spark.read.format("delta").load(dead_letter_path("Dlq")).orderBy("offset").collect()
    assert [d.offset for d in dead] == [1, 2, 3, 4]
    assert [d.reason.split(":")[0] for d in dead] == [
        "value not-confluent-avro",
        "value unknown-schema-id",
        "value corrupt-payload",
        "key not-confluent-avro",
    ]
    assert [bytes(d.value) for d in dead] == [m[1] for m in bad]
    assert bytes(dead[3].key) == b"\x07"
    assert run(spark, stack, "Dlq", [topic]).run is None


def test_a_dead_letter_after_clean_passes_is_copied_and_clean_passes_copy_nothing(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    """A pass in step with the copy learns from its commit's file statistics whether
    it wrote dead letters; they must still reach `<pool>_dlq`, once."""
    produce_json(stack, topic, [(None, {"n": 1})])
    first = run(spark, stack, "DlqSteps", [topic])
    assert (first.rows, first.dead_letters) == (1, 0)
    assert dead_letters_added("DlqSteps", committed_version("DlqSteps")) == 0
    produce_bytes(stack, topic, [(None, b"not avro")])
    second = run(spark, stack, "DlqSteps", [topic])
    assert (second.rows, second.dead_letters) == (0, 1)
    assert dead_letters_added("DlqSteps", committed_version("DlqSteps")) == 1
    produce_json(stack, topic, [(None, {"n": 3})])
    assert run(spark, stack, "DlqSteps", [topic]).dead_letters == 0
    dead = spark.read.format("delta").load(dead_letter_path("DlqSteps")).collect()
    assert [(d.offset, bytes(d.value)) for d in dead] == [(1, b"not avro")]


def test_a_shaper_reshapes_key_and_value(
    spark, stack: Stack, topic: str, lake: Path, tmp_path: Path
) -> None:
    produce_json(stack, topic, [({"id": 1}, {"op": "c", "after": {"id": 1, "x": "a"}})])
    shaper_file = tmp_path / "after.sql"
    shaper_file.write_text("-- keep only the row image\nvalue:after AS value\n")
    run(spark, stack, "Shaped", [topic], shaper=Shaper.from_file(str(shaper_file)))
    assert raw_rows(spark, "Shaped", "cast(value as string)", "cast(key as string)") == [
        ('{"id":1,"x":"a"}', '{"id":1}')
    ]


@pytest.mark.parametrize(
    ("select_list", "message"),
    [
        ("key, value, named_struct('topic', 'x') AS kafka", "changes `kafka`"),
        ("*", "changes `kafka`"),
        ("value AS payload", "must yield `key` and/or `value`"),
        ("explode(array(value)) AS value", "changes the number of rows"),
        ("value FROM nowhere WHERE", "not valid Spark SQL"),
    ],
)
def test_bad_shapers_are_refused_before_anything_is_written(
    spark, stack: Stack, topic: str, lake: Path, tmp_path: Path, select_list: str, message: str
) -> None:
    produce_json(stack, topic, [(None, {"n": 1})])
    shaper_file = tmp_path / "bad.sql"
    shaper_file.write_text(select_list)
    with pytest.raises(ZyncError, match=message):
        run(spark, stack, "Refused", [topic], shaper=Shaper.from_file(str(shaper_file)))
    assert not (lake / "Refused").exists() or offsets(spark, "Refused") == []


def test_invalid_pool_names_are_refused(spark, stack: Stack, topic: str, lake: Path) -> None:
    with pytest.raises(ZyncError, match=r"invalid pool name '\.\./escape'"):
        run(spark, stack, "../escape", [topic])


def committed_version(pool: str) -> int:
    """The pool's version its progress records (it has committed one)."""
    version = read_progress(pool_path(pool)).version
    assert version is not None, f"pool {pool} has no commit"
    return version
