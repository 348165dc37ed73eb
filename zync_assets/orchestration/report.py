"""`zync run` → Dagster: each pipeline commit recorded as its asset's materialization.

The metadata and checks are the ones a Dagster run records (the same functions build
them), so the lineage view, the assets' history and `zync status` stay true while a
pipeline runs outside Dagster. A pass's events are written when the pass ends, in
stage order (raw, staging and done, output topics): the automation sensor then sees
the downstream assets already up to date and starts no run that would race the pipeline.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

from dagster import (
    AssetCheckEvaluation,
    AssetCheckResult,
    AssetMaterialization,
    DagsterInstance,
    MaterializeResult,
)
from pyspark.sql import SparkSession

from zync_assets.etl.run import EtlResult
from zync_assets.ingest.discovery import Changes
from zync_assets.ingest.ingest import IngestResult
from zync_assets.orchestration.raw import raw_pool_materialization
from zync_assets.orchestration.staging import etl_materializations
from zync_assets.orchestration.tables import (
    pattern_materialization,
    table_failed,
    table_materialization,
)
from zync_assets.orchestration.tokafka import output_topic_materialization
from zync_assets.pipeline.maintenance import Maintained
from zync_assets.pipeline.run import PipelineReporter
from zync_assets.specs.model import Route, Spec
from zync_assets.tables.apply import TableResult
from zync_assets.tables.expand import lake_tables
from zync_assets.tokafka.sync import SyncResult

RunlessEvent = AssetMaterialization | AssetCheckEvaluation


def runless_events(results: Iterable[MaterializeResult | AssetCheckResult]) -> list[RunlessEvent]:
    events: list[RunlessEvent] = []
    for result in results:
        if isinstance(result, MaterializeResult):
            assert result.asset_key is not None
            events.append(AssetMaterialization(result.asset_key, metadata=result.metadata))
            events += runless_events(result.check_results or [])
        else:
            assert result.asset_key is not None and result.check_name is not None
            events.append(
                AssetCheckEvaluation(
                    asset_key=result.asset_key,
                    check_name=result.check_name,
                    passed=result.passed,
                    metadata=result.metadata,
                    severity=result.severity,
                )
            )
    return events


Builders = list[Callable[[], list[RunlessEvent]]]  # one pass's events, built when written


class _Writer:
    """One thread that builds and writes passes' events in the order they are queued, so
    the checks' Spark jobs overlap the next pass instead of delaying it."""

    def __init__(self, home: Path) -> None:
        self.instance = DagsterInstance.from_config(str(home))
        self._passes: queue.Queue[Builders | None] = queue.Queue()
        self._held: list[Builders] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._write, name="dagster-report", daemon=True)
        self._thread.start()

    def put(self, builders: Builders) -> None:
        """A pass of the warehouse path: written after the passes before it, then every
        held lake tables pass (each read commits no later than this pass's)."""
        with self._lock:
            if builders:
                self._passes.put(builders)
            for held in self._held:
                self._passes.put(held)
            self._held = []

    def hold(self, builders: Builders) -> None:
        """A lake tables pass: it may have read commits of a warehouse pass still under way,
        whose events are not queued yet. Written after that pass's (`put`), so that Dagster
        never sees a table newer than the pool it was applied from (the automation sensor
        would start a run to bring the table up to date)."""
        with self._lock:
            self._held.append(builders)

    def close(self) -> None:
        self.put([])
        self._passes.put(None)
        self._thread.join()

    def _write(self) -> None:
        while (builders := self._passes.get()) is not None:
            try:  # a pass's events are built first, then written together
                events = [event for build in builders for event in build()]
                for event in events:
                    self.instance.report_runless_asset_event(event)
            except Exception as exc:
                print(
                    f"zync: could not record a pass in Dagster ({type(exc).__name__}: {exc}); "
                    "the commits stand, and the next pass is recorded as usual",
                    file=sys.stderr,
                )


class _PatternPasses:
    """A pass's results of tables a pattern made, gathered into one materialization of
    the pattern's asset per pass."""

    def __init__(self) -> None:
        self._passes: dict[tuple[str, int], tuple[Spec, list[TableResult], dict[str, str]]] = {}

    def took(
        self, spec: Spec, table: str, result: TableResult | None = None, failure: str = ""
    ) -> bool:
        """Whether `table` (or `of <topic>`, a topic it makes no table of) is a pattern's
        of `spec`: then its result or failure is kept for the pattern's materialization."""
        if not spec.table_patterns or any(t.name == table for t in spec.tables):
            return False
        topic = table.removeprefix("of ") if table.startswith("of ") else None
        if topic is not None:
            number = next((n for n, p in enumerate(spec.table_patterns, 1)
                           if p.topics.matches(topic)), None)  # fmt: skip
        else:
            number = lake_tables(spec).made_by.get(table)
        if number is None:
            return False
        _, results, failures = self._passes.setdefault((str(spec.path), number), (spec, [], {}))
        if result is not None:
            results.append(result)
        else:
            failures[table] = failure
        return True

    def builders(self) -> Builders:
        found, self._passes = self._passes, {}
        return [
            partial(_pattern_events, spec, number, results, failures)
            for (_, number), (spec, results, failures) in found.items()
            if failures or any(r.run is not None for r in results)
        ]


def _pattern_events(
    spec: Spec, number: int, results: list[TableResult], failures: dict[str, str]
) -> list[RunlessEvent]:
    return runless_events([pattern_materialization(spec, number, results, failures)])


class DagsterReport:
    """A PipelineReporter that records commits in a Dagster instance (and passes them on).

    A pass's materializations and checks are built and written by one worker thread,
    passes whole and in order. `lake_tables()` reports a lake tables lane through the
    same worker. `close()` writes what is still queued."""

    def __init__(
        self, home: Path, session: SparkSession, then: PipelineReporter,
        specs: Iterable[Spec] = (), _writer: _Writer | None = None,
    ) -> None:  # fmt: skip
        self.session = session
        self.then = then  # the terminal's reporter
        self.specs = list(specs)  # whose table patterns' tables report to the pattern's asset
        self._writer = _writer or _Writer(home)
        self._held = _writer is not None  # a lane's passes wait for the warehouse path's
        self._home = home
        self._pass: Builders = []
        self._patterns = _PatternPasses()

    def lake_tables(self, session: SparkSession) -> DagsterReport:
        """The reporter of a lake tables lane (pipeline.split_off_tables) on `session`."""
        return DagsterReport(self._home, session, self.then, self.specs, _writer=self._writer)

    def ingested(self, result: IngestResult) -> None:
        self.then.ingested(result)
        if result.run is not None:
            self._pass.append(
                lambda: runless_events([raw_pool_materialization(self.session, result)])
            )

    def transformed(self, spec: Spec, result: EtlResult) -> None:
        self.then.transformed(spec, result)
        if result.run is not None:
            self._pass.append(
                lambda: runless_events(etl_materializations(self.session, spec, result))
            )

    def synced(self, spec: Spec, route: Route, result: SyncResult) -> None:
        self.then.synced(spec, route, result)
        if route not in spec.outputs:
            return  # a mirror's topic: its asset (kafka/<pool>_mirror) is a run's to record
        if result.sent:
            self._pass.append(lambda: runless_events([output_topic_materialization(spec, result)]))

    def tabled(self, spec: Spec, result: TableResult) -> None:
        self.then.tabled(spec, result)
        if self._patterns.took(spec, result.table, result=result):
            return
        if result.run is not None:
            self._pass.append(lambda: runless_events([table_materialization(result)]))

    def conflicted(self, stage: str, message: str) -> None:
        self.then.conflicted(stage, message)

    def discovered(self, changes: Changes) -> None:
        self.then.discovered(changes)

    def failed(self, what: str, message: str) -> None:
        self.then.failed(what, message)
        kind, _, name = what.partition(" ")
        if kind != "table":
            return
        if any(self._patterns.took(spec, name, failure=message) for spec in self.specs):
            return
        if not name.startswith("of "):  # its check fails in the UI until a pass applies it
            self._pass.append(lambda: [table_failed(name, message)])

    def maintained(self, result: Maintained) -> None:
        self.then.maintained(result)

    def finished(self) -> None:
        self.then.finished()
        self._pass += self._patterns.builders()
        if self._held:
            if self._pass:
                self._writer.hold(self._pass)
        else:
            self._writer.put(self._pass)
        self._pass = []

    def close(self) -> None:
        """The lane's own reporter closes nothing: the warehouse path's writes all."""
        if not self._held:
            self.then.close()
            self._writer.close()
