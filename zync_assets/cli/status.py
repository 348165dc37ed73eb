"""`zync status [SPEC...]`: lag, pending events and dead letters of every pool."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from zync_assets.errors import ZyncError
from zync_assets.etl.run import staging_pools
from zync_assets.settings import kafka_settings
from zync_assets.spec import Spec, all_raw_pools, find_specs, load_spec, spec_folder
from zync_assets.status import RawStatus, StagingStatus, raw_status, staging_status


def _specs(paths: tuple[str, ...]) -> list[Spec]:
    found = [Path(p) for p in paths] or find_specs(spec_folder())
    if not found:
        raise ZyncError(f"no spec files in {spec_folder()}: name them, or set ZYNC_SPECS")
    return [load_spec(p) for p in found]


def _age(delta: dt.timedelta | None) -> str:
    return "-" if delta is None else str(delta).split(".")[0]


def raw_table(statuses: list[RawStatus]) -> Table:
    table = Table(title="raw pools: Kafka end offset − pool cursor")
    for column in ("pool", "topic[partition]", "end", "cursor", "lag", "dead letters"):
        table.add_column(
            column, justify="left" if column in ("pool", "topic[partition]") else "right"
        )
    for status in statuses:
        for i, part in enumerate(status.partitions or [None]):
            where = escape(f"{part.topic}[{part.partition}]") if part else "(no partitions yet)"
            figures = [str(part.end), str(part.cursor), str(part.lag)] if part else ["-"] * 3
            dead = str(status.dead_letters) if i == 0 else ""
            table.add_row(status.pool if i == 0 else "", where, *figures, dead)
    return table


def staging_table(statuses: list[StagingStatus]) -> Table:
    table = Table(title="staging pools: raw pool cursor − ETL cursor; output records − sent")
    for column in ("pool (spec)", "input lag", "pending", "oldest pending", "expired",
                   "output topic", "staged", "sent", "unsent"):  # fmt: skip
        table.add_column(
            column, justify="left" if column in ("pool (spec)", "output topic") else "right"
        )
    for status in statuses:
        for i, out in enumerate(status.outputs):
            first = i == 0
            table.add_row(
                f"{status.pool} ({status.spec})" if first else "",
                str(status.lag) if first else "",
                str(status.pending) if first else "",
                _age(status.oldest_pending_age()) if first else "",
                str(status.expired) if first else "",
                out.topic, str(out.staged), str(out.sent), str(out.lag),
            )  # fmt: skip
    return table


@click.command()
@click.argument("specs", nargs=-1, type=click.Path(dir_okay=False))
def status(specs: tuple[str, ...]) -> None:
    """Lag, pending events and dead letters of the pools of SPECS (default: every spec in
    $ZYNC_SPECS or ./etl_specs)."""
    loaded = _specs(specs)
    progress = Console(stderr=True)
    with progress.status("starting Spark to read the pools…"):
        from zync_assets.spark import spark_session

        spark = spark_session("zync-status")
    settings = kafka_settings()
    with progress.status("reading cursors, Kafka offsets and pending events…"):
        raws = [raw_status(spark, settings, p, ts) for p, ts in all_raw_pools(loaded).items()]
        stagings = [
            staging_status(spark, settings, spec, pool)
            for spec in loaded
            for pool in staging_pools(spec)
        ]
    out = Console()
    out.print(raw_table(raws))
    if stagings:
        out.print(staging_table(stagings))
