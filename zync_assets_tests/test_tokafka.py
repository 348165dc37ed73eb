"""to-kafka against the real broker, registry and Spark/Delta: exactly once, refusals, shapes."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path

import pytest

from zync_assets.core.errors import ZyncError
from zync_assets.kafka.clients import cluster_metadata
from zync_assets.kafka.registry import Registry
from zync_assets.lake.pools import pool_path
from zync_assets.tokafka import encode, many_topics
from zync_assets.tokafka import sync as sync_module
from zync_assets.tokafka.jvm_sender import JvmSender
from zync_assets.tokafka.librdkafka_sender import LibrdkafkaSender
from zync_assets.tokafka.position import OFFSET_HEADER, POOL_HEADER
from zync_assets.tokafka.sender import Sender
from zync_assets.tokafka.sync import sync_pool, sync_topic
from zync_assets_tests.conftest import Stack, produce_bytes, read_topic, rebuild_table, run_zync

pytestmark = pytest.mark.integration


def write_staging(spark, pool: str, topic: str, rows: Sequence[tuple[int, object, object]]) -> None:
    """Append output records (offset, key, value; JSON-able, None = SQL NULL) to a staging
    pool, in the layout `zync etl` writes."""
    data = [(o, json.dumps(k) if k is not None else None, json.dumps(v) if v is not None else None)
            for o, k, v in rows]  # fmt: skip
    frame = spark.createDataFrame(data, "o long, k string, v string").selectExpr(
        "'output' AS kind",
        f"named_struct('topic', '{topic}', 'partition', 0, 'offset', o, "
        "'timestamp', current_timestamp()) AS kafka",
        "parse_json(k) AS key",
        "parse_json(v) AS value",
    )
    frame.write.format("delta").mode("append").partitionBy("kind").save(pool_path(pool))


def sync(spark, stack: Stack, pool: str, topic: str, **kwargs):
    return sync_topic(spark, pool, topic, stack.kafka, Registry(stack.registry_settings), **kwargs)


def key_ids(records) -> list[int]:
    return [r.key["id"] for r in records]


def tagged(records) -> dict[int, int]:
    """{index: zync.offset} of the records that carry the headers (in these tests a record's
    key id is its staging offset, so the two must agree)."""
    found = {i: int(r.headers[OFFSET_HEADER]) for i, r in enumerate(records) if r.headers}
    assert all(records[i].key["id"] == offset for i, offset in found.items()), found
    assert {records[i].headers[POOL_HEADER] for i in found} <= {b"S"}
    return found


@pytest.fixture(params=["jvm", "librdkafka"])
def sender(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both senders: in Spark's driver JVM (classic sessions) and through librdkafka (the
    one Spark Connect sessions use, having no driver JVM at hand)."""
    if request.param == "librdkafka":
        monkeypatch.setattr(
            sync_module, "open_sender", lambda _spark, *args: LibrdkafkaSender(*args)
        )
    return request.param


def test_sends_from_where_the_topic_stands_and_never_twice(
    spark, stack: Stack, topic: str, lake: Path, sender: str
) -> None:
    write_staging(spark, "S", topic, [(i, {"id": i}, {"id": i, "n": i * 10}) for i in range(5)])
    first = sync(spark, stack, "S", topic)
    assert (first.sent, first.first_offset, first.next_offset) == (5, 0, 5)
    assert first.high_water_before == {0: 0} and first.high_water_after[0] >= 5
    assert sync(spark, stack, "S", topic).sent == 0  # rerun: nothing twice

    write_staging(spark, "S", topic, [(i, {"id": i}, {"id": i, "n": i * 10}) for i in range(5, 9)])
    second = sync(spark, stack, "S", topic, transaction_size=1)  # four transactions
    assert (second.sent, second.first_offset) == (4, 5)
    records = read_topic(stack, topic)
    assert [(r.key, r.value) for r in records] == [
        ({"id": i}, {"id": i, "n": i * 10}) for i in range(9)
    ]
    # Where the next run resumes: the last record of each transaction carries the headers.
    assert tagged(records) == {4: 4, 5: 5, 6: 6, 7: 7, 8: 8}


def test_a_sync_over_the_fetch_budget_goes_in_windows(
    spark, stack: Stack, topic: str, lake: Path, monkeypatch: pytest.MonkeyPatch, sender: str
) -> None:
    monkeypatch.setattr(sync_module, "FETCH_BYTES", 64)  # about one record per Spark job
    rows = [(i, {"id": i}, {"id": i, "s": f"record {i}"}) for i in range(7)]
    write_staging(spark, "S", topic, rows)
    result = sync(spark, stack, "S", topic, transaction_size=2)
    assert (result.sent, result.next_offset) == (7, 7)
    records = read_topic(stack, topic)
    assert max(tagged(records)) == 6
    assert [(r.key, r.value) for r in records] == [(k, v) for _o, k, v in rows]


def test_shapes_get_one_schema_each_and_partial_updates_stay_partial(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    write_staging(spark, "S", topic, [
        (0, {"ID": 1}, {"ID": 1, "name": "a", "price": 1.5, "status": None}),
        (1, {"ID": 1}, {"ID": 1, "status": "paid"}),
        (2, {"ID": 2}, {"ID": 2, "name": "b", "price": 12.345, "status": "new"}),
        (3, {"ID": 2}, None),  # a delete: a tombstone for the sink
        (4, {"ID": 3}, {"ID": 3, "name": "c", "price": 7, "status": "new"}),
    ])  # fmt: skip
    result = sync(spark, stack, "S", topic)
    assert sorted(result.subjects) == sorted([
        f"{topic}-key",
        f"{topic}-zync.{topic}.Value_" + _hash("ID,name,price,status"),
        f"{topic}-zync.{topic}.Value_" + _hash("ID,status"),
    ])  # fmt: skip
    records = read_topic(stack, topic)
    assert records[1].value == {"ID": 1, "status": "paid"}  # no name/price columns to overwrite
    assert records[3].value is None  # tombstone
    # one decimal type for the shape, wide enough for every value (scale 3)
    assert records[0].value["price"] == Decimal("1.500")
    assert records[4].value["price"] == Decimal("7.000")
    assert rebuild_table(records, "ID") == {
        1: {"ID": 1, "name": "a", "price": Decimal("1.500"), "status": "paid"},
        3: {"ID": 3, "name": "c", "price": Decimal("7.000"), "status": "new"},
    }
    # a later run with narrower values keeps the registered (wider) type
    write_staging(
        spark, "S", topic, [(5, {"ID": 4}, {"ID": 4, "name": "d", "price": 2.5, "status": None})]
    )
    again = sync(spark, stack, "S", topic)
    assert again.subjects == {k: v for k, v in result.subjects.items() if k in again.subjects}
    assert read_topic(stack, topic)[5].value["price"] == Decimal("2.500")


def test_every_sink_type_is_written_from_the_variant_exactly(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    """zync's JVM writer (variant bytes → Avro) against a plain AvroDeserializer."""
    at_micros = 1_795_341_600_123_456
    spark.sql(f"""
        SELECT 'output' AS kind,
          named_struct('topic', '{topic}', 'partition', 0, 'offset', 0L,
                       'timestamp', current_timestamp()) AS kafka,
          to_variant_object(named_struct('id', 7)) AS key,
          to_variant_object(named_struct(
            'flag', true, 'n', 9007199254740993L, 'x', CAST(2.5 AS DOUBLE),
            'f', CAST(0.25 AS FLOAT), 'amount', CAST(-12.30 AS DECIMAL(12,2)),
            'day', DATE'2026-11-22', 'at', timestamp_micros({at_micros}),
            'local', TIMESTAMP_NTZ'2026-11-22 10:00:00', 'raw', X'00FF', 'text', 'zürich',
            'none', CAST(NULL AS STRING),
            'nested', named_struct('a', 1, 'b', array(1, NULL, 3), 'e', CAST(array() AS ARRAY<INT>)))) AS value
    """).write.format("delta").mode("append").partitionBy("kind").save(pool_path("Types"))
    assert sync(spark, stack, "Types", topic).sent == 1
    (record,) = read_topic(stack, topic)
    assert record.key == {"id": 7}
    assert record.value == {
        "flag": True,
        "n": 9007199254740993,
        "x": 2.5,
        "f": 0.25,
        "amount": Decimal("-12.30"),  # the stored scale, not a rounded or stripped one
        "day": dt.date(2026, 11, 22),
        "at": "2026-11-22T10:00:00.123456Z",  # Debezium's ZonedTimestamp, for a JDBC sink
        "local": dt.datetime(2026, 11, 22, 10, 0),
        "raw": b"\x00\xff",
        "text": "zürich",
        "none": None,
        "nested": {"a": 1, "b": [1, None, 3], "e": []},
    }


def test_later_runs_reuse_registered_schemas_and_survey_only_a_new_shape(
    spark, stack: Stack, topic: str, lake: Path, monkeypatch: pytest.MonkeyPatch, sender: str
) -> None:
    write_staging(spark, "S", topic, [(i, {"id": i}, {"id": i, "n": i}) for i in range(3)])
    first = sync(spark, stack, "S", topic)
    surveys: list[int] = []
    real_survey = sync_module.survey

    def survey(outputs, start):  # the real one's arguments
        surveys.append(start)
        return real_survey(outputs, start)

    monkeypatch.setattr(sync_module, "survey", survey)
    write_staging(spark, "S", topic, [(i, {"id": i}, {"id": i, "n": i}) for i in range(3, 5)])
    second = sync(spark, stack, "S", topic)
    assert (second.sent, surveys) == (2, [])  # the registered schemas fit: no survey
    assert second.subjects == first.subjects
    write_staging(spark, "S", topic, [
        (5, {"id": 5}, {"id": 5, "n": 5}),
        (6, {"id": 6}, {"id": 6, "n": 6.25}),  # a wider type: n becomes double
        (7, {"id": 7}, {"id": 7, "tag": "new"}),  # a new shape
    ])  # fmt: skip
    third = sync(spark, stack, "S", topic, transaction_size=1)
    # The JVM sender's first job encodes all three: 6 is refused there, before anything is
    # sent, so all are surveyed. The librdkafka sender fetches a transaction at a time: 5
    # goes out with the schemas that fit it, then the rest is surveyed.
    resurveyed_from = 5 if sender == "jvm" else 6
    assert (third.sent, third.first_offset, surveys) == (3, 5, [resurveyed_from])
    records = read_topic(stack, topic)
    assert key_ids(records) == list(range(8))
    assert [r.value for r in records[5:]] == [
        {"id": 5, "n": 5},
        {"id": 6, "n": 6.25},
        {"id": 7, "tag": "new"},
    ]


def test_a_first_run_registers_from_a_sample_and_widens_for_what_it_missed(
    spark, stack: Stack, topic: str, lake: Path, monkeypatch: pytest.MonkeyPatch, sender: str
) -> None:
    monkeypatch.setattr(encode, "SAMPLE_SIZE", 1)  # a first run types its first record
    surveys: list[tuple[int, int | None]] = []
    real_survey = sync_module.survey

    def counted(outputs, start, typed=None):
        surveys.append((start, typed))
        return real_survey(outputs, start, typed)

    monkeypatch.setattr(sync_module, "survey", counted)
    write_staging(spark, "S", topic, [
        (0, {"id": 0}, {"id": 0, "n": 1}),
        (1, {"id": 1}, {"id": 1, "n": 2.5}),  # a wider type than the sample's
        (2, {"id": 2}, {"id": 2, "tag": "x"}),  # a shape the sample missed
        (3, {"id": 3}, {"id": 3, "n": 4}),
    ])  # fmt: skip
    result = sync(spark, stack, "S", topic, transaction_size=1)
    assert result.sent == 4
    records = read_topic(stack, topic)
    assert key_ids(records) == [0, 1, 2, 3]
    assert [r.value for r in records] == [
        {"id": 0, "n": 1}, {"id": 1, "n": 2.5}, {"id": 2, "tag": "x"}, {"id": 3, "n": 4.0},
    ]  # fmt: skip
    # 1 does not fit the sample's schemas: the JVM sender's one job refuses it before
    # anything is sent; the librdkafka sender has sent 0 by then. The rest is surveyed.
    assert surveys == [(0, 1), (0 if sender == "jvm" else 1, None)]
    client = Registry(stack.registry_settings).client
    (n_subject,) = [s for s in result.subjects if s.endswith(_hash("id,n"))]
    assert len(client.get_versions(n_subject)) == 2  # the first record's, then n as double


def test_a_key_the_first_runs_sample_did_not_see_is_sent(
    spark, stack: Stack, topic: str, lake: Path, monkeypatch: pytest.MonkeyPatch, sender: str
) -> None:
    monkeypatch.setattr(encode, "SAMPLE_SIZE", 1)  # the sample: one record, with no key
    write_staging(spark, "S", topic, [(0, None, {"n": 1}), (1, {"id": 1}, {"n": 2})])
    assert sync(spark, stack, "S", topic).sent == 2
    records = read_topic(stack, topic)
    assert [(r.key, r.value) for r in records] == [(None, {"n": 1}), ({"id": 1}, {"n": 2})]


SENDERS: dict[str, Callable[..., Sender]] = {
    "jvm": lambda spark, kafka, pool, topic: JvmSender(spark, kafka, pool, topic),
    "librdkafka": lambda spark, kafka, pool, topic: LibrdkafkaSender(kafka, pool, topic),
}


def open_on_new_topic(spark, stack: Stack, topic: str, kind: str) -> Sender:
    from zync_assets.kafka.clients import ensure_topic

    ensure_topic(stack.kafka, topic)
    return SENDERS[kind](spark, stack.kafka, "S", topic)


def outputs_and_codec(spark, stack: Stack, topic: str, rows: Sequence[tuple[int, object, object]]):
    """What a sender is handed: output records (offset, key, value VARIANTs, as
    `encode.outputs_from` selects them) and an encoding that fits them all."""
    data = [(o, json.dumps(k) if k is not None else None, json.dumps(v) if v is not None else None)
            for o, k, v in rows]  # fmt: skip
    outputs = spark.createDataFrame(data, "offset long, k string, v string").selectExpr(
        "offset", "parse_json(k) AS key", "parse_json(v) AS value"
    )
    _, types = encode.survey(outputs, min(o for o, _k, _v in rows))
    return outputs, encode.encoding(types, topic, Registry(stack.registry_settings))


@pytest.mark.parametrize("kind", SENDERS)
def test_a_sender_that_was_taken_over_says_so_and_commits_nothing(
    spark, stack: Stack, topic: str, lake: Path, kind: str
) -> None:
    write_staging(spark, "S", topic, [(0, None, {"n": 1})])
    sync(spark, stack, "S", topic)  # creates the topic
    old = SENDERS[kind](spark, stack.kafka, "S", topic)
    new = SENDERS[kind](spark, stack.kafka, "S", topic)  # fences the old one
    outputs, codec = outputs_and_codec(spark, stack, topic, [(1, None, {"n": 2})])
    fetched = old.fetch(outputs, codec, 1, 2)
    with pytest.raises(ZyncError, match="took over \\(this producer was fenced\\)"):
        old.send(fetched, 0, 1)
    old.close()
    new.close()
    assert [r.value for r in read_topic(stack, topic)] == [{"n": 1}]  # none of the fenced


@pytest.mark.parametrize("kind", SENDERS)
def test_a_sender_refuses_a_fetch_whose_offsets_are_not_the_range(
    spark, stack: Stack, topic: str, kind: str
) -> None:
    sender = open_on_new_topic(spark, stack, topic, kind)
    gap = [(5, None, {"s": "a"}), (7, None, {"s": "c"})]
    twice = [(5, None, {"s": "a"}), (5, None, {"s": "a"}), (6, None, {"s": "b"})]
    for rows, high in ((gap, 8), (twice, 7)):
        outputs, codec = outputs_and_codec(spark, stack, topic, rows)
        with pytest.raises(
            ZyncError, match=rf"staging offsets 5\.\.{high - 1} changed while sending"
        ):
            sender.fetch(outputs, codec, 5, high)
    sender.close()


@pytest.mark.parametrize("kind", SENDERS)
def test_a_first_fetch_spans_the_offsets_and_brings_what_fits(
    spark, stack: Stack, topic: str, kind: str
) -> None:
    sender = open_on_new_topic(spark, stack, topic, kind)
    rows = [(o, {"id": o}, {"s": "x" * 100}) for o in range(3, 9)]  # 2 (before start) .. 8
    outputs, codec = outputs_and_codec(spark, stack, topic, [(2, {"id": 2}, {"s": ""}), *rows])
    roomy = sender.first_fetch(outputs, codec, 3, 1 << 20)
    assert roomy.span == encode.Span(count=6, low=3, high=8, has_previous=True)
    if kind == "jvm":  # one job: the records come with the span
        assert roomy.records is not None and roomy.records.count == 6
    else:  # the librdkafka sender always fetches them in windows
        assert roomy.records is None
    tight = sender.first_fetch(outputs, codec, 3, 200)  # room for one record
    assert tight.span == roomy.span and tight.records is None
    if kind == "jvm":  # how big the ones it did encode were, to size the windows
        assert tight.bytes_per_record > 100
    gap = outputs.where("offset != 5")
    holed = sender.first_fetch(gap, codec, 3, 1 << 20)
    assert (holed.span.count, holed.records) == (5, None)  # the caller refuses the gap
    sender.close()


@pytest.mark.parametrize("kind", SENDERS)
def test_a_record_the_broker_refuses_rolls_its_transaction_back(
    spark, stack: Stack, topic: str, kind: str
) -> None:
    sender = open_on_new_topic(spark, stack, topic, kind)
    too_big = "x" * (2 << 20)  # over the producer's and the broker's 1 MiB record limit
    rows = [(0, None, {"s": "small"}), (1, None, {"s": too_big})]
    outputs, codec = outputs_and_codec(spark, stack, topic, rows)
    fetched = sender.fetch(outputs, codec, 0, 2)
    with pytest.raises(
        ZyncError, match=f"sending to topic '{topic}' failed and the batch was rolled"
    ):
        sender.send(fetched, 0, 2)
    sender.close()
    assert read_topic(stack, topic, decode=False) == []  # not even the small one


@pytest.mark.parametrize("kind", SENDERS)
def test_a_transaction_across_two_topics_commits_both_parts_or_neither(
    spark, stack: Stack, topic: str, kind: str
) -> None:
    """A pool's sender (transactional id per pool) sends parts to several topics in one
    Kafka transaction: a part the broker refuses rolls back the other topic's too."""
    from zync_assets.kafka.clients import ensure_topic
    from zync_assets.tokafka.sender import Part

    small, big = f"{topic}_a", f"{topic}_b"
    for name in (small, big):
        ensure_topic(stack.kafka, name)
    sender = SENDERS[kind](spark, stack.kafka, "S", None)
    fits, fits_codec = outputs_and_codec(spark, stack, small, [(0, None, {"s": "small"})])
    too_big = [(0, None, {"s": "x" * (2 << 20)})]
    refused, refused_codec = outputs_and_codec(spark, stack, big, too_big)
    parts = [
        Part(small, sender.fetch(fits, fits_codec, 0, 1), 0, 1),
        Part(big, sender.fetch(refused, refused_codec, 0, 1), 0, 1),
    ]
    with pytest.raises(ZyncError, match="sending to the topics of staging pool S failed"):
        sender.send_parts(parts)
    # Aborted, not left open (an open transaction would hold the consumer back): the
    # small part is not there, and the same producer goes on.
    assert read_topic(stack, small, decode=False) == []
    sender.send_parts(parts[:1])
    sender.close()
    [sent] = read_topic(stack, small, decode=False)
    assert sent.headers["zync.pool"] == b"S" and sent.headers["zync.offset"] == b"0"


@pytest.mark.parametrize("kind", SENDERS)
def test_a_sender_without_a_broker_says_where_it_looked(spark, topic: str, kind: str) -> None:
    from zync_assets.core.settings import KafkaSettings

    with pytest.raises(
        ZyncError, match=r"cannot start a Kafka transaction for topic .* at 127\.0\.0\.1:9 "
    ):
        SENDERS[kind](spark, KafkaSettings("127.0.0.1:9"), "S", topic)


def test_a_jar_built_from_older_sources_points_at_the_installer(spark) -> None:
    from zync_assets.tokafka.jvm_sender import FETCH_CLASS, SENDER_CLASS, java_class

    assert java_class(spark._jvm, SENDER_CLASS) is not None
    assert java_class(spark._jvm, FETCH_CLASS).Result is not None
    with pytest.raises(ZyncError, match=r"have no zync\.spark\.Nope: .*jvm/build\.sh"):
        java_class(spark._jvm, "zync.spark.Nope")


def _hash(names: str) -> str:
    import hashlib

    return hashlib.sha1(names.encode()).hexdigest()[:8]


def test_several_topics_of_one_pool(spark, stack: Stack, topic: str, lake: Path) -> None:
    other = f"{topic}_b"
    write_staging(spark, "Multi", topic, [(i, {"id": i}, {"a": i}) for i in range(3)])
    write_staging(spark, "Multi", other, [(i, {"id": i}, {"b": str(i)}) for i in range(2)])
    results = sync_pool(spark, "Multi", stack.kafka, Registry(stack.registry_settings))
    assert {(r.topic, r.sent) for r in results} == {(topic, 3), (other, 2)}
    assert [r.value for r in read_topic(stack, other)] == [{"b": "0"}, {"b": "1"}]


def test_partitions_spread_keys_and_keep_each_partition_contiguous(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    rows = [(i, {"id": i % 7}, {"id": i % 7, "n": i}) for i in range(60)]
    write_staging(spark, "P", topic, rows[:40])
    sync(spark, stack, "P", topic, partitions=3)
    write_staging(spark, "P", topic, rows[40:])
    assert sync(spark, stack, "P", topic).sent == 20
    records = read_topic(stack, topic)
    assert sorted(r.value["n"] for r in records) == list(range(60))  # each exactly once
    by_partition: dict[int, list] = {}
    for r in records:
        by_partition.setdefault(r.partition, []).append(r)
    assert len(by_partition) > 1
    for part in by_partition.values():
        offsets = [r.value["n"] for r in part]
        assert offsets == sorted(offsets)
        # The last record of each partition says where the next run resumes.
        assert int(part[-1].headers[OFFSET_HEADER]) == offsets[-1]
    partition_of_key: dict[object, int] = {}
    for r in records:
        assert partition_of_key.setdefault(r.key["id"], r.partition) == r.partition
    with pytest.raises(ZyncError, match="already has 3 partition"):
        sync(spark, stack, "P", topic, partitions=1)


def test_a_topic_with_foreign_records_is_refused_and_gets_nothing(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    produce_bytes(stack, topic, [(None, b"someone else's record")])
    write_staging(spark, "S", topic, [(0, {"id": 0}, {"n": 0})])
    with pytest.raises(ZyncError, match="was not written by `zync to-kafka`"):
        sync(spark, stack, "S", topic)
    assert len(read_topic(stack, topic, decode=False)) == 1


def test_a_topic_ahead_of_its_pool_is_refused(spark, stack: Stack, topic: str, lake: Path) -> None:
    write_staging(spark, "S", topic, [(i, {"id": i}, {"n": i}) for i in range(4)])
    sync(spark, stack, "S", topic)
    import shutil

    shutil.rmtree(pool_path("S"))  # the pool is rebuilt with less in it
    write_staging(spark, "S", topic, [(i, {"id": i}, {"n": i}) for i in range(2)])
    with pytest.raises(ZyncError, match="beyond what staging pool S has"):
        sync(spark, stack, "S", topic)
    with pytest.raises(ZyncError, match="written from staging pool 'S', not 'Other'"):
        write_staging(spark, "Other", topic, [(i, {"id": i}, {"n": i}) for i in range(9)])
        sync(spark, stack, "Other", topic)


def test_a_gap_in_staging_offsets_is_refused_and_nothing_sent(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    write_staging(spark, "S", topic, [(0, {"id": 0}, {"n": 0}), (1, {"id": 1}, {"n": 1}),
                                      (3, {"id": 3}, {"n": 3})])  # fmt: skip
    with pytest.raises(
        ZyncError, match=r"gap in topic .* needs 0..3 \(4 records\) and staging has 3"
    ):
        sync(spark, stack, "S", topic)
    assert read_topic(stack, topic) == []


def test_values_sinks_cannot_type_are_refused_with_the_field(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    write_staging(spark, "S", topic, [(0, None, {"n": 1}), (1, None, {"n": "one"})])
    with pytest.raises(ZyncError, match="field n holds BIGINT and STRING values; cast it"):
        sync(spark, stack, "S", topic)
    write_staging(spark, "M", topic + "m", [(0, None, {"xs": [1, "one"]})])
    with pytest.raises(ZyncError, match=r"field xs\[\] holds BIGINT and STRING values"):
        sync(spark, stack, "M", topic + "m")
    write_staging(spark, "T", topic + "x", [(0, None, {"bad name": 1})])
    with pytest.raises(ZyncError, match="field bad name is not a valid Avro name"):
        sync(spark, stack, "T", topic + "x")


def test_a_missing_pool_is_refused_before_a_topic_is_made(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    with pytest.raises(ZyncError, match="staging pool Nope does not exist"):
        sync(spark, stack, "Nope", topic)  # e.g. a Dagster run after the pool was dropped
    assert topic not in cluster_metadata(stack.kafka).topics


def test_cli_syncs_and_reports_each_topic(spark, stack: Stack, topic: str, lake: Path) -> None:
    write_staging(spark, "Cli", topic, [(i, {"id": i}, {"n": i}) for i in range(3)])
    env = stack.env(ZYNC_LAKE=str(lake))
    done = run_zync("to-kafka", "--pool", "Cli", env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"pool Cli → {topic}: sent 3 records (staging offsets 0..2)" in done.stdout
    again = run_zync("to-kafka", "--pool", "Cli", "--topic", topic, env=env, timeout=300)
    assert f"pool Cli → {topic}: up to date at staging offset 3" in again.stdout
    missing = run_zync("to-kafka", "--pool", "Nope", env=env, timeout=300)
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines()[-1] == (
        "zync: error: staging pool Nope does not exist; run `zync etl` first"
    )


def test_a_pools_touched_topics_are_read_in_one_job_and_a_new_shape_costs_one_more(
    spark, stack: Stack, topic: str, lake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mirror's steady state: its topics' schemas are registered, and one Spark job reads
    and encodes every touched topic's records (tokafka/many_topics.py). A record no
    registered schema fits makes one more job type every topic's records; each registers
    what they need, and the topics are fetched together again, none alone."""
    topics = [f"{topic}_{n}" for n in range(3)]
    registry = Registry(stack.registry_settings)

    def staged(offsets: range, value: Callable[[int], dict]) -> None:
        for name in topics:
            write_staging(spark, "M", name, [(i, {"id": i}, value(i)) for i in offsets])

    staged(range(3), lambda i: {"id": i, "n": i})
    sync_pool(spark, "M", stack.kafka, registry, topics=topics)  # a first run: registers
    jobs: list[int] = []
    alone: list[str] = []
    real_fetch, real_sync_topic = many_topics.fetch_many, sync_module.sync_topic

    def fetch_many(spark, outputs, codecs, starts, budget):  # the real one's arguments
        jobs.append(len(codecs))
        return real_fetch(spark, outputs, codecs, starts, budget)

    def sync_topic(spark, pool, name, *args, **kwargs):
        alone.append(name)
        return real_sync_topic(spark, pool, name, *args, **kwargs)

    monkeypatch.setattr(many_topics, "fetch_many", fetch_many)
    monkeypatch.setattr(sync_module, "sync_topic", sync_topic)
    staged(range(3, 5), lambda i: {"id": i, "n": i})
    second = sync_pool(spark, "M", stack.kafka, registry, topics=topics)
    assert (jobs, alone) == ([3], [])
    assert [(r.topic, r.sent, r.first_offset, r.next_offset) for r in second] == [
        (name, 2, 3, 5) for name in topics
    ]
    staged(range(5, 6), lambda i: {"id": i, "tag": "new"})  # a shape no schema has
    third = sync_pool(spark, "M", stack.kafka, registry, topics=topics)
    assert (jobs, alone) == ([3, 3, 3], [])  # refused, typed, fetched again together
    assert [r.sent for r in third] == [1, 1, 1]
    for name in topics:
        records = read_topic(stack, name)
        assert key_ids(records) == list(range(6)), name
        assert records[-1].value == {"id": 5, "tag": "new"}
    # Hundreds of touched topics go in groups, each group's senders open only while it is
    # sent: here groups of two.
    monkeypatch.setattr(many_topics, "GROUP_SIZE", 2)
    staged(range(6, 7), lambda i: {"id": i, "tag": "more"})
    fourth = sync_pool(spark, "M", stack.kafka, registry, topics=topics)
    assert (jobs, alone) == ([3, 3, 3, 2, 1], [])
    assert [(r.topic, r.sent, r.next_offset) for r in fourth] == [(n, 1, 7) for n in topics]
    assert all(key_ids(read_topic(stack, name)) == list(range(7)) for name in topics)


def test_a_gap_in_one_of_a_pools_topics_read_in_one_job_is_refused_before_any_is_sent(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    topics = [f"{topic}_{n}" for n in range(2)]
    registry = Registry(stack.registry_settings)
    for name in topics:
        write_staging(spark, "G", name, [(i, {"id": i}, {"id": i}) for i in range(2)])
    sync_pool(spark, "G", stack.kafka, registry, topics=topics)  # a first run: registers
    write_staging(spark, "G", topics[0], [(2, {"id": 2}, {"id": 2})])
    write_staging(spark, "G", topics[1], [(3, {"id": 3}, {"id": 3})])  # offset 2 missing
    with pytest.raises(
        ZyncError,
        match=rf"gap in topic '{re.escape(topics[1])}'.* needs 2..3 \(2 records\) and staging has 1 ",
    ):
        sync_pool(spark, "G", stack.kafka, registry, topics=topics)
    assert [key_ids(read_topic(stack, name)) for name in topics] == [[0, 1], [0, 1]]
