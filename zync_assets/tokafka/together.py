"""to-kafka for a staging pool whose outputs carry source transactions: its topics together.

A gated or `txn` rule writes a source transaction's (or group's) outputs in one staging
commit, possibly to several output topics of the pool. Sent topic by topic, a
read_committed consumer of two of them would see one topic's part of a transaction before
the other's. So such a pool's topics are sent by one producer, whose transactional id is
the pool's, and each Kafka transaction holds, for every topic, the records up to ends that
split no source transaction (cuts.py).

The run reads one snapshot of the pool (its version pinned), so what it checks, cuts and
sends cannot disagree when ETL commits meanwhile; the next run sends what came after.
Opening the pool's producer fences older to-kafka runs of the pool; opening and closing
the topics' own transactional ids fences a run from before the pool had transactions.
Where each topic stands is read from the topic, as for a topic alone (position.py): a
Kafka transaction commits all its topics' records or none, so the positions agree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from zync_assets.core.settings import KafkaSettings
from zync_assets.core.staging_rows import OUTPUT, of_kind
from zync_assets.kafka.offsets import PartitionOffsets, watermarks
from zync_assets.kafka.registry import Registry
from zync_assets.lake.pools import pool_version
from zync_assets.tokafka import encode
from zync_assets.tokafka.cuts import Cuts, transaction_cuts
from zync_assets.tokafka.encode import Encoding, Span, Survey, span, survey
from zync_assets.tokafka.per_topic import (
    EncoderRefused,
    Progress,
    SyncResult,
    check_continues,
    ensure_topic,
    spark_job,
)
from zync_assets.tokafka.position import topic_position
from zync_assets.tokafka.sender import Fetched, Part, Sender, changed_while_sending
from zync_assets.tokafka.sender_choice import open_sender

TRANSACTION_SIZE = 200_000  # default records per transaction
WINDOW_RECORDS = 500_000  # records per fetch, about, in all topics (a few transactions)


def transactional_pool(spark: SparkSession, pool: str) -> bool:
    """Whether a gated or `txn` rule wrote to `pool` (its outputs have a `txn` column)."""
    return "txn" in encode.staging_of(spark, pool).columns


@dataclass
class _Lane:
    """One topic of the pool: where it stands, what staging has for it, what was sent."""

    topic: str
    schemas: encode.Schemas
    outputs: DataFrame  # offset, key, value from start - 1 on, in the pinned snapshot
    start: int
    end: int
    marks_before: dict[int, int]
    sample: Survey | None = None  # the first records' types, when no schema was registered
    codec: Encoding | None = None
    surveyed: bool = False  # whether the codec comes from a survey of all that is left
    sent: int = 0

    @property
    def next(self) -> int:
        return self.start + self.sent


def sync_together(
    spark: SparkSession,
    pool: str,
    kafka: KafkaSettings,
    registry: Registry,
    topics: Sequence[str],
    partitions: int | None,
    progress: Progress | None,
    transaction_size: int,
    formats: Mapping[str, str],
    default_format: str,
    sources: Mapping[str, str],
) -> list[SyncResult]:
    """Send every output topic of `pool` (and `topics`, which may have none yet), each
    Kafka transaction across them holding whole source transactions."""
    path = encode.require_staging(pool)
    reader, version = spark.read.format("delta"), pool_version(path)
    if version is not None:
        reader = reader.option("versionAsOf", version)
    staging = reader.load(path)
    chosen = sorted({*topics, *encode.output_topics(spark, pool, version)})
    for topic in chosen:
        ensure_topic(kafka, topic, partitions)
    sender = open_sender(spark, kafka, pool, None)  # fences older runs of the pool
    try:
        for topic in chosen:  # and runs from before, that sent the topic alone
            open_sender(spark, kafka, pool, topic).close()
        before = watermarks(kafka, chosen)
        lanes = []
        for topic in chosen:
            schemas = encode.Schemas(
                registry, formats.get(topic, default_format), sources.get(topic)
            )
            lanes.append(_lane(kafka, pool, staging, topic, schemas, before[topic]))
        for lane in lanes:  # after every check: a refused run registers nothing
            if lane.sample is not None:
                lane.codec = lane.schemas.encoding(lane.sample, lane.topic)
        starts = {lane.topic: lane.start for lane in lanes}
        cuts = transaction_cuts(staging, starts, transaction_size)
        _send(sender, lanes, cuts, transaction_size, progress)
    finally:
        sender.close()
    after = watermarks(kafka, chosen)
    return [_result(pool, lane, {p.partition: p.high for p in after[lane.topic]}) for lane in lanes]


def _result(pool: str, lane: _Lane, marks_after: dict[int, int]) -> SyncResult:
    subjects = lane.codec.subjects if lane.codec else {}
    return SyncResult(
        pool, lane.topic, lane.sent, lane.start, lane.next, lane.marks_before, marks_after, subjects
    )


def _lane(
    kafka: KafkaSettings, pool: str, staging: DataFrame, topic: str,
    schemas: encode.Schemas, before: list[PartitionOffsets],
) -> _Lane:  # fmt: skip
    """Where `topic` stands and what staging has after it, checked for gaps."""
    position = topic_position(kafka, topic, pool, before)
    start = position.next_offset
    outputs = (
        staging.where(of_kind(OUTPUT) & (F.col("kafka.topic") == topic))
        .where(F.col("kafka.offset") >= max(start - 1, 0))
        .select(F.col("kafka.offset").alias("offset"), "key", "value")
    )
    codec = schemas.registered(topic)
    sample = None
    found: Span
    if codec is None:
        found, sample = survey(outputs, start, typed=encode.SAMPLE_SIZE)
    else:
        found = span(outputs, start)
    check_continues(pool, topic, start, found)
    return _Lane(
        topic, schemas, outputs, start, start + found.count, position.high_water_marks,
        sample if found.count else None, codec,
    )  # fmt: skip


def _send(
    sender: Sender, lanes: list[_Lane], cuts: Cuts, size: int, progress: Progress | None
) -> None:
    """Kafka transactions of about `size` records across the lanes, until all are sent.
    Records are fetched a window of several transactions at a time (a fetch is a Spark
    job that scans the pool's files: fewer, larger ones scan less); a window ends where a
    transaction may, so transactions are cut inside it."""
    while any(lane.next < lane.end for lane in lanes):
        last = {lane.topic: lane.end for lane in lanes}
        window = _ends(lanes, cuts, max(size, WINDOW_RECORDS), last)
        base = {lane.topic: lane.next for lane in lanes}
        fetched = {
            lane.topic: _fetch(sender, lane, lane.next, window[lane.topic])
            for lane in lanes
            if window[lane.topic] > lane.next
        }
        while any(lane.next < window[lane.topic] for lane in lanes):
            ends = _ends(lanes, cuts, size, window)
            parts = [
                Part(lane.topic, fetched[lane.topic], lane.next - base[lane.topic],
                     ends[lane.topic] - base[lane.topic])
                for lane in lanes
                if ends[lane.topic] > lane.next
            ]  # fmt: skip
            sender.send_parts(parts)
            for lane in lanes:
                if ends[lane.topic] > lane.next:
                    lane.sent = ends[lane.topic] - lane.start
                    if progress:
                        progress(lane.topic, lane.sent, lane.end - lane.start)


def _ends(lanes: list[_Lane], cuts: Cuts, size: int, limits: Mapping[str, int]) -> dict[str, int]:
    """Ends for about `size` records in all, below `limits` (which split no source
    transaction), shared by what each topic has left below them (at least one record of
    each topic with any: every transaction makes progress)."""
    left = {lane.topic: limits[lane.topic] - lane.next for lane in lanes}
    total = sum(left.values())
    wanted = {
        lane.topic: lane.next + min(left[lane.topic], math.ceil(size * left[lane.topic] / total))
        for lane in lanes
    }
    ends = cuts.ends({lane.topic: lane.next for lane in lanes}, wanted)
    for lane in lanes:
        if ends[lane.topic] > limits[lane.topic]:  # the pinned snapshot has them whole
            raise changed_while_sending(lane.next, ends[lane.topic])
    return ends


def _fetch(sender: Sender, lane: _Lane, low: int, high: int) -> Fetched:
    """Lane records [low, high), encoded; when one does not fit the schemas, the rest of
    the lane is surveyed and registered once (then a refusal stands)."""
    codec = lane.codec
    assert codec is not None, "a lane with records has schemas (registered, or surveyed)"
    try:
        return spark_job(lambda: sender.fetch(lane.outputs, codec, low, high), low, high)
    except EncoderRefused:
        if lane.surveyed:
            raise
    _, types = survey(lane.outputs, low)
    wider = lane.codec = lane.schemas.encoding(types, lane.topic)
    lane.surveyed = True
    return spark_job(lambda: sender.fetch(lane.outputs, wider, low, high), low, high)
