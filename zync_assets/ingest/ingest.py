"""One ingest run: Kafka offset ranges → ONE Delta commit on the raw pool.

plan     progress (from the pool's last commit) .. end offsets (observed or given)
read     Spark's Kafka source, exactly those ranges, once (cached as bytes)
decode   in the JVM, one writer schema per schema id (decode.py)
commit   every message as one row — decoded, or flagged `dead_letter` with its bytes
         and reason — together with the new progress, tagged with this run's Delta
         transaction id, so a retried or concurrent run can never commit twice
copy     the run's dead letters to `<pool>_dlq` (idempotent; a crash before it is
         repaired by the next run, as the flagged rows are already safe in the pool)
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from zync_assets.codec.formats import WireFormat
from zync_assets.core.errors import ZyncError
from zync_assets.core.offsets import OffsetRange, Offsets, advance, plan_ranges
from zync_assets.core.settings import KafkaSettings
from zync_assets.ingest import decode
from zync_assets.ingest.dead_letters import sync_dead_letters
from zync_assets.ingest.shaper import Shaper
from zync_assets.ingest.source import read_ranges
from zync_assets.kafka.failures import java_outage
from zync_assets.kafka.offsets import high_marks, watermarks
from zync_assets.kafka.registry import Registry
from zync_assets.lake.delta_writes import append_once
from zync_assets.lake.pools import check_pool_name, pool_path
from zync_assets.lake.progress import Progress, app_id, commit_metadata, read_progress
from zync_assets.spark.session import sized_work


@dataclass(frozen=True)
class IngestResult:
    pool: str
    run: int | None  # None: nothing was committed
    ranges: list[OffsetRange]
    rows: int = 0
    dead_letters: int = 0
    progress: Offsets = field(default_factory=dict)
    end_offsets: Offsets = field(default_factory=dict)
    note: str = ""


def ingest(
    spark: SparkSession,
    pool: str,
    topics: list[str],
    kafka: KafkaSettings,
    registry: Registry,
    end_offsets: Offsets | None = None,
    shaper: Shaper | None = None,
    max_records: int | None = None,
    missing_ok: bool = False,
    formats: Mapping[str, WireFormat] | None = None,
) -> IngestResult:
    """Ingest `topics` into `pool` up to `end_offsets` (default: the current end of each).

    `missing_ok` treats a topic that does not exist (yet) as empty instead of an error;
    `formats` gives a topic's key and value wire formats (default: Avro for both).
    """
    path = pool_path(check_pool_name(pool))
    progress = read_progress(path)
    sync_dead_letters(spark, pool, progress)  # repairs a copy a crashed run did not finish
    ranges, end = _plan(progress, topics, kafka, end_offsets, max_records, missing_ok)
    if not ranges:
        return IngestResult(pool, None, [], progress=progress.offsets, end_offsets=end)

    run, attempt = progress.run + 1, uuid.uuid4().hex
    after, total = advance(progress.offsets, ranges), sum(r.size for r in ranges)
    with kafka_outages_named(kafka):
        envelopes = read_ranges(spark, kafka, ranges).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            with sized_work(spark, total):
                rows = decode.decode_envelopes(envelopes, registry, formats)
                if shaper is not None:
                    rows = shaper.apply(rows)
                ranges_json = [[r.topic, r.partition, r.start, r.end] for r in ranges]
                metadata = commit_metadata(run, attempt, after, ranges=ranges_json)
                _append(rows, path, pool, run, metadata)
        finally:
            envelopes.unpersist()
    committed = read_progress(path)
    if committed.attempt != attempt:
        return IngestResult(
            pool, None, [], progress=committed.offsets, end_offsets=end,
            note=f"another writer committed run {run} of pool {pool} first; nothing written",
        )  # fmt: skip
    dead = sync_dead_letters(spark, pool, committed, after=progress)
    return IngestResult(pool, run, ranges, _rows_written(committed, total) - dead, dead, after, end)


@contextmanager
def kafka_outages_named(kafka: KafkaSettings) -> Iterator[None]:
    """Spark's Kafka source failing because the broker went away mid-read: Unavailable (a
    continuous run retries it), not a JVM stack trace. The commit had not happened."""
    try:
        yield
    except ZyncError:
        raise
    except Exception as exc:
        if (outage := java_outage(kafka, exc)) is not None:
            raise outage from exc
        raise


def _plan(
    progress: Progress,
    topics: list[str],
    kafka: KafkaSettings,
    end_offsets: Offsets | None,
    max_records: int | None,
    missing_ok: bool,
) -> tuple[list[OffsetRange], Offsets]:
    marks = watermarks(kafka, topics, missing_ok)
    low = {t: {p.partition: p.low for p in parts} for t, parts in marks.items()}
    high = high_marks(marks)
    end = end_offsets if end_offsets is not None else high
    end = {t: parts for t, parts in end.items() if t in topics}
    for topic, parts in progress.offsets.items():
        for partition, offset in parts.items():
            floor = low.get(topic, {}).get(partition)
            if floor is not None and offset < floor:
                raise ZyncError(
                    f"{topic}[{partition}]: offsets {offset}..{floor - 1} were deleted from Kafka "
                    "(retention) before they were ingested; raise the topic's retention, or "
                    "acknowledge the loss by re-creating the pool"
                )
    for topic, parts in end.items():
        for partition, offset in parts.items():
            if offset > high.get(topic, {}).get(partition, 0):
                raise ZyncError(
                    f"{topic}[{partition}]: requested end offset {offset} is beyond the "
                    f"partition's end {high[topic].get(partition, 0)}"
                )
    ranges = plan_ranges(progress.offsets, low, end)
    if max_records is not None:
        ranges = _cap(ranges, max_records)
    return ranges, end


def _cap(ranges: list[OffsetRange], budget: int) -> list[OffsetRange]:
    """Shrink ranges (in order) so they hold at most `budget` offsets in total."""
    capped = []
    for r in ranges:
        if budget <= 0:
            break
        take = min(r.size, budget)
        capped.append(OffsetRange(r.topic, r.partition, r.start, r.start + take))
        budget -= take
    return capped


def _append(frame: DataFrame, path: str, pool: str, run: int, metadata: str) -> None:
    append_once(
        frame, path, app_id(pool), run, metadata,
        conflict=f"another writer committed to pool {pool} while this run ({run}) was writing; "
        "this run wrote nothing: run it again to continue from the new progress",
    )  # fmt: skip


def _rows_written(committed: Progress, expected: int) -> int:
    metrics = committed.operation_metrics or {}
    return int(metrics.get("numOutputRows", expected))
