"""Where every pool stands: lag, pending events, dead letters, unsent output records.

`zync status` prints it; the Dagster assets put the same figures in their metadata.
Lag is always "end − cursor" of one hop:

  raw pool        Kafka end offset        − the pool's ingest progress
  staging pool    raw pool's progress     − the ETL cursor (includes pending events)
  output topic    staging records         − records in the topic
  lake table      its source pool's end   − the table's cursor

Pending events, open transactions and dead letters come from what the last pass or copy
recorded in its commit (etl/state.py's PassFigures, ingest's dead-letter copies). While
events keep arriving (a running pipeline) the last pass's figures are as of that pass:
status says so (`as_of_last_pass`) beside the input lag, the events ingested since,
rather than start Spark to classify them again, which takes seconds to a minute. Only
`recount` (`zync status --recount`), or pools made before passes recorded figures,
count them now, with Spark.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zync_assets.core.offsets import Offsets
from zync_assets.core.settings import KafkaSettings
from zync_assets.etl.state import EtlState, PassFigures, pass_figures, read_state
from zync_assets.kafka.offsets import high_marks, watermarks
from zync_assets.lake.pools import (
    dead_letter_path,
    pool_exists,
    pool_path,
    pool_version,
    table_path,
)
from zync_assets.lake.progress import read_progress, recorded_dead_letters
from zync_assets.pipeline.failures import Failure, read_failure
from zync_assets.specs.model import Spec
from zync_assets.specs.tables import TableDef
from zync_assets.tables.expand import lake_tables
from zync_assets.tables.state import read_table_state, source_ends
from zync_assets.tokafka.position import topic_positions

if TYPE_CHECKING:  # Spark only where the pools' records cannot answer (`_counted`)
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    end: int
    cursor: int

    @property
    def lag(self) -> int:
        return max(self.end - self.cursor, 0)


@dataclass(frozen=True)
class RawStatus:
    pool: str
    partitions: list[PartitionLag]  # Kafka end offsets vs the pool's progress
    dead_letters: int
    exists: bool = True  # False: no pool in the lake yet (nothing ingested)

    @property
    def lag(self) -> int:
        return sum(p.lag for p in self.partitions)


@dataclass(frozen=True)
class OutputStatus:
    topic: str
    staged: int  # output records in the staging pool
    sent: int  # of those, how many the topic holds

    @property
    def lag(self) -> int:
        return max(self.staged - self.sent, 0)


@dataclass(frozen=True)
class StagingStatus:
    pool: str
    spec: str
    partitions: list[PartitionLag]  # raw pools' progress vs the ETL cursors
    pending: int
    oldest_pending: dt.datetime | None
    expired: int  # events that waited too long, copied to `<pool>_dlq`
    outputs: list[OutputStatus]
    exists: bool = True  # False: no pool in the lake yet (the ETL never committed)
    open_transactions: int = 0  # source transactions its gated rules wait on
    oldest_open_transaction: dt.datetime | None = None
    # The pending figures are the last pass's, and events came in since it read the raw
    # pools (the input lag counts them): they may wait too, or let waiting ones go.
    as_of_last_pass: bool = False

    @property
    def lag(self) -> int:
        return sum(p.lag for p in self.partitions)

    def oldest_pending_age(self, now: dt.datetime | None = None) -> dt.timedelta | None:
        if self.oldest_pending is None:
            return None
        return (now or dt.datetime.now(dt.UTC)) - self.oldest_pending


@dataclass(frozen=True)
class TableStatus:
    table: str
    source: str  # the topic whose events it applies
    source_pool: str
    stored_as: str  # scd1 | scd2
    version: int | None  # the table's newest version (None: no table yet)
    partitions: list[PartitionLag]  # the source pool's committed end vs the table's cursors
    failure: Failure | None = None  # its last pass failed (failures.py)

    @property
    def exists(self) -> bool:
        return self.version is not None

    @property
    def lag(self) -> int:
        return sum(p.lag for p in self.partitions)


# A SparkSession started by its first caller: what needs no Spark job (a project with no
# pool yet, cursors, offsets, lake tables) is answered without starting a JVM.
Session = Callable[[], "SparkSession"]


def dead_letter_count(spark: SparkSession, pool: str) -> int:
    """Rows in `<pool>_dlq`, counted: a Spark job."""
    path = dead_letter_path(pool)
    return spark.read.format("delta").load(path).count() if pool_exists(path) else 0


def raw_dead_letters(spark: Session, pool: str) -> int:
    """Rows in raw pool `pool`'s `<pool>_dlq`: as its copies recorded them, else counted."""
    recorded = recorded_dead_letters(pool)
    return recorded if recorded is not None else _dead_letters(spark, pool)


def _lags(end: Offsets, cursors: Offsets) -> list[PartitionLag]:
    return [
        PartitionLag(topic, partition, offset, cursors.get(topic, {}).get(partition, 0))
        for topic, parts in sorted(end.items())
        for partition, offset in sorted(parts.items())
    ]


def raw_status(spark: Session, kafka: KafkaSettings, pool: str, topics: list[str]) -> RawStatus:
    marks = watermarks(kafka, topics, missing_ok=True)
    end = high_marks(marks)
    path = pool_path(pool)
    progress = read_progress(path).offsets
    exists = pool_exists(path)
    return RawStatus(pool, _lags(end, progress), raw_dead_letters(spark, pool), exists)


def _dead_letters(spark: Session, pool: str) -> int:
    return dead_letter_count(spark(), pool) if pool_exists(dead_letter_path(pool)) else 0


def raw_progress_of(spec: Spec) -> Offsets:
    """The ingest progress of every raw pool the spec reads, for its input topics."""
    merged: Offsets = {}
    for pool, topics in spec.raw_pools().items():
        progress = read_progress(pool_path(pool)).offsets
        merged.update({t: dict(progress.get(t, {})) for t in topics})
    return merged


def input_lags(spec: Spec, pool: str, cursors: Offsets) -> list[PartitionLag]:
    """Per topic-partition the ETL of staging pool `pool` reads: events in the raw pools
    its cursors have not passed (a topic no rule reads is no part of it)."""
    progress = raw_progress_of(spec)
    return _lags({t: progress[t] for t in spec.etl_topics(pool) if t in progress}, cursors)


def staging_status(
    spark: Session, kafka: KafkaSettings, spec: Spec, pool: str, recount: bool = False
) -> StagingStatus:
    """Staging pool `pool` of `spec`: its inputs' lag, what waits and what it has sent;
    `recount`: count what waits now (Spark) when the last pass's figures are not current."""
    state = read_state(pool_path(pool), spec.name)
    outputs = output_statuses(kafka, pool, spec.staging_pools()[pool], state.next_offsets)
    current = current_figures(spec, pool, state)
    last = None if recount or current else pass_figures(state)
    figures = current or last
    return StagingStatus(
        pool=pool,
        spec=spec.name,
        partitions=input_lags(spec, pool, state.cursors),
        outputs=outputs,
        exists=pool_exists(pool_path(pool)),
        as_of_last_pass=last is not None,
        **(_recorded(figures, spark, pool) if figures else _counted(spark, spec, pool)),
    )


def current_figures(spec: Spec, pool: str, state: EtlState) -> PassFigures | None:
    """The last pass's figures, if it recorded them and no event came in since it read
    the raw pools (else the events it held back are not all there is)."""
    figures = pass_figures(state)
    if figures is None:
        return None
    progress = raw_progress_of(spec)
    for topic in spec.etl_topics(pool):
        seen = figures.raw_seen.get(topic, {})
        if any(end > seen.get(part, 0) for part, end in progress.get(topic, {}).items()):
            return None
    return figures


def _recorded(figures: PassFigures, spark: Session, pool: str) -> dict[str, Any]:
    expired = figures.expired_total
    return {
        "pending": figures.pending,
        "oldest_pending": figures.oldest_pending,
        "expired": expired if expired is not None else _dead_letters(spark, pool),
        "open_transactions": figures.open_transactions,
        "oldest_open_transaction": figures.oldest_open_transaction,
    }


def expired_total(spark: Session, spec: Spec, pool: str) -> int:
    """Events of `spec` that expired in staging pool `pool`: as its passes recorded them,
    else the rows of `<pool>_dlq`, counted."""
    figures = pass_figures(read_state(pool_path(pool), spec.name))
    if figures is not None and figures.expired_total is not None:
        return figures.expired_total
    return _dead_letters(spark, pool)


def _counted(spark: Session, spec: Spec, pool: str) -> dict[str, Any]:
    """The figures by classifying the pending events again: Spark jobs."""
    from zync_assets.etl.report import PendingView, pending_view  # imports PySpark

    ingested = any(pool_exists(pool_path(raw)) for raw in spec.raw_pools())
    # Nothing ingested yet: nothing can wait.
    view = pending_view(spark(), spec, pool) if ingested else PendingView([], [])
    waiting = view.events
    return {
        "pending": len(waiting),
        "oldest_pending": min((w.timestamp for w in waiting), default=None),
        "expired": _dead_letters(spark, pool),
        "open_transactions": len(view.transactions),
        "oldest_open_transaction": min((t.oldest for t in view.transactions), default=None),
    }


def table_status(spec: Spec, table: TableDef) -> TableStatus:
    """How far a lake table is behind its source pool, from commit files (no Spark job)."""
    path = table_path(table.name)
    state = read_table_state(path, table.name)
    ends = source_ends(spec, table) or {}
    return TableStatus(
        table.name, table.source, table.source_pool, table.stored_as, pool_version(path),
        _lags(ends, state.cursors), read_failure(f"table {table.name}"),
    )  # fmt: skip


def failures(specs: list[Spec]) -> list[Failure]:
    """What has failed and stopped in the pipelines of `specs` (tables, specs, pools), as
    their stages recorded it; empty when all is well."""
    names = [f"spec {spec.name}" for spec in specs]
    names += [f"pool {p}" for spec in specs for p in (*spec.raw_pools(), *spec.staging_pools())]
    for spec in specs:
        tables = lake_tables(spec)
        names += [f"table {t.name}" for t in tables.tables]
        names += [f"table of {topic}" for topic in tables.refused]
    return [found for what in dict.fromkeys(names) if (found := read_failure(what))]


def output_statuses(
    kafka: KafkaSettings, pool: str, topics: list[str], staged: dict[str, int]
) -> list[OutputStatus]:
    """Each output topic's staged and sent records: the watermarks of all in one request,
    where each topic stands from one read of all their tails."""
    marks = watermarks(kafka, topics, missing_ok=True)
    sent = topic_positions(kafka, pool, marks)
    return [OutputStatus(topic, staged.get(topic, 0), sent[topic]) for topic in topics]
