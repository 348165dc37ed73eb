"""One ingest run: Kafka offset ranges → one Delta commit on the raw pool (plus dead letters).

    plan     progress (from the pool's last commit) .. end offsets (observed or given)
    read     Spark's Kafka source, exactly those ranges
    decode   in the JVM, one writer schema per schema id (decode.py)
    commit   dead letters first, then the raw rows with the new progress, both tagged
             with this run's Delta transaction id, so a retry writes nothing twice

If a run dies between the two commits, the next run sees the dead-letter commit of
the unfinished run and re-reads exactly its ranges, so no message is lost or doubled.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass, field

from delta.exceptions import DeltaConcurrentModificationException
from delta.tables import DeltaTable
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from zync_assets.errors import ZyncError
from zync_assets.ingest import decode
from zync_assets.ingest.progress import Progress, app_id, commit_metadata, read_progress
from zync_assets.ingest.ranges import OffsetRange, Offsets, advance, plan_ranges
from zync_assets.ingest.shaper import Shaper
from zync_assets.ingest.source import read_ranges
from zync_assets.kafka.offsets import watermarks
from zync_assets.kafka.registry import Registry
from zync_assets.pools import check_pool_name, dead_letter_path, pool_exists, pool_path
from zync_assets.settings import KafkaSettings

RAW_SCHEMA = (
    "kafka struct<topic: string, partition: int, offset: bigint, timestamp: timestamp>, "
    "key variant, value variant"
)
DEAD_LETTER_SCHEMA = (
    "topic string, partition int, offset bigint, timestamp timestamp, "
    "key binary, value binary, reason string, run bigint"
)


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

    @property
    def messages(self) -> int:
        return self.rows + self.dead_letters


def ingest(
    spark: SparkSession,
    pool: str,
    topics: list[str],
    kafka: KafkaSettings,
    registry: Registry,
    end_offsets: Offsets | None = None,
    shaper: Shaper | None = None,
    max_records: int | None = None,
) -> IngestResult:
    """Ingest `topics` into `pool` up to `end_offsets` (default: the current end of each)."""
    check_pool_name(pool)
    raw_path, dlq_path = pool_path(pool), dead_letter_path(pool)
    progress = read_progress(spark, raw_path)
    unfinished = read_progress(spark, dlq_path)
    run = progress.run + 1
    if unfinished.run == run:
        # A run died after its dead-letter commit: redo exactly its ranges.
        ranges = [OffsetRange(*r) for r in unfinished.details["ranges"]]
        end = unfinished.offsets
    else:
        ranges, end = _plan(progress, topics, kafka, end_offsets, max_records)
    if not ranges:
        return IngestResult(pool, None, [], progress=progress.offsets, end_offsets=end)

    _ensure_table(spark, raw_path, RAW_SCHEMA)
    attempt = uuid.uuid4().hex
    after = advance(progress.offsets, ranges)
    ranges_json = [[r.topic, r.partition, r.start, r.end] for r in ranges]
    checked = _decode(read_ranges(spark, kafka, ranges), registry)
    checked = checked.persist(StorageLevel.MEMORY_AND_DISK)  # decode once, use twice
    try:
        if unfinished.run == run:
            dead_count = int(unfinished.details["dead_letters"])  # already committed
        else:
            dead_count = _commit_dead_letters(
                checked, dlq_path, pool, run, attempt, after, ranges_json
            )
        rows = checked.where("problem IS NULL").select("kafka", "key", "value")
        if shaper is not None:
            rows = shaper.apply(rows)
        meta = commit_metadata(run, attempt, after, ranges=ranges_json, dead_letters=dead_count)
        _append(rows, raw_path, pool, run, meta)
    finally:
        checked.unpersist()
    committed = read_progress(spark, raw_path)
    if committed.attempt != attempt:
        return IngestResult(
            pool, None, [], progress=committed.offsets, end_offsets=end,
            note=f"another writer committed run {run} of pool {pool} first; nothing written",
        )  # fmt: skip
    written = _rows_written(spark, raw_path, committed)
    return IngestResult(pool, run, ranges, written, dead_count, after, end)


def _commit_dead_letters(
    checked: DataFrame,
    path: str,
    pool: str,
    run: int,
    attempt: str,
    after: Offsets,
    ranges_json: list[list],
) -> int:
    """Append the run's undecodable messages to `<pool>_dlq`; how many there were."""
    dead = checked.where("problem IS NOT NULL").select(
        "kafka.topic", "kafka.partition", "kafka.offset", "kafka.timestamp",
        F.col("key_bytes").alias("key"), F.col("value_bytes").alias("value"),
        F.col("problem").alias("reason"), F.lit(run).cast("long").alias("run"),
    )  # fmt: skip
    count = dead.count()
    if count:
        _ensure_table(checked.sparkSession, path, DEAD_LETTER_SCHEMA)
        meta = commit_metadata(run, attempt, after, ranges=ranges_json, dead_letters=count)
        _append(dead, path, pool, run, meta)
    return count


def _plan(
    progress: Progress,
    topics: list[str],
    kafka: KafkaSettings,
    end_offsets: Offsets | None,
    max_records: int | None,
) -> tuple[list[OffsetRange], Offsets]:
    marks = watermarks(kafka, topics)
    low = {t: {p.partition: p.low for p in parts} for t, parts in marks.items()}
    high = {t: {p.partition: p.high for p in parts} for t, parts in marks.items()}
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


def _decode(envelopes: DataFrame, registry: Registry) -> DataFrame:
    """Envelopes with decoded `key`/`value` VARIANTs and `problem` (NULL when decodable)."""
    framed = envelopes.select(
        "*",
        decode.schema_id_column("key_bytes").alias("key_id"),
        decode.schema_id_column("value_bytes").alias("value_id"),
    )
    ids = [
        row.id
        for row in framed.select(F.explode(F.array("key_id", "value_id")).alias("id"))
        .where("id IS NOT NULL AND id >= 0")
        .distinct()
        .collect()
    ]
    schemas = decode.check_schemas(
        framed, "value_bytes", decode.fetch_schemas(ids, registry.schema_by_id)
    )
    decoded = decode.decode_side(decode.decode_side(framed, "key", schemas), "value", schemas)
    problem = F.coalesce(
        F.concat(F.lit("key "), F.col("key_problem")),
        F.concat(F.lit("value "), F.col("value_problem")),
    )
    return decoded.withColumn("problem", problem)


def _ensure_table(spark: SparkSession, path: str, schema: str) -> None:
    if pool_exists(path):
        return
    # Another writer may create it at the same moment: same schema, nothing to do.
    with contextlib.suppress(DeltaConcurrentModificationException):
        DeltaTable.createIfNotExists(spark).location(path).addColumns(
            spark.createDataFrame([], schema).schema
        ).execute()


def _append(frame: DataFrame, path: str, pool: str, run: int, metadata: str) -> None:
    try:
        (
            frame.write.format("delta")
            .mode("append")
            .option("txnAppId", app_id(pool))
            .option("txnVersion", run)
            .option("userMetadata", metadata)
            .save(path)
        )
    except DeltaConcurrentModificationException as exc:
        raise ZyncError(
            f"another writer committed to pool {pool} while this run ({run}) was writing; "
            "this run wrote nothing: run it again to continue from the new progress"
        ) from exc


def _rows_written(spark: SparkSession, path: str, committed: Progress) -> int:
    row = (
        DeltaTable.forPath(spark, path)
        .history(5)
        .where(f"version = {committed.version}")
        .select("operationMetrics")
        .first()
    )
    return int(row.operationMetrics.get("numOutputRows", 0)) if row else 0
