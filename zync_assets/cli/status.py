"""`zync status [SPEC...]`: lag, pending events and dead letters of every pool."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from zync_assets.core.config import current
from zync_assets.core.errors import ZyncError
from zync_assets.core.settings import SinkSettings
from zync_assets.ingest.discovery import topics_now
from zync_assets.lake.pools import lake_dir, pool_path
from zync_assets.pipeline.failures import Failure
from zync_assets.pipeline.sink_status import SinkStatus, sink_statuses
from zync_assets.pipeline.status import (
    RawStatus,
    StagingStatus,
    TableStatus,
    failures,
    raw_status,
    staging_status,
    table_status,
)
from zync_assets.specs.ingested import mirrored
from zync_assets.specs.model import Spec, find_specs, load_spec, project_spec_folder
from zync_assets.tables.expand import lake_tables

if TYPE_CHECKING:  # status starts Spark only when the pools' records cannot answer
    from pyspark.sql import SparkSession


def _spec_paths(paths: tuple[str, ...]) -> list[Path]:
    if paths:
        return [Path(p) for p in paths]
    folder = project_spec_folder()
    if folder is None:  # before any service is asked: there is nothing to report on
        raise ZyncError(
            f"no zync project in {Path.cwd()}: no SPECS named, no ./etl_specs and ZYNC_SPECS "
            "is not set; run this in your project's folder, name its spec files, or set ZYNC_SPECS"
        )
    found = find_specs(folder)
    if not found:
        raise ZyncError(f"no spec files in {folder.resolve()}: name them, or set ZYNC_SPECS")
    return found


def _age(delta: dt.timedelta | None) -> str:
    return "-" if delta is None else str(delta).split(".")[0]


def _pool_cell(pool: str, exists: bool) -> str:
    return pool if exists else f"{pool} (missing)"


def _table(title: str, columns: tuple[str, ...], left: tuple[str, ...]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in columns:
        # Cells wrap rather than cut a name short when the terminal is narrow.
        table.add_column(
            escape(column), justify="left" if column in left else "right", overflow="fold"
        )
    return table


def raw_table(statuses: list[RawStatus]) -> Table:
    table = _table(
        "raw pools: Kafka end offset − pool cursor",
        ("pool", "topic[partition]", "end", "cursor", "lag", "dead letters"),
        ("pool", "topic[partition]"),
    )
    for status in statuses:
        for i, part in enumerate(status.partitions or [None]):
            where = escape(f"{part.topic}[{part.partition}]") if part else "(no partitions yet)"
            cursor = str(part.cursor) if part and status.exists else "-"
            figures = [str(part.end), cursor, str(part.lag)] if part else ["-"] * 3
            dead = str(status.dead_letters) if i == 0 else ""
            pool = escape(_pool_cell(status.pool, status.exists)) if i == 0 else ""
            table.add_row(pool, where, *figures, dead)
    return table


def staging_table(statuses: list[StagingStatus]) -> Table:
    table = _table(
        "staging pools: raw pool cursor − ETL cursor",
        ("pool", "spec", "input lag", "pending", "oldest pending", "open txns", "expired"),
        ("pool", "spec"),
    )
    now = dt.datetime.now(dt.UTC)
    for status in statuses:
        oldest = status.oldest_open_transaction
        txns = f"{status.open_transactions} ({_age(now - oldest)})" if oldest else "0"
        mark = LAST_PASS_MARK if status.as_of_last_pass else ""
        table.add_row(
            escape(_pool_cell(status.pool, status.exists)), escape(status.spec),
            str(status.lag), f"{status.pending}{mark}", _age(status.oldest_pending_age()),
            txns, str(status.expired),
        )  # fmt: skip
    if any(s.as_of_last_pass for s in statuses):
        table.caption = (
            f"{LAST_PASS_MARK} as the last ETL pass left them; the input lag came in since "
            "(`zync status --recount` counts what waits now, with Spark)"
        )
    return table


LAST_PASS_MARK = "*"


def output_table(statuses: list[StagingStatus]) -> Table:
    table = _table(
        "output topics: staged output records − records sent",
        ("topic", "from pool", "staged", "sent", "unsent"),
        ("topic", "from pool"),
    )
    for status in statuses:
        for out in status.outputs:
            row = (out.topic, status.pool, str(out.staged), str(out.sent), str(out.lag))
            table.add_row(*(escape(cell) for cell in row))
    return table


def lake_table_table(statuses: list[TableStatus]) -> Table:
    table = _table(
        "lake tables: source pool end − table cursor",
        ("table", "kind", "source (pool)", "version", "lag"),
        ("table", "kind", "source (pool)"),
    )
    for status in statuses:
        version = "-" if status.version is None else str(status.version)
        name = status.table if status.exists else f"{status.table} (not yet)"
        table.add_row(
            escape(name + (" FAILING" if status.failure else "")),
            status.stored_as, escape(f"{status.source} ({status.source_pool})"), version,
            str(status.lag),
        )  # fmt: skip
    return table


def sink_table(sinks: list[SinkStatus]) -> Table:
    table = _table(
        "sinks: end offsets of their topics − their consumer group's",
        ("sink", "state", "tasks", "topics", "lag", "dead letters"),
        ("sink", "state", "tasks"),
    )
    for sink in sinks:
        tasks = " ".join(f"{t.id}:{t.state}" for t in sink.tasks) or "-"
        row = (sink.name, sink.state, tasks, str(len(sink.topics)), str(sink.lag),
               str(sink.dead_letters))  # fmt: skip
        table.add_row(*(escape(cell) for cell in row))
    return table


def read_sinks(settings: SinkSettings) -> tuple[list[SinkStatus], list[str]]:
    """The sinks' statuses and the lines that say what stops one; a Connect worker that
    does not answer for a named sink is such a line, not a failed `zync status`."""
    try:
        sinks = sink_statuses(settings, current().kafka)
    except ZyncError as exc:
        return [], [f"sinks {', '.join(settings.names)}: {exc}"]
    return sinks, [line for sink in sinks for line in sink.problems(settings.connect_url)]


def missing_note(raws: list[RawStatus], stagings: list[StagingStatus]) -> str | None:
    missing = [r.pool for r in raws if not r.exists] + [s.pool for s in stagings if not s.exists]
    if not missing:
        return None
    return (
        f"MISSING: no pool {', '.join(missing)} in {lake_dir()} yet: nothing was ingested or "
        "transformed into this lake (`zync run SPEC` does both), or ZYNC_LAKE should name "
        "another lake"
    )


def failure_lines(failing: list[Failure]) -> list[str]:
    return [f"FAILING: {f.what} (since {f.at:%Y-%m-%d %H:%M:%S} UTC): {f.message}" for f in failing]


def status_document(
    specs: list[Path], raws: list[RawStatus], stagings: list[StagingStatus],
    tables: list[TableStatus], failing: list[Failure], sinks: Sequence[SinkStatus] = (),
    sink_problems: Sequence[str] = (),
) -> dict[str, Any]:  # fmt: skip
    """The same figures as the tables, for `--format json`."""
    return {
        "lake": str(lake_dir()),
        "specs": [str(p.resolve()) for p in specs],
        "raw_pools": [
            {
                "pool": r.pool, "exists": r.exists, "path": pool_path(r.pool),
                "lag": r.lag, "dead_letters": r.dead_letters,
                "partitions": [
                    {"topic": p.topic, "partition": p.partition, "end": p.end,
                     "cursor": p.cursor if r.exists else None, "lag": p.lag}
                    for p in r.partitions
                ],
            }
            for r in raws
        ],
        "staging_pools": [
            {
                "pool": s.pool, "spec": s.spec, "exists": s.exists, "path": pool_path(s.pool),
                "input_lag": s.lag, "pending": s.pending,
                "oldest_pending_age_s": age.total_seconds()
                if (age := s.oldest_pending_age()) is not None else None,
                "open_transactions": s.open_transactions,
                "pending_as_of_last_pass": s.as_of_last_pass,
                "expired": s.expired,
                "outputs": [
                    {"topic": o.topic, "staged": o.staged, "sent": o.sent, "unsent": o.lag}
                    for o in s.outputs
                ],
            }
            for s in stagings
        ],
        "tables": [
            {
                "table": t.table, "stored_as": t.stored_as, "source": t.source,
                "source_pool": t.source_pool, "version": t.version, "lag": t.lag,
                "partitions": [
                    {"topic": p.topic, "partition": p.partition, "end": p.end,
                     "cursor": p.cursor, "lag": p.lag}
                    for p in t.partitions
                ],
            }
            for t in tables
        ],
        "sinks": [
            {
                "sink": k.name, "state": k.state, "topics": list(k.topics), "lag": k.lag,
                "dead_letter_topic": k.dead_letter_topic, "dead_letters": k.dead_letters,
                "newest_dead_letter": (
                    dataclasses.asdict(k.newest_dead_letter) if k.newest_dead_letter else None
                ),
                "oldest_waiting": dataclasses.asdict(k.oldest_waiting) if k.oldest_waiting else None,
                "stalled": k.stalled,
                "tasks": [{"id": t.id, "state": t.state, "reason": t.reason} for t in k.tasks],
            }
            for k in sinks
        ],
        "failing": [
            {"what": f.what, "message": f.message, "since": f.at.isoformat()} for f in failing
        ] + [{"what": "sink", "message": line, "since": None} for line in sink_problems],
    }  # fmt: skip


@click.command()
@click.argument("specs", nargs=-1, type=click.Path(dir_okay=False))
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "json"]),
    default=None,
    help="table (default on a terminal) or json (default when piped): one JSON document.",
)
@click.option(
    "--recount",
    is_flag=True,
    help="Count the events that wait now (starts Spark) where events came in since the "
    "last ETL pass; by default its figures are shown, marked as the pass's.",
)
@click.option(
    "--sink", "sinks", multiple=True, metavar="NAME",
    help="A sink connector to report on (repeatable; default $ZYNC_SINKS, else every sink "
    "connector of the Connect worker at $ZYNC_CONNECT_URL, if one answers).",
)  # fmt: skip
def status(
    specs: tuple[str, ...], output_format: str | None, recount: bool, sinks: tuple[str, ...]
) -> None:
    """Lag, pending events and dead letters of the pools of SPECS (default: every spec in
    $ZYNC_SPECS or ./etl_specs), in the lake $ZYNC_LAKE (default ./.zync/lake), and the
    state, lag and dead letters of the sinks that read the output topics."""
    settings = current().sinks
    if sinks:
        settings = dataclasses.replace(settings, names=sinks)
    paths = _spec_paths(specs)
    loaded = [mirrored(load_spec(p)) for p in paths]
    output_format = output_format or ("table" if sys.stdout.isatty() else "json")
    raws, stagings = _read_statuses(loaded, recount)
    tables = [table_status(spec, table) for spec in loaded for table in lake_tables(spec).tables]
    failing = failures(loaded)
    sink_list, sink_problems = read_sinks(settings)
    if output_format == "json":
        document = status_document(paths, raws, stagings, tables, failing, sink_list, sink_problems)
        click.echo(json.dumps(document, indent=2))
        return
    out = Console(highlight=False)
    # Paths are printed whole (the terminal folds them) so they can be copied as they are.
    out.print(f"lake   {escape(str(lake_dir()))}", soft_wrap=True)
    out.print(f"specs  {escape(', '.join(str(p.resolve()) for p in paths))}", soft_wrap=True)
    out.print(raw_table(raws))
    if stagings:
        out.print(staging_table(stagings))
        out.print(output_table(stagings))
    if tables:
        out.print(lake_table_table(tables))
    if sink_list:
        out.print(sink_table(sink_list))
    if (note := missing_note(raws, stagings)) is not None:
        out.print(escape(note))
    for line in [*failure_lines(failing), *(f"FAILING: {p}" for p in sink_problems)]:
        out.print(escape(line), soft_wrap=True)


def _read_statuses(
    loaded: list[Spec], recount: bool
) -> tuple[list[RawStatus], list[StagingStatus]]:
    settings = current().kafka
    reading = "reading cursors, Kafka offsets and pending events…"
    with Console(stderr=True).status(reading) as progress:

        @functools.cache
        def spark() -> SparkSession:  # only for dead letters and pending events
            from zync_assets.spark.session import spark_session

            progress.update("starting Spark to read the pools…")
            session = spark_session("zync-status")
            progress.update(reading)
            return session

        pools = topics_now(loaded, settings)
        raws = [raw_status(spark, settings, p, ts) for p, ts in pools.items()]
        stagings = [
            staging_status(spark, settings, spec, pool, recount)
            for spec in loaded
            for pool in spec.staging_pools()
        ]
    return raws, stagings
