"""`to-kafka`: send a staging pool's output records to their topics, exactly once.

A pool whose outputs carry source transactions (a gated or `txn` rule wrote to it) sends
its topics together (together.py). Any other pool, for each output topic: fence older
producers, read where the topic stands (the staging offset in its last committed
record), check staging continues from there without a gap, encode the rest in Spark and
send it in order, one transaction per chunk. Rerunning sends nothing twice; a crash
loses nothing.

Encoding first tries the schemas earlier runs registered for the topic: in the
steady state they fit, no survey pass is needed, and the sender's first fetch both
checks the offsets and, when they fit FETCH_BYTES, brings every record (one Spark
job in all). Only when the encoder meets a record they do not fit (a new shape, a
wider type, or a first run) are the rest of the records surveyed and their schemas
registered.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession

from zync_assets.codec.formats import OUTPUT_FORMATS
from zync_assets.core.config import carried
from zync_assets.core.errors import ZyncError
from zync_assets.core.settings import KafkaSettings
from zync_assets.kafka.offsets import watermarks
from zync_assets.kafka.registry import Registry
from zync_assets.tokafka import encode
from zync_assets.tokafka.encode import (
    Encoding,
    Span,
    output_topics,
    outputs_from,
    survey,
)
from zync_assets.tokafka.many_topics import at_once_possible, sync_at_once
from zync_assets.tokafka.per_topic import (
    EncoderRefused,
    Progress,
    SyncResult,
    check_continues,
    ensure_topic,
    spark_job,
)
from zync_assets.tokafka.position import topic_position
from zync_assets.tokafka.sender import Fetched, FirstFetch, Sender
from zync_assets.tokafka.sender_choice import open_sender
from zync_assets.tokafka.together import TRANSACTION_SIZE, sync_together, transactional_pool

FETCH_BYTES = 128 * 1024 * 1024  # encoded records per Spark job, about (a few transactions)


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
    sources: Mapping[str, str] | None = None,
) -> list[SyncResult]:
    """Sync `topics` (default: every output topic the pool has records for); `formats`
    gives a topic's wire format (avro or json), `default_format` the others'; `sources` a
    topic's source, whose row schema its records follow (specs/mirror.py's
    `mirror_sources`). A pool whose outputs carry source transactions syncs all its
    topics, together."""
    formats, sources = formats or {}, sources or {}
    for wire_format in (default_format, *formats.values()):
        _check_format(wire_format)
    if transactional_pool(spark, pool):
        return sync_together(
            spark, pool, kafka, registry, topics or [], partitions, progress, transaction_size,
            formats, default_format, sources,
        )  # fmt: skip
    chosen = topics if topics else output_topics(spark, pool)
    done: dict[str, SyncResult] = {}
    alone = list(chosen)
    if at_once_possible(spark, chosen):  # a mirror's touched topics: one Spark job for all
        done, alone = sync_at_once(
            spark, pool, chosen, kafka, registry, partitions, progress, transaction_size,
            formats, default_format, sources, FETCH_BYTES,
        )  # fmt: skip
    for topic in alone:
        done[topic] = sync_topic(
            spark,
            pool,
            topic,
            kafka,
            registry,
            partitions,
            progress,
            transaction_size,
            wire_format=formats.get(topic, default_format),
            source=sources.get(topic),
        )
    return [done[topic] for topic in chosen]


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
    source: str | None = None,
) -> SyncResult:
    """Send `pool`'s records for `topic` from where the topic stands, as Confluent-framed
    Avro (`wire_format` avro) or Kafka Connect's JSON envelope (json). Not for a pool whose
    outputs carry source transactions: its topics go together (sync_pool)."""
    _check_format(wire_format)
    encode.require_staging(pool)  # before Kafka: a typo in the pool creates no topic
    loading = _load_files_meanwhile(spark, pool)
    try:
        ensure_topic(kafka, topic, partitions)
        sender = open_sender(spark, kafka, pool, topic)  # fences any older to-kafka first
        try:
            schemas = encode.Schemas(registry, wire_format, source)
            return _sync(
                spark, pool, topic, kafka, schemas, sender, loading, progress, transaction_size
            )
        finally:
            sender.close()
    finally:
        loading.join()  # no planning left running when this returns or raises


def _check_format(wire_format: str) -> None:
    if wire_format not in OUTPUT_FORMATS:
        raise ZyncError(f"unknown output format {wire_format!r}: use avro or json")


def _load_files_meanwhile(spark: SparkSession, pool: str) -> threading.Thread:
    """Delta loads the pool's snapshot in a thread while Kafka says where the topic
    stands; the read planned after finds it cached. Its errors are the read's to report."""

    def load() -> None:
        with contextlib.suppress(Exception):
            encode.load_files(spark, pool)

    thread = threading.Thread(target=carried(load), name="zync-load-pool-files", daemon=True)
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
    if transactional_pool(spark, pool):  # its snapshot is loaded now: no extra cost
        raise ZyncError(
            f"staging pool {pool} keeps source transactions whole across its output topics, "
            f"so they are sent together, not {topic!r} alone: sync the pool (zync to-kafka "
            f"--pool {pool})"
        )
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
        check_continues(pool, topic, start, found)
        if found.count == 0:
            marks = position.high_water_marks
            return SyncResult(pool, topic, 0, start, start, marks, marks)
        codec, checked = schemas.encoding(sample, topic), True
    run = _Run(pool, topic, schemas, sender, outputs, transaction_size, progress, checked)
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
        first = spark_job(
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
        check_continues(self.pool, self.topic, start, found)
        self.checked = True

    def fetch(self, codec: Encoding, low: int, high: int) -> Fetched:
        return spark_job(lambda: self.sender.fetch(self.outputs, codec, low, high), low, high)


Chunk = tuple[Fetched, int, int]  # fetched records, and one transaction's [start, stop) of them


def _chunks(run: _Run, codec: Encoding, first: FirstFetch, low: int, end: int) -> Iterator[Chunk]:
    """Transactions of `transaction_size` records in offset order, [low, end). The first
    fetch may hold them all; else Spark fetches several transactions' worth per job (each
    job scans the pool's files for its range, so fewer, larger jobs scan less), bounded by
    FETCH_BYTES, and fetches the next range while this one is sent."""
    per_transaction = run.transaction_size
    size = _fetch_size(first.bytes_per_record, per_transaction)

    def window_end(at: int) -> int:
        return min(at + size, end)

    with ThreadPoolExecutor(max_workers=1) as pool:
        fetched = first.records
        pending = None
        if fetched is None and low < end:
            pending = pool.submit(carried(run.fetch), codec, low, window_end(low))
        while low < end:
            if fetched is None:
                assert pending is not None
                fetched = pending.result()
            low += fetched.count
            size = _fetch_size(fetched.nbytes / max(fetched.count, 1), per_transaction)
            if low < end:
                pending = pool.submit(carried(run.fetch), codec, low, window_end(low))
            at = 0
            while at < fetched.count:
                stop = min(at + per_transaction, fetched.count)
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
