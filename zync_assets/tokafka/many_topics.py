"""to-kafka of several topics of one staging pool, each on its own, read in one Spark job.

A mirror's pool has a topic per source table, and a pass touches dozens of them. Sent
topic by topic (sync.py), each costs a Spark job and a read of the pool's snapshot,
about half a second on two cores whatever its records: forty touched topics took 18-24 s
per pass. Here the steady state of every topic is done at once: each topic's own
sender fences its predecessors (its transactional id stays the topic's, so a run of that
topic alone still fences this one), one watermark request and one position read cover
them all, one job (zync.spark.StagingFetchMany) counts and encodes every topic's new
records with the topic's registered schemas (a job per GROUP_SIZE topics: hundreds go
in groups), and each topic's records are then sent in its own transactions, in offset
order, as sync.py sends them.

A record the registered schemas do not fit (a new shape: a mirrored row whose JSON column
is SQL NULL leaves that field out, a shape its source's schema does not list) fails the
job as a whole. Then one more job types every topic's new records, each topic registers
what they need, and the group is fetched once more: a whole database's first pass sent
its 60 topics one by one otherwise (38 of its 48 s), as its ten tables with a jsonb
column each had such rows.

What the steady state does not cover goes to sync.py, topic by topic, which handles it:
a topic with no registered schema yet, records that still do not fit, records over the
fetch budget (windows), and Spark Connect sessions (the librdkafka sender reads no JVM
batch).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from zync_assets.core.settings import KafkaSettings
from zync_assets.core.staging_rows import OUTPUT, of_kind
from zync_assets.kafka.offsets import watermarks
from zync_assets.kafka.registry import Registry
from zync_assets.tokafka import encode
from zync_assets.tokafka.encode import Encoding
from zync_assets.tokafka.jvm_sender import JvmSender, fetch_many
from zync_assets.tokafka.per_topic import (
    EncoderRefused,
    Progress,
    SyncResult,
    check_continues,
    ensure_topic,
    spark_job,
)
from zync_assets.tokafka.position import topic_positions
from zync_assets.tokafka.sender import FirstFetch

# Topics sent together at most: each holds a fencing producer (its connections and
# buffers) open until its group is sent, so hundreds of touched topics go in groups.
GROUP_SIZE = 32


@dataclass
class _Topic:
    name: str
    codec: Encoding
    schemas: encode.Schemas
    sender: JvmSender
    start: int = 0
    marks_before: dict[int, int] | None = None


def at_once_possible(spark: SparkSession, topics: Sequence[str]) -> bool:
    """Whether several topics can be read in one job: a classic session (its driver
    JVM holds the batches) and more than one topic."""
    return len(topics) > 1 and getattr(spark, "_jvm", None) is not None


def sync_at_once(
    spark: SparkSession, pool: str, topics: Sequence[str], kafka: KafkaSettings,
    registry: Registry, partitions: int | None, progress: Progress | None,
    transaction_size: int, formats: Mapping[str, str], default_format: str,
    sources: Mapping[str, str], budget: int,
) -> tuple[dict[str, SyncResult], list[str]]:  # fmt: skip
    """The topics of `topics` sent here (their results) and those left to sync_topic."""
    encode.require_staging(pool)
    chosen: list[tuple[str, Encoding, encode.Schemas]] = []
    left: list[str] = []  # no schema registered yet: a first run types its records alone
    for topic in topics:
        schemas = encode.Schemas(registry, formats.get(topic, default_format), sources.get(topic))
        codec = schemas.registered(topic)
        if codec is None:
            left.append(topic)
        else:
            chosen.append((topic, codec, schemas))
    if len(chosen) < 2:
        return {}, list(topics)
    results: dict[str, SyncResult] = {}
    for at in range(0, len(chosen), GROUP_SIZE):
        group = chosen[at : at + GROUP_SIZE]
        for topic, _, _ in group:
            ensure_topic(kafka, topic, partitions)
        sent, alone = _send_group(spark, pool, kafka, group, progress, transaction_size, budget)
        results |= sent
        left += alone
    return results, left


def _send_group(
    spark: SparkSession, pool: str, kafka: KafkaSettings,
    group: list[tuple[str, Encoding, encode.Schemas]], progress: Progress | None,
    transaction_size: int, budget: int,
) -> tuple[dict[str, SyncResult], list[str]]:  # fmt: skip
    """One group's topics, their senders open only while it is sent."""
    lanes: list[_Topic] = []
    try:
        for topic, codec, schemas in group:  # each fences its older to-kafka runs first
            lanes.append(_Topic(topic, codec, schemas, JvmSender(spark, kafka, pool, topic)))
        return _send_at_once(spark, pool, kafka, lanes, progress, transaction_size, budget)
    finally:
        for lane in lanes:
            lane.sender.close()


def _send_at_once(
    spark: SparkSession, pool: str, kafka: KafkaSettings, lanes: list[_Topic],
    progress: Progress | None, transaction_size: int, budget: int,
) -> tuple[dict[str, SyncResult], list[str]]:  # fmt: skip
    """The lanes' results, and the topics left to sync_topic (all of them when a record
    is refused; those over the budget)."""
    names = [lane.name for lane in lanes]
    before = watermarks(kafka, names)  # after the fences: nothing of theirs stays open
    starts = topic_positions(kafka, pool, before)
    for lane in lanes:
        lane.start = starts[lane.name]
        lane.marks_before = {p.partition: p.high for p in before[lane.name]}
    outputs = _new_outputs(encode.staging_of(spark, pool), lanes)
    try:
        fetched = _fetched(spark, outputs, lanes, budget)
    except EncoderRefused:  # a new shape or a wider type: type the records, register, again
        found = encode.surveys(outputs, [lane.start for lane in lanes])
        for index, lane in enumerate(lanes):
            lane.codec = lane.schemas.encoding(found[index], lane.name)
        try:
            fetched = _fetched(spark, outputs, lanes, budget)
        except EncoderRefused:  # each topic finds its own refusal alone
            return {}, names
    for lane, first in zip(lanes, fetched, strict=True):  # every check before any send
        check_continues(pool, lane.name, lane.start, first.span)
    results: dict[str, SyncResult] = {}
    rest: list[str] = []
    for lane, first in zip(lanes, fetched, strict=True):
        if first.span.count and first.records is None:  # over the budget: windows, alone
            rest.append(lane.name)
            continue
        sent = _send(lane, first, transaction_size, progress)
        results[lane.name] = SyncResult(
            pool, lane.name, sent, lane.start, lane.start + sent, lane.marks_before or {}, {},
            lane.codec.subjects,
        )  # fmt: skip
    after = watermarks(kafka, list(results)) if results else {}
    for name, result in results.items():
        marks = {p.partition: p.high for p in after[name]}
        results[name] = replace(result, high_water_after=marks)
    return results, rest


def _fetched(
    spark: SparkSession, outputs: DataFrame, lanes: list[_Topic], budget: int
) -> list[FirstFetch]:
    """Each lane's new records encoded with its codec, in one job."""
    return spark_job(
        lambda: fetch_many(
            spark, outputs, [lane.codec for lane in lanes], [lane.start for lane in lanes],
            budget,
        ),
        0, None,
    )  # fmt: skip


def _new_outputs(staging: DataFrame, lanes: list[_Topic]) -> DataFrame:
    """Each lane's output records from its start - 1 on: topic (the lane's index), offset,
    key, value."""
    index = F.create_map(*[F.lit(x) for i, lane in enumerate(lanes) for x in (lane.name, i)])
    starts = F.array(*[F.lit(max(lane.start - 1, 0)) for lane in lanes])
    topic: Column = index[F.col("kafka.topic")]
    return (
        staging.where(of_kind(OUTPUT) & F.col("kafka.topic").isin([lane.name for lane in lanes]))
        .select(
            topic.cast("int").alias("topic"), F.col("kafka.offset").alias("offset"), "key", "value"
        )
        .where(F.col("offset") >= starts[F.col("topic")])
    )


def _send(lane: _Topic, first: FirstFetch, transaction_size: int, progress: Progress | None) -> int:
    """A lane's records in transactions of `transaction_size`, in offset order."""
    records = first.records
    if records is None:
        return 0
    at = 0
    while at < records.count:
        stop = min(at + transaction_size, records.count)
        lane.sender.send(records, at, stop)
        at = stop
        if progress:
            progress(lane.name, at, records.count)
    return records.count
