"""`<pool>_dlq`: a copy of the pool's dead-letter rows, kept in step with its progress.

Dead letters are committed inside the raw pool itself (rows with `dead_letter` set),
atomically with the good rows; this table is their convenient, flat copy. Each
copy is tagged with the raw run it covers (Delta txn `zync-dlq/<pool>`), so it is
made once, and a run that died before copying is completed by the next one.
"""

from __future__ import annotations

import json

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from zync_assets.core.offsets import Offsets
from zync_assets.lake import store as lake_store
from zync_assets.lake.delta_writes import append_once
from zync_assets.lake.pools import commit_file, dead_letter_path, pool_path
from zync_assets.lake.progress import Progress, commit_metadata, read_progress


def _between(low: Offsets, high: Offsets) -> Column:
    """Rows whose (topic, partition, offset) lies in [low, high) per partition."""
    condition = F.lit(False)
    for topic, parts in high.items():
        for partition, end in parts.items():
            start = low.get(topic, {}).get(partition, 0)
            if end > start:
                condition = condition | (
                    (F.col("kafka.topic") == topic)
                    & (F.col("kafka.partition") == partition)
                    & F.col("kafka.offset").between(start, end - 1)
                )
    return condition


# The raw commit (by its attempt id, unique per run) each pool's copy was last brought
# up to in this process. A pool without dead letters has no copy to record progress in;
# A raw pool's `<pool>_dlq`: the messages that could not be read, with their original bytes.
DEAD_LETTER_SCHEMA = (
    "topic string, partition int, offset bigint, timestamp timestamp, key binary, "
    "value binary, reason string, run bigint"
)
# without this, every pass of a long-lived process would scan for dead letters anew.
_synced_through: dict[str, str | None] = {}


def sync_dead_letters(
    spark: SparkSession, pool: str, raw: Progress, after: Progress | None = None
) -> int:
    """Copy dead letters committed to `pool` up to `raw` that the copy lacks; how many.

    `after`: the progress `raw` was committed on top of. When the copy was up to it,
    the dead letters to copy are those of `raw`'s own commit, and its files' statistics
    say whether there are any: a pass without dead letters then runs no Spark job here.
    """
    path = dead_letter_path(pool)
    if raw.run == 0 or _synced_through.get(path, "") == raw.attempt:
        return 0
    in_step = after is not None and _synced_through.get(path, "") == after.attempt
    if in_step and raw.version is not None and dead_letters_added(pool, raw.version) == 0:
        _synced_through[path] = raw.attempt
        return 0
    copied = read_progress(path)
    if copied.run >= raw.run:
        _synced_through[path] = raw.attempt
        return 0
    dead = (
        spark.read.format("delta")
        .load(pool_path(pool))
        .where(F.col("dead_letter.reason").isNotNull() & _between(copied.offsets, raw.offsets))
        .select(
            "kafka.topic",
            "kafka.partition",
            "kafka.offset",
            "kafka.timestamp",
            "dead_letter.key",
            "dead_letter.value",
            "dead_letter.reason",
            F.lit(raw.run).cast("long").alias("run"),
        )
    )
    count = dead.count()  # cheap: file statistics skip files without dead letters
    if count:
        # The copy's size so far, for `zync status` (recorded_dead_letters): nothing before
        # the first copy; unknown after a copy made before copies counted.
        before = 0 if copied.run == 0 else copied.details.get("dead_letters_total")
        total = None if before is None else int(before) + count
        meta = commit_metadata(raw.run, raw.attempt or "", raw.offsets, dead_letters_total=total)
        append_once(dead, path, f"zync-dlq/{pool}", raw.run, meta)
    _synced_through[path] = raw.attempt
    return count


def dead_letters_added(pool: str, version: int) -> int | None:
    """Dead-letter rows commit `version` of `pool` added, from its files' statistics
    (rows minus those whose `dead_letter.reason` is null); None when a file has none."""
    total = 0
    try:
        for line in lake_store.lines(commit_file(pool_path(pool), version)):
            if not line.startswith('{"add"'):
                continue
            stats = json.loads(json.loads(line)["add"].get("stats") or "{}")
            reason_nulls = stats.get("nullCount", {}).get("dead_letter", {}).get("reason")
            if "numRecords" not in stats or reason_nulls is None:
                return None
            total += int(stats["numRecords"]) - int(reason_nulls)
    except FileNotFoundError:
        return None
    return total
