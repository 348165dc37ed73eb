"""`to-kafka`: send a staging pool's output records to their topics, exactly once.

For each output topic: fence older producers, read where the topic stands (the
staging offset in its last committed record), check staging continues from there
without a gap, encode the rest in Spark and send it in order, one transaction per
chunk. Rerunning sends nothing twice; a crash loses nothing.

Encoding first tries the schemas earlier runs registered for the topic: in the
steady state they fit, no survey pass is needed, and the sender's first fetch both
checks the offsets and, when they fit FETCH_BYTES, brings every record (one Spark
job in all). Only when the encoder meets a record they do not fit (a new shape, a
wider type, or a first run) are the rest of the records surveyed and their schemas
registered.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from pyspark.sql import DataFrame, SparkSession

from zync_assets.codec.formats import OUTPUT_FORMATS
from zync_assets.errors import ZyncError
from zync_assets.kafka import clients
from zync_assets.kafka.offsets import watermarks
from zync_assets.kafka.registry import Registry
from zync_assets.settings import KafkaSettings
from zync_assets.tokafka import encode
from zync_assets.tokafka.cuts import Cuts, transaction_cuts
from zync_assets.tokafka.encode import (
    Encoding,
    Span,
    output_topics,
    outputs_from,
    staging_of,
    survey,
)
from zync_assets.tokafka.position import topic_position
from zync_assets.tokafka.send import Fetched, FirstFetch, Sender
from zync_assets.tokafka.senders import open_sender

TRANSACTION_SIZE = 200_000  # default records per transaction
# zync_variant_avro (jvm/src) prefixes its refusals so they can be told from Spark's own.
# Spark quotes them as "...: zync to-kafka: <reason>. SQLSTATE: 39000" or on a line of its own.
ENCODER_ERROR = re.compile(r"zync to-kafka: (.*?)(?:\. SQLSTATE|\n|$)")
FETCH_BYTES = 128 * 1024 * 1024  # encoded records per Spark job, about (a few transactions)
T = TypeVar("T")


class EncoderRefused(ZyncError):
    """A record does not fit the schemas its chunk was encoded with."""


@dataclass(frozen=True)
class SyncResult:
    pool: str
    topic: str
    sent: int
    first_offset: int  # staging offset of the first record sent (= where the topic stood)
    next_offset: int  # staging offset the next run starts at
    high_water_before: dict[int, int]
    high_water_after: dict[int, int]
    subjects: dict[str, int] = field(default_factory=dict)


Progress = Callable[[str, int, int], None]  # topic, records sent, records to send


def sync_pool(
    spark: SparkSession,
    pool: str,
    kafka: KafkaSettings,
    registry: Registry,
    topics: list[str] | None = None,
    partitions: int | None = None,
    progress: Progress | None = None,
    transaction_size: int = TRANSACTION_SIZE,
    formats: Mapping[str, str] | None = None,
    default_format: str = "avro",
) -> list[SyncResult]:
    """Sync `topics` (default: every output topic the pool has records for); `formats`
    gives a topic's wire format (avro or json), `default_format` the others'."""
    chosen = topics if topics else output_topics(spark, pool)
    formats = formats or {}
    return [
        sync_topic(
            spark,
            pool,
            topic,
            kafka,
            registry,
            partitions,
            progress,
            transaction_size,
            wire_format=formats.get(topic, default_format),
        )
        for topic in chosen
    ]


def sync_topic(
    spark: SparkSession,
    pool: str,
    topic: str,
    kafka: KafkaSettings,
    registry: Registry,
    partitions: int | None = None,
    progress: Progress | None = None,
    transaction_size: int = TRANSACTION_SIZE,
    wire_format: str = "avro",
) -> SyncResult:
    """Send `pool`'s records for `topic` from where the topic stands, as Confluent-framed
    Avro (`wire_format` avro) or Kafka Connect's JSON envelope (json)."""
    if wire_format not in OUTPUT_FORMATS:
        raise ZyncError(f"unknown output format {wire_format!r}: use avro or json")
    encode.require_staging(pool)  # before Kafka: a typo in the pool creates no topic
    loading = _load_files_meanwhile(spark, pool)
    try:
        _ensure_topic(kafka, topic, partitions)
        sender = open_sender(spark, kafka, pool, topic)  # fences any older to-kafka first
        try:
            schemas = encode.Schemas(registry, wire_format)
            return _sync(
                spark, pool, topic, kafka, schemas, sender, loading, progress, transaction_size
            )
        finally:
            sender.close()
    finally:
        loading.join()  # no planning left running when this returns or raises


def _load_files_meanwhile(spark: SparkSession, pool: str) -> threading.Thread:
    """Delta loads the pool's snapshot in a thread while Kafka says where the topic
    stands; the read planned after finds it cached. Its errors are the read's to report."""

    def load() -> None:
        with contextlib.suppress(Exception):
            encode.load_files(spark, pool)

    thread = threading.Thread(target=load, name="zync-load-pool-files", daemon=True)
    thread.start()
    return thread


def _sync(
    spark: SparkSession,
    pool: str,
    topic: str,
    kafka: KafkaSettings,
    schemas: encode.Schemas,
    sender: Sender,
    loading: threading.Thread,
    progress: Progress | None,
    transaction_size: int,
) -> SyncResult:
    before = watermarks(kafka, [topic])[topic]
    position = topic_position(kafka, topic, pool, before)
    start = position.next_offset
    loading.join()
    outputs = outputs_from(spark, pool, topic, max(start - 1, 0))
    # Steady state: the schemas earlier runs registered fit, and one job checks the offsets
    # and encodes the records (the sender's first fetch). A first run types its first
    # records before, and registers what they need (after the checks: a refused run
    # registers nothing). Either way a record the schemas do not fit makes the rest be
    # surveyed in full.
    codec = schemas.registered(topic)
    checked = False
    if codec is None:
        found, sample = survey(outputs, start, typed=encode.SAMPLE_SIZE)
        _check_continues(pool, topic, start, found)
        if found.count == 0:
            marks = position.high_water_marks
            return SyncResult(pool, topic, 0, start, start, marks, marks)
        codec, checked = schemas.encoding(sample, topic), True
    cuts = transaction_cuts(staging_of(spark, pool), topic, start)
    run = _Run(pool, topic, schemas, sender, outputs, transaction_size, progress, checked, cuts)
    sent = run.send_all(codec, start)
    after = {p.partition: p.high for p in watermarks(kafka, [topic])[topic]}
    return SyncResult(
        pool, topic, sent, start, start + sent, position.high_water_marks, after, run.subjects
    )


@dataclass
class _Run:
    """Sending one topic's records: fetches, offset check, transactions, re-surveys."""

    pool: str
    topic: str
    schemas: encode.Schemas
    sender: Sender
    outputs: DataFrame
    transaction_size: int
    progress: Progress | None
    checked: bool  # whether the offsets from the start on were found dense
    cuts: Cuts  # where a Kafka transaction may end (never inside a source transaction)
    sent: int = 0  # records committed so far
    subjects: dict[str, int] = field(default_factory=dict)

    def send_all(self, codec: Encoding, start: int) -> int:
        """Encode with `codec` and send from `start` on; when a record does not fit its
        schemas, survey the rest in full, register, go on (a record that does not fit what
        a full survey registered is refused). Returns the records sent."""
        surveyed = False
        while True:
            try:
                self._send_from(codec, start)
                self.subjects = codec.subjects
                return self.sent
            except EncoderRefused:
                if surveyed:
                    raise
            # A new shape or a wider type: survey the rest, register, go on. A chunk is
            # fetched only after the one before it committed, so `sent` is where it starts.
            found, types = survey(self.outputs, start + self.sent)
            if not self.checked:
                self._check(start, found)
            codec = self.schemas.encoding(types, self.topic)
            surveyed = True

    def _send_from(self, codec: Encoding, start: int) -> None:
        low = start + self.sent
        first = _spark_job(
            lambda: self.sender.first_fetch(self.outputs, codec, low, FETCH_BYTES), low, None
        )
        if not self.checked:
            self._check(start, first.span)
        end = low + first.span.count
        for fetched, begin, stop in _chunks(self, codec, first, low, end):
            self.sender.send(fetched, begin, stop)
            self.sent += stop - begin
            if self.progress:
                self.progress(self.topic, self.sent, end - start)

    def _check(self, start: int, found: Span) -> None:
        _check_continues(self.pool, self.topic, start, found)
        self.checked = True

    def fetch(self, codec: Encoding, low: int, high: int) -> Fetched:
        return _spark_job(lambda: self.sender.fetch(self.outputs, codec, low, high), low, high)


def _ensure_topic(kafka: KafkaSettings, topic: str, partitions: int | None) -> None:
    existing = clients.cluster_metadata(kafka).topics
    if topic not in existing:
        clients.ensure_topic(kafka, topic, partitions or 1)
        return
    count = len(existing[topic].partitions)
    if partitions is not None and partitions != count:
        raise ZyncError(
            f"topic {topic!r} already has {count} partition(s), not {partitions}; keys would "
            "move between partitions: drop --partitions, or send to a new topic"
        )


def _check_continues(pool: str, topic: str, start: int, found: Span) -> None:
    """Staging must hold the records right after the topic's last one, densely."""
    if start > 0 and not found.has_previous:
        raise ZyncError(
            f"topic {topic!r} already holds staging offsets up to {start - 1}, beyond what "
            f"staging pool {pool} has for it; was the pool dropped or rebuilt? "
            "refusing to send (send to a new topic)"
        )
    if found.count == 0:
        return
    expected = found.high - start + 1 if found.high is not None else 0
    if found.low != start or found.count != expected:
        raise ZyncError(
            f"staging pool {pool} has a gap in topic {topic!r}'s offsets: the topic needs "
            f"{start}..{found.high} ({expected} records) and staging has {found.count} of them, "
            f"from {found.low}; refusing to send (the sink would miss records)"
        )


Chunk = tuple[Fetched, int, int]  # fetched records, and one transaction's [start, stop) of them


def _chunks(run: _Run, codec: Encoding, first: FirstFetch, low: int, end: int) -> Iterator[Chunk]:
    """Transactions of `transaction_size` records in offset order, [low, end). The first
    fetch may hold them all; else Spark fetches several transactions' worth per job (each
    job scans the pool's files for its range, so fewer, larger jobs scan less), bounded by
    FETCH_BYTES, and fetches the next range while this one is sent."""
    per_transaction = run.transaction_size
    size = _fetch_size(first.bytes_per_record, per_transaction)

    def window_end(at: int) -> int:  # fetches end where a transaction may end
        return min(run.cuts.allowed(min(at + size, end)), end)

    with ThreadPoolExecutor(max_workers=1) as pool:
        fetched = first.records
        pending = None
        if fetched is None and low < end:
            pending = pool.submit(run.fetch, codec, low, window_end(low))
        while low < end:
            if fetched is None:
                assert pending is not None
                fetched = pending.result()
            base, low = low, low + fetched.count
            size = _fetch_size(fetched.nbytes / max(fetched.count, 1), per_transaction)
            if low < end:
                pending = pool.submit(run.fetch, codec, low, window_end(low))
            at = 0
            while at < fetched.count:
                stop = min(run.cuts.allowed(base + at + per_transaction) - base, fetched.count)
                yield fetched, at, stop
                at = stop
            fetched = None


def _fetch_size(bytes_per_record: float, transaction_size: int) -> int:
    """Records per Spark job: whole transactions, about FETCH_BYTES of encoded records
    (one transaction while the size of a record is not known)."""
    if bytes_per_record <= 0:
        return transaction_size
    transactions = max(int(FETCH_BYTES / bytes_per_record) // transaction_size, 1)
    return transactions * transaction_size


def _spark_job(job: Callable[[], T], low: int, high: int | None) -> T:
    """`job`, with a refusal of our encoder said in one line (EncoderRefused)."""
    try:
        return job()
    except ZyncError:
        raise
    except Exception as exc:  # a failed Spark job: say why if our encoder refused a record
        refusal = ENCODER_ERROR.search(str(exc))
        if refusal is None:
            raise
        where = f"{low}..{high - 1}" if high is not None else f"from {low} on"
        raise EncoderRefused(
            f"{refusal.group(1)} (staging offsets {where}); nothing of them was sent"
        ) from exc
