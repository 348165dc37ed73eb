"""`zync run`: the whole pipeline of some specs (ingest → ETL → to-kafka) in one process."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import click

from zync_assets.cli.stages import describe, describe_etl, graceful_stop, spec_shaper
from zync_assets.cli.tokafka import describe as describe_sync
from zync_assets.core.config import current
from zync_assets.core.errors import ZyncError
from zync_assets.core.locations import state_dir
from zync_assets.core.timeparse import parse_duration
from zync_assets.etl.run import EtlResult
from zync_assets.ingest.discovery import Changes
from zync_assets.ingest.ingest import IngestResult
from zync_assets.ingest.shaper import Shaper
from zync_assets.kafka.registry import Registry
from zync_assets.lake.lease import PipelineLeases
from zync_assets.pipeline.follow import Lane, Turns, follow
from zync_assets.pipeline.maintenance import Maintained, Maintenance, MaintenancePolicy
from zync_assets.pipeline.run import FAILED_RETRY_S, PassResult, Pipeline, PipelineReporter
from zync_assets.pipeline.sink_watch import SinkWatch, output_topics
from zync_assets.specs.model import Route, Spec, load_spec
from zync_assets.stack.dagster import instance_home
from zync_assets.tables.apply import TableResult, describe_table
from zync_assets.tokafka.sync import SyncResult

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class PrintedReport:
    """Prints each commit (a pass that found nothing prints nothing)."""

    def ingested(self, result: IngestResult) -> None:
        if result.run is not None:
            click.echo(describe(result))

    def transformed(self, spec: Spec, result: EtlResult) -> None:
        if result.run is not None:
            click.echo(describe_etl(result))

    def synced(self, spec: Spec, route: Route, result: SyncResult) -> None:
        if result.sent:
            click.echo(describe_sync(result))

    def tabled(self, spec: Spec, result: TableResult) -> None:
        if result.run is not None:
            click.echo(describe_table(result))

    def conflicted(self, stage: str, message: str) -> None:
        click.echo(f"zync: {stage}: {message}; continuing from the new state", err=True)

    def discovered(self, changes: Changes) -> None:
        for line in changes.lines():
            click.echo(line)

    def failed(self, what: str, message: str) -> None:
        click.echo(
            f"zync: {what} failed and stops (tried again in {FAILED_RETRY_S:g}s; the rest "
            f"goes on): {message}",
            err=True,
        )

    def maintained(self, result: Maintained) -> None:
        click.echo(result.describe())

    def finished(self) -> None:
        pass

    def close(self) -> None:
        pass


@click.command("run")
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--follow", "keep_going", is_flag=True,
              help="Keep running: each stage as soon as the one before committed.")  # fmt: skip
@click.option("--interval", default="0.5s", show_default=True,
              help="With --follow: the wait after a pass that found nothing new.")  # fmt: skip
@click.option("--exit-after", help="With --follow: stop once nothing new came for this long.")
@click.option("--max-records", type=int, help="At most this many messages per ingest commit.")
@click.option("--compact-every", default=MaintenancePolicy.compact_every, show_default=True,
              help="Compact a pool (and carry its writers' states) after this many commits; "
              "0: never (leave it to `zync pool maintain`).")  # fmt: skip
@click.option("--tables-loop/--one-loop", default=False, show_default=True,
              envvar="ZYNC_TABLES_LOOP",
              help="With --follow: apply the lake tables in a loop of their own, beside "
              "the warehouse path, instead of after it in each pass (for spare cores: on "
              "2 cores one loop measured faster; docs/operations.md).")  # fmt: skip
@click.option("--dagster/--no-dagster", "to_dagster", default=None,
              help="Report each commit to the Dagster instance as a materialization "
              "[default: when $DAGSTER_HOME or the stack's instance exists].")  # fmt: skip
def run(
    specs: tuple[str, ...],
    keep_going: bool,
    interval: str,
    exit_after: str | None,
    max_records: int | None,
    compact_every: int,
    tables_loop: bool,
    to_dagster: bool | None,
) -> None:
    """Run SPECS' pipeline: ingest their topics, run their ETL, send their outputs to Kafka.

    One pass (or, with --follow, pass after pass) on one Spark session. Ctrl-C or
    SIGTERM finishes the current commit and exits 0."""
    loaded = [load_spec(path) for path in specs]
    if not any(spec.raw_pools() for spec in loaded):
        raise ZyncError("nothing to run: the specs have no inputs")
    pause, idle = parse_duration(interval), parse_duration(exit_after) if exit_after else None
    shaper = spec_shaper(None, specs)
    home = _dagster_home(to_dagster)  # both before paying for Spark's start
    leases = PipelineLeases(_pools(loaded), [spec.name for spec in loaded])
    for pool, other in leases.others():
        click.echo(f"zync: {other.describe()} feeds pool {pool} too; both stay exactly once, "
                   "but they race for each commit", err=True)  # fmt: skip
    leases.hold()  # from now: Dagster's sensors need not race a Spark that is starting
    try:
        # From before Spark starts: a SIGTERM while it starts stops after the first pass
        # too, with exit status 0, rather than killing a process half started.
        with graceful_stop() as stop:
            _run(stop, loaded, keep_going and tables_loop, keep_going, pause, idle, max_records,
                 compact_every, shaper, home)  # fmt: skip
    finally:
        leases.release()


def _say(message: str) -> None:
    click.echo(f"zync: {message}", err=True)


def _run(
    stop: list[bool],
    loaded: list[Spec],
    tables_loop: bool,
    keep_going: bool,
    pause: float,
    idle: float | None,
    max_records: int | None,
    compact_every: int,
    shaper: Shaper | None,
    home: Path | None,
) -> None:
    from zync_assets.spark.session import in_scheduler_pool, spark_session

    started = time.monotonic()
    spark = spark_session(long_lived=keep_going)
    click.echo(f"spark ready ({time.monotonic() - started:.1f}s)", err=True)
    pipeline = Pipeline(
        spark,
        loaded,
        current().kafka,
        Registry(current().registry),
        max_records=max_records,
        shaper=shaper,
        paced_tables=keep_going,  # a single pass applies every table before it exits
        maintenance=(
            Maintenance(spark, MaintenancePolicy(compact_every=compact_every))
            if compact_every > 0
            else None
        ),
    )
    # A pass runs every stage in order; --tables-loop runs the lake tables in a loop of
    # their own, so that the warehouse path never waits for a MERGE.
    tables = pipeline.split_off_tables() if tables_loop else None
    reporter, lane_reporter = _reporters(spark, home, tables.spark if tables else None, loaded)
    failures: dict[str, str] = {}

    turns = Turns()  # the tables loop yields to the warehouse path's passes
    # A continuous run restarts a sink of its outputs that has stalled (docs/debezium.md).
    watch = (
        SinkWatch(current().sinks, current().kafka, partial(output_topics, loaded), _say).start()
        if keep_going
        else None
    )

    def pass_of(
        stages: Pipeline, reporter: PipelineReporter, turn: Callable[[], AbstractContextManager]
    ) -> Callable[[], list[PassResult]]:
        def pass_once() -> list[PassResult]:
            with turn():
                result = stages.pass_once(reporter, stop_requested=lambda: stop[0])
            failures.update(result.failures)
            return [result]

        return pass_once

    lane = None
    if tables is not None:
        lane = Lane(
            "lake-tables", pass_of(tables, lane_reporter, nullcontext),
            partial(report_timing, lane="tables "), did_work=lambda result: result.did_work,
            interval=pause, stop_requested=lambda: stop[0],
            started=partial(in_scheduler_pool, tables.spark, "tables"), yield_to=turns,
        ).start()  # fmt: skip
    try:
        follow(
            pass_of(pipeline, reporter, turns.taking),
            report_timing,
            did_work=lambda result: result.did_work,
            interval=pause,
            idle_timeout=(idle if keep_going else 0.0),
            stop_requested=lambda: stop[0] or (lane is not None and lane.failed),
        )
    finally:
        if watch is not None:
            watch.stop()
        if lane is not None:  # the tables take what the warehouse path committed
            lane.finish()
            lane.join()
        reporter.close()
        for stages in (pipeline, tables):
            if stages is not None:
                stages.close()
    if failures and not keep_going:  # one pass: the exit status must say it
        what, message = next(iter(failures.items()))
        others = f" (and {len(failures) - 1} more, above)" if len(failures) > 1 else ""
        raise ZyncError(f"{what} failed{others}: {message}")


def report_timing(result: PassResult, lane: str = "") -> None:
    if result.did_work:
        stages = ", ".join(f"{stage} {seconds:.2f}s" for stage, seconds in result.seconds.items())
        waiting = (
            f"; {result.tables_waiting} lake tables wait for the next pass"
            if result.tables_waiting
            else ""
        )
        click.echo(f"{lane}pass: {sum(result.seconds.values()):.2f}s ({stages}){waiting}")


def _pools(specs: list[Spec]) -> set[str]:
    return {pool for spec in specs for pool in [*spec.raw_pools(), *spec.staging_pools()]}


def _dagster_home(to_dagster: bool | None) -> Path | None:
    """The instance to report to: None with --no-dagster, or when there is none."""
    home = instance_home(state_dir()) if to_dagster is not False else None
    if home is None and to_dagster:
        raise ZyncError(
            "--dagster: no Dagster instance (set DAGSTER_HOME, or start the stack with "
            "`zync stack up --dagster`)"
        )
    return home


def _reporters(
    spark: SparkSession, home: Path | None, lane: SparkSession | None, specs: list[Spec]
) -> tuple[PipelineReporter, PipelineReporter]:
    """The warehouse path's reporter and the lake tables lane's (on session `lane`): the
    terminal's is shared; Dagster's lane holds its passes until the warehouse path's
    commits they read are recorded."""
    printed = PrintedReport()
    if home is None:
        return printed, printed
    from zync_assets.orchestration.report import DagsterReport

    click.echo(f"reporting commits to the Dagster instance in {home}", err=True)
    reporter = DagsterReport(home, spark, printed, specs)
    return reporter, reporter.lake_tables(lane) if lane is not None else reporter
