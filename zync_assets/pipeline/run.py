"""The continuous pipeline: ingest → ETL → to-kafka → tables for some specs, on one Spark session.

One pass runs every stage in order, each as soon as the one before committed:
ingest each raw pool of the specs, run each spec's ETL whose raw pools changed, sync
each output topic whose staging pool changed, apply each lake table whose pool changed.
A pass that finds nothing new costs a Kafka watermark query and a few directory
listings, no Spark job.

`zync run --follow --tables-loop` runs the lake tables in a loop of their own
(`split_off_tables`): a second pipeline on a second session of the same JVM, in its own
thread, so that a change on its way to the warehouse never waits behind a MERGE. Each
loop reads what the other committed; nothing else passes between them.

A following pipeline paces its lake tables (`paced_tables`): they get as long as the
pass's warehouse path took (at least TABLES_FLOOR_S), the ones applied longest ago first,
and the rest wait for the next pass, so that a pass over many tables never stands long
in front of the next change to the warehouse.

The lake tables with new events are applied together (tables/together.py: the small ones
by one shared Spark job, the big ones MERGEd one after another); `table_workers` > 1
applies them in chunks that many at a time, each on a session of its own
(`_in_parallel`), which paid off when every table's pass was a MERGE.

A failure is contained to what it concerns: one lake table, one spec's ETL, one pool's
sync or ingest (a bad column type, a rule that fails at run time). That one stops, is
reported with its one-line reason and recorded in the lake for `zync status` and
Dagster (failures.py), and is tried again after FAILED_RETRY_S; the rest of the
pass, and the warehouse path above all, goes on. Only an outage of Kafka or the registry
(`Unavailable`) stops the whole pass, which follow.py then retries.

Exactly once comes from the stages themselves (ingest's progress in the pool, ETL's
done records and cursors, to-kafka's position in the topic), not from this loop: a
pipeline may race another pipeline or a Dagster run on the same pools. When another
writer commits first, the stage writes nothing and the next pass continues from the
new state — never a duplicate, never a gap.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import queue
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol, TypeVar

from pyspark.sql import SparkSession

from zync_assets.codec.formats import WireFormat
from zync_assets.core.config import current
from zync_assets.core.errors import ConcurrentWriter, Unavailable, ZyncError
from zync_assets.core.settings import KafkaSettings
from zync_assets.etl.compile import CompiledRule, compile_rules
from zync_assets.etl.run import EtlResult, run_etl
from zync_assets.etl.state import read_state
from zync_assets.ingest.discovery import Changes, Discovery
from zync_assets.ingest.ingest import IngestResult, ingest
from zync_assets.ingest.shaper import Shaper
from zync_assets.kafka.registry import Registry
from zync_assets.lake.pools import pool_path, pool_version, table_path
from zync_assets.pipeline.failures import clear_failure, explain, record_failure
from zync_assets.pipeline.maintenance import Maintained, Maintenance
from zync_assets.spark.session import (
    end_lane_session,
    in_scheduler_pool,
    is_remote,
    lane_session,
    scheduler_pool,
    sized_work,
)
from zync_assets.specs.expiry import parse_expiry
from zync_assets.specs.ingested import mirrored
from zync_assets.specs.mirror import mirror_sources
from zync_assets.specs.model import Route, Spec
from zync_assets.tables.apply import TableResult, compile_tables
from zync_assets.tables.changes import CompiledTable
from zync_assets.tables.expand import lake_tables
from zync_assets.tables.together import Outcome, apply_tables
from zync_assets.tokafka.sync import SyncResult, sync_pool

T = TypeVar("T")

# With events pending on a time-based expire-after, ETL runs this often even when no
# raw pool changed, so that expiring events are done on time.
EXPIRY_CHECK_S = 10.0
# A table, spec or pool whose stage failed is tried again after this long (a cause outside
# zync may have gone; a wrong spec or column fails again, once a minute, not every pass).
FAILED_RETRY_S = 60.0

# Chunks of lake tables applied at a time, each on a session of its own (a MERGE's commit
# settings are its session's SQL conf). One: the small tables of a chunk are written by
# one shared job that keeps both cores busy (tables/rewrite.py), so a whole database's 60
# tables took 10.8-13.0 s a pass as one chunk and 10.9-12.8 s as four chunks two at a time,
# with 3 Spark jobs instead of 12 (2026-12-07, by hand with lake_stage_bench's passes).
# Two paid off when every table MERGEd: 70.9 s against 120.9 s for 60 tables of 200 new
# rows each (bench/table_pass_bench.py, bench/results/table_pass.json).
TABLE_WORKERS = 1
# The chunks of a tables stage per worker (see _chunks): fewer, the fewer scans of a pool;
# more, the evener the workers' ends.
TABLE_CHUNKS_PER_WORKER = 2

# With --follow, a pass's lake tables take at most as long as the warehouse path before
# it did (never less than this), and the tables left wait for the next pass, those
# applied longest ago first: on two cores, 60 tables' MERGEs (62 s of a 100 s pass under
# load, bench/results/real_database.json) would otherwise stand in front of every next
# change to the warehouse. A table not yet timed counts as TABLE_GUESS_S.
TABLES_FLOOR_S = 5.0
TABLE_GUESS_S = 1.0

# A pass's stages, in order; `Pipeline.stages` names those its passes run.
STAGES = ("ingest", "etl", "to-kafka", "tables", "maintenance")
LAKE_TABLES = ("tables", "maintenance")  # the tables' upkeep


class PipelineReporter(Protocol):
    """What a front end learns of each stage (the CLI prints it; Dagster records it)."""

    def ingested(self, result: IngestResult) -> None: ...

    def transformed(self, spec: Spec, result: EtlResult) -> None: ...

    def synced(self, spec: Spec, route: Route, result: SyncResult) -> None: ...

    def tabled(self, spec: Spec, result: TableResult) -> None: ...

    def conflicted(self, stage: str, message: str) -> None: ...

    def discovered(self, changes: Changes) -> None:
        """Topics a pool's patterns took that they had not, or no longer find."""

    def failed(self, what: str, message: str) -> None:
        """`what` (a table, a spec, a pool) failed and stops; the rest goes on."""

    def maintained(self, result: Maintained) -> None: ...

    def finished(self) -> None:
        """The pass is over: every stage that had work committed (or conflicted)."""

    def close(self) -> None:
        """The pipeline stops: write out anything still held."""


@dataclass
class PassResult:
    ingested: list[IngestResult] = field(default_factory=list)
    transformed: list[EtlResult] = field(default_factory=list)
    synced: list[SyncResult] = field(default_factory=list)
    tabled: list[TableResult] = field(default_factory=list)
    conflicts: int = 0
    failures: dict[str, str] = field(default_factory=dict)  # what → its one-line reason
    seconds: dict[str, float] = field(default_factory=dict)  # per stage: ingest, etl, to-kafka, …
    tables_waiting: int = 0  # lake tables with new events left for the next pass (paced)

    @property
    def did_work(self) -> bool:
        return (
            any(r.run is not None for r in self.ingested)
            or any(r.run is not None for r in self.transformed)
            or any(r.sent for r in self.synced)
            or any(r.run is not None for r in self.tabled)
        )


@dataclass
class Pipeline:
    """The stages of `specs` on `spark`; `pass_once()` runs each stage that has work."""

    spark: SparkSession
    specs: list[Spec]
    kafka: KafkaSettings
    registry: Registry
    shaper: Shaper | None = None
    max_records: int | None = None
    clock: Callable[[], float] = time.monotonic
    maintenance: Maintenance | None = None  # None: pools are left as committed
    stages: Sequence[str] = STAGES
    table_workers: int = TABLE_WORKERS  # lake tables applied at a time (1: one after another)
    # Lake tables paced to the warehouse path (TABLES_FLOOR_S): for passes that follow one
    # another; a single pass (and a loop of the tables alone) applies every one.
    paced_tables: bool = False
    # Delta versions each stage last saw of its input pools (None: not run yet).
    _etl_saw: dict[str, tuple[int | None, ...]] = field(default_factory=dict)
    _etl_pending_since: dict[str, float] = field(default_factory=dict)
    _sync_saw: dict[str, int | None] = field(default_factory=dict)  # staging pool -> version
    _sent: dict[str, int] = field(default_factory=dict)  # topic -> next staging offset to send
    _compiled: dict[str, list[CompiledRule]] = field(default_factory=dict)
    _table_saw: dict[str, int | None] = field(default_factory=dict)  # table -> its pool's version
    _tables: dict[str, dict[str, CompiledTable]] = field(default_factory=dict)  # by spec, name
    _retry_at: dict[str, float] = field(default_factory=dict)  # what failed → when to retry
    _cleared: set[str] = field(default_factory=set)  # failures this pipeline has cleared
    _discovery: Discovery | None = None
    _table_sessions: list[SparkSession] = field(default_factory=list)  # for table_workers
    _table_applied_at: dict[str, float] = field(default_factory=dict)  # table → clock()
    _table_seconds: dict[str, float] = field(default_factory=dict)  # table → its last pass
    _own_session: bool = False  # `spark` is a lane session this pipeline made (and ends)

    def pass_once(
        self, reporter: PipelineReporter, stop_requested: Callable[[], bool] = lambda: False
    ) -> PassResult:
        """Each stage in order. Once `stop_requested()` says so, no further stage starts:
        every stage commits whole, so the pass ends at its last commit and the next run
        starts from there (a pass over a backlog can take minutes; a stop should not)."""
        result = PassResult()
        runs: dict[str, Callable[[PipelineReporter, PassResult], bool]] = {
            "ingest": self._ingest,
            "etl": self._transform_all,
            "to-kafka": self._sync_all,
            "tables": self._apply_all_tables,
            "maintenance": self._maintain,
        }
        for stage in self.stages:
            if stop_requested():
                break
            started = self.clock()
            if runs[stage](reporter, result):
                result.seconds[stage] = self.clock() - started
        reporter.finished()
        return result

    def split_off_tables(self) -> Pipeline | None:
        """The lake tables of this pipeline as a pipeline of their own, on a second
        session of the same JVM (its own SQL conf), to run in a loop beside this one;
        this one keeps the warehouse path. None (and nothing changed) when the specs
        keep no lake tables."""
        if "tables" not in self.stages or not any(s.keeps_tables() for s in self.specs):
            return None
        self.stages = tuple(s for s in self.stages if s != "tables")
        spark = lane_session(self.spark)
        return Pipeline(
            spark, self.specs, self.kafka, self.registry, clock=self.clock,
            maintenance=self.maintenance.on(spark) if self.maintenance else None,
            stages=LAKE_TABLES, table_workers=self.table_workers, _own_session=True,
        )  # fmt: skip

    def close(self) -> None:
        """End the sessions this pipeline made for itself (its lake tables' workers, and
        its own when it was split off); the session it was given stays its caller's."""
        sessions, self._table_sessions = self._table_sessions, []
        if self._own_session:
            sessions.append(self.spark)
        for session in sessions:
            end_lane_session(session)

    def _transform_all(self, reporter: PipelineReporter, result: PassResult) -> bool:
        for spec in self.specs:
            if spec.transforms:
                self._transform(spec, reporter, result)
        return True

    def _sync_all(self, reporter: PipelineReporter, result: PassResult) -> bool:
        for spec in self.specs:
            expanded = mirrored(spec)
            sources = mirror_sources(expanded)
            for pool, routes in _routes_by_pool(expanded).items():
                self._sync(spec, pool, routes, sources, reporter, result)
        return True

    def _apply_all_tables(self, reporter: PipelineReporter, result: PassResult) -> bool:
        if not any(spec.keeps_tables() for spec in self.specs):
            return False
        # The tables' share of a paced pass: as long as the warehouse path before them.
        share_ends = self.clock() + max(TABLES_FLOOR_S, sum(result.seconds.values()))
        for spec in self.specs:
            self._apply_tables(spec, reporter, result, share_ends)
        return True

    def _maintain(self, reporter: PipelineReporter, result: PassResult) -> bool:
        """The upkeep due in the pools and tables this pass committed to (see
        maintenance.py); whether there was any."""
        if self.maintenance is None:
            return False
        committed = [
            (f"pool {r.pool}", pool_path(r.pool)) for r in result.ingested if r.run is not None
        ]
        committed += [
            (f"pool {r.pool}", pool_path(r.pool)) for r in result.transformed if r.run is not None
        ]
        committed += [(f"table {r.table}", table_path(r.table)) for r in result.tabled if r.run]
        maintained = False
        for name, path in dict.fromkeys(committed):
            done = _unless_raced(
                "maintenance", reporter, result, partial(self._upkeep, name, path, reporter)
            )
            if done is not None:
                reporter.maintained(done)
                maintained = True
        return maintained

    def _upkeep(self, name: str, path: str, reporter: PipelineReporter) -> Maintained | None:
        """Upkeep never stops the pipeline: its commits are whole either way (see
        maintenance.py), and the next pass's upkeep tries again."""
        assert self.maintenance is not None
        try:
            return self.maintenance.run_due(path)
        except Exception as exc:  # py4j and Delta errors alike
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            reporter.conflicted(
                "maintenance",
                f"{name}: {type(exc).__name__}: {first_line} (skipped; "
                "`zync pool maintain` shows it whole)",
            )
            return None

    def _ingest(self, reporter: PipelineReporter, result: PassResult) -> bool:
        if self._discovery is None:
            self._discovery = Discovery(self.specs, self.kafka, current().discovery_interval_s)
        pools, changes = self._discovery.pools()
        if changes:
            reporter.discovered(changes)
        every = [t for topics in pools.values() for t in topics]
        formats: dict[str, WireFormat] = {}
        for spec in self.specs:
            formats |= spec.formats(every)
        for pool, topics in pools.items():
            done = self._contained(f"pool {pool}", "ingest", reporter, result, partial(
                ingest, self.spark, pool, topics, self.kafka, self.registry, shaper=self.shaper,
                max_records=self.max_records, missing_ok=True, formats=formats,
            ))  # fmt: skip
            if done is None:
                continue
            result.ingested.append(done)
            reporter.ingested(done)
        return True

    def _transform(self, spec: Spec, reporter: PipelineReporter, result: PassResult) -> None:
        seen = tuple(pool_version(pool_path(p)) for p in spec.raw_pools())
        if seen == self._etl_saw.get(spec.name) and not self._expiry_due(spec):
            return
        results = self._contained(
            f"spec {spec.name}", "etl", reporter, result, lambda: self._etl(spec)
        )
        if results is None:
            return
        self._etl_saw[spec.name] = seen
        if any(r.pending for r in results):
            self._etl_pending_since.setdefault(spec.name, self.clock())
        else:
            self._etl_pending_since.pop(spec.name, None)
        for done in results:
            result.transformed.append(done)
            reporter.transformed(spec, done)

    def _etl(self, spec: Spec) -> list[EtlResult]:
        now = mirrored(spec)  # a mirror rule takes the topics ingested so far
        known = self._compiled.get(spec.name)
        if known is None or [c.rule for c in known] != now.transforms:  # checked once each
            self._compiled[spec.name] = compile_rules(self.spark, now)
        return run_etl(
            self.spark, now, now=dt.datetime.now(dt.UTC), compiled=self._compiled[spec.name]
        )

    def _expiry_due(self, spec: Spec) -> bool:
        """Events wait on a time-based expire-after, and the last check is old enough."""
        since = self._etl_pending_since.get(spec.name)
        timed = any(
            r.expire_after and parse_expiry(r.expire_after).seconds is not None
            for r in spec.transforms
        )
        if since is None or not timed or self.clock() - since < EXPIRY_CHECK_S:
            return False
        self._etl_pending_since[spec.name] = self.clock()
        return True

    def _sync(
        self, spec: Spec, pool: str, routes: list[Route], sources: dict[str, str],
        reporter: PipelineReporter, result: PassResult,
    ) -> None:  # fmt: skip
        """Sync a staging pool's routes: together when its outputs carry source
        transactions (tokafka/together.py), else topic by topic; a mirrored topic in its
        source's column types (`sources`)."""
        version = pool_version(pool_path(pool))
        if version is None or self._sync_saw.get(pool) == version:
            return  # no staging yet, or nothing committed since the last sync
        state = read_state(pool_path(pool), spec.name)
        formats = {r.topic: r.format.value for r in routes}  # a pool sent together: all
        # The topics with records this process has not sent (all, the first time): a
        # pool of many topics (a mirror's) sends the few a change touched.
        routes = [
            r for r in routes
            if r.topic not in self._sent or state.next_offsets.get(r.topic, 0) > self._sent[r.topic]
        ]  # fmt: skip
        if not routes:
            self._sync_saw[pool] = version
            return
        unsent = [
            state.next_offsets.get(r.topic, 0) - self._sent[r.topic]
            for r in routes
            if r.topic in self._sent
        ]
        with sized_work(self.spark, sum(unsent) if len(unsent) == len(routes) else None):
            done = self._contained(f"pool {pool}", "to-kafka", reporter, result, lambda: sync_pool(
                self.spark, pool, self.kafka, self.registry, topics=[r.topic for r in routes],
                formats=formats, sources=sources,
            ))  # fmt: skip
        if done is None:
            return
        self._sync_saw[pool] = version
        by_topic = {r.topic: r for r in routes}
        for synced in done:
            self._sent[synced.topic] = synced.next_offset
            result.synced.append(synced)
            if synced.topic in by_topic:
                reporter.synced(spec, by_topic[synced.topic], synced)

    def _apply_tables(
        self, spec: Spec, reporter: PipelineReporter, result: PassResult, share_ends: float
    ) -> None:
        tables = self._contained(
            f"spec {spec.name}", "tables", reporter, result, partial(self._lake_tables, spec)
        )
        if tables is None:
            return
        found, refused = tables
        for topic, why in refused.items():
            self._contained(f"table of {topic}", "tables", reporter, result, partial(_fail, why))
        versions: dict[str, int | None] = {}  # source pool → its version (tables share pools)
        due: list[tuple[CompiledTable, int]] = []
        for compiled in found:
            table = compiled.table
            if table.source_pool not in versions:
                versions[table.source_pool] = pool_version(pool_path(table.source_pool))
            version = versions[table.source_pool]
            if version is None or self._table_saw.get(table.name) == version:
                continue  # no pool yet, or nothing committed to it since the last pass
            if not self._waits_to_retry(f"table {table.name}"):
                due.append((compiled, version))
        if self.paced_tables:
            due, waiting = self._within_the_tables_share(due, share_ends - self.clock())
            result.tables_waiting += waiting
        applied = self._in_parallel([compiled for compiled, _ in due], dt.datetime.now(dt.UTC))
        for (compiled, version), outcome in zip(due, applied, strict=True):
            table = compiled.table
            self._table_applied_at[table.name] = self.clock()
            done = self._contained(f"table {table.name}", "tables", reporter, result, outcome)
            if done is None:
                continue
            self._table_saw[table.name] = version
            result.tabled.append(done)
            reporter.tabled(spec, done)

    def _within_the_tables_share(
        self, due: list[tuple[CompiledTable, int]], share: float
    ) -> tuple[list[tuple[CompiledTable, int]], int]:
        """The tables this pass applies — those applied longest ago first, as many as fit
        in `share` seconds by their last passes' (always one per worker, so that every
        table gets its turn) — and how many wait for the next pass."""
        workers = max(1, self.table_workers)
        oldest_first = sorted(
            due, key=lambda d: self._table_applied_at.get(d[0].table.name, float("-inf"))
        )
        spent, chosen = 0.0, 0
        for compiled, _ in oldest_first:
            cost = self._table_seconds.get(compiled.table.name, TABLE_GUESS_S) / workers
            if chosen >= workers and spent + cost > share:
                break
            spent, chosen = spent + cost, chosen + 1
        return oldest_first[:chosen], len(due) - chosen

    def _in_parallel(
        self, tables: list[CompiledTable], now: dt.datetime
    ) -> list[Callable[[], TableResult]]:
        """Each table's pass, as a call that gives its result or raises its error (for
        `_contained`, in this thread). The tables go in chunks, each chunk's new events
        read in one scan (tables/together.py); the chunks run `table_workers` at a time,
        each on a session of its own, before this returns: by the call itself when there
        is one chunk or one worker, or through Spark Connect (there a compiled table's
        DataFrames belong to the session that compiled them: the server keeps them per
        session; another session's MERGE fails with DATAFRAME_NOT_FOUND)."""
        workers = 1 if is_remote(self.spark) else max(1, self.table_workers)
        chunks = _chunks(tables, workers)
        if len(chunks) < 2 or workers < 2:
            outcomes = [o for chunk in chunks for o in self._timed(self.spark, chunk, now)]
            return [partial(_given, outcome) for outcome in outcomes]
        if not self._table_sessions:  # each its own SQL conf; the JVM and cache shared
            self._table_sessions = [lane_session(self.spark) for _ in range(workers)]
        free: queue.SimpleQueue[SparkSession] = queue.SimpleQueue()
        for session in self._table_sessions:
            free.put(session)
        pool = scheduler_pool(self.spark)  # the workers' jobs share the caller's pool

        def apply(chunk: list[CompiledTable]) -> list[Outcome]:
            session = free.get()
            try:
                if pool is not None:
                    in_scheduler_pool(session, pool)
                return self._timed(session, chunk, now)
            finally:
                free.put(session)

        with ThreadPoolExecutor(len(self._table_sessions), "zync-table") as pool_of_workers:
            # Each in a copy of this thread's context: the configuration in force (the lake).
            futures: list[Future[list[Outcome]]] = [
                pool_of_workers.submit(contextvars.copy_context().run, apply, chunk)
                for chunk in chunks
            ]
        return [partial(_given, outcome) for future in futures for outcome in future.result()]

    def _timed(
        self, spark: SparkSession, chunk: list[CompiledTable], now: dt.datetime
    ) -> list[Outcome]:
        """A chunk's passes, each table's share of its seconds kept for pacing
        (`_within_the_tables_share`)."""
        started = self.clock()
        try:
            return apply_tables(spark, chunk, now, self.registry)
        finally:
            share = (self.clock() - started) / max(1, len(chunk))
            for compiled in chunk:
                self._table_seconds[compiled.table.name] = share

    def _lake_tables(self, spec: Spec) -> tuple[list[CompiledTable], dict[str, str]]:
        """The spec's tables now (a pattern's grow as topics appear), each checked against
        Spark once; and the topics a pattern makes no table of, with why."""
        found = lake_tables(spec)
        known = self._tables.setdefault(spec.name, {})
        new = [t for t in found.tables if t.name not in known]
        if new:
            known |= {c.table.name: c for c in compile_tables(self.spark, spec, new)}
        return [known[t.name] for t in found.tables], found.refused

    def _contained(
        self, what: str, stage: str, reporter: PipelineReporter, result: PassResult,
        call: Callable[[], T],
    ) -> T | None:  # fmt: skip
        """`call()`'s result, or None when `what` (a table, a spec, a pool) failed or waits
        to be tried again after failing: the failure stops `what`, not the pass."""
        if self._waits_to_retry(what):
            return None
        try:
            done = _unless_raced(stage, reporter, result, call)
        except Unavailable:
            raise  # the whole pass waits for the service (follow.py)
        except Exception as exc:  # py4j, Spark and Delta errors alike
            if not self._spark_answers():
                raise  # not `what`'s failure: Spark itself is gone, and the process with it
            message = explain(exc)
            self._retry_at[what] = self.clock() + FAILED_RETRY_S
            result.failures[what] = message
            record_failure(what, message, dt.datetime.now(dt.UTC))
            reporter.failed(what, message)
            return None
        if what in self._retry_at or what not in self._cleared:
            clear_failure(what)  # once per pipeline, and after each recovery
            self._retry_at.pop(what, None)
            self._cleared.add(what)
        return done

    def _waits_to_retry(self, what: str) -> bool:
        """`what` failed, and FAILED_RETRY_S has not passed since."""
        return self.clock() < self._retry_at.get(what, float("-inf"))

    def _spark_answers(self) -> bool:
        """Whether the session still runs a job (a failure of one table or spec leaves it
        working; a dead JVM or Connect server does not)."""
        try:
            self.spark.range(1).count()
        except Exception:
            return False
        return True


def _chunks(tables: list[CompiledTable], workers: int) -> list[list[CompiledTable]]:
    """`tables` in order, cut in about TABLE_CHUNKS_PER_WORKER chunks per worker: each chunk
    reads its tables' events in one scan, and several chunks a worker even out the
    workers' ends (one slow table holds back its chunk only)."""
    if not tables:
        return []
    if workers < 2:  # one chunk: one scan of the pool, one shared write job
        return [tables]
    size = -(-len(tables) // (workers * TABLE_CHUNKS_PER_WORKER))
    return [tables[i : i + size] for i in range(0, len(tables), size)]


def _given(outcome: Outcome) -> TableResult:
    """A table's result, or its pass's error raised (as `_contained` takes it)."""
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


def _unless_raced(
    stage: str, reporter: PipelineReporter, result: PassResult, call: Callable[[], T]
) -> T | None:
    """`call()`'s result, or None when another writer committed first (reported; the next
    pass continues from the new state)."""
    try:
        return call()
    except ConcurrentWriter as exc:
        result.conflicts += 1
        reporter.conflicted(stage, str(exc))
        return None


def _fail(why: str) -> None:
    raise ZyncError(why)


def _routes_by_pool(spec: Spec) -> dict[str, list[Route]]:
    pools: dict[str, list[Route]] = {}
    for route in spec.outputs:
        pools.setdefault(route.pool, []).append(route)
    return pools
