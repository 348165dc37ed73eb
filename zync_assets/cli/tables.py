"""`zync table apply|rebuild|history|changes`: lake tables kept from pools (a spec's `tables:`)."""

from __future__ import annotations

import datetime as dt
import json

import click

from zync_assets.core.errors import ZyncError
from zync_assets.core.offsets import offsets_to_json
from zync_assets.lake.pools import pool_exists, table_path
from zync_assets.specs.model import load_spec
from zync_assets.tables.expand import lake_tables
from zync_assets.tables.state import table_history


@click.group()
def table() -> None:
    """Apply, and look back at, lake tables (SCD1 / SCD2; see docs/tables.md)."""


@table.command("apply")
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--table", "only", help="Only this table.")
def table_apply(specs: tuple[str, ...], only: str | None) -> None:
    """One pass of the tables of SPECS: their pools' new events, merged."""
    from zync_assets.core.config import current
    from zync_assets.kafka.registry import Registry
    from zync_assets.spark.session import spark_session
    from zync_assets.tables.apply import describe_table
    from zync_assets.tables.together import run_tables

    loaded = [load_spec(path) for path in specs]
    names = {t.name for spec in loaded for t in lake_tables(spec).tables}
    if not any(spec.keeps_tables() for spec in loaded):
        raise ZyncError(f"{', '.join(specs)}: no tables: section (see docs/tables.md)")
    if only is not None and only not in names:
        raise ZyncError(
            f"no table {only!r} in {', '.join(specs)} (it has {', '.join(sorted(names))})"
        )
    spark, registry = spark_session(), Registry(current().registry)
    for spec in loaded:
        for result in run_tables(spark, spec, registry, only=only):
            click.echo(describe_table(result))


@table.command("rebuild")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.argument("name")
def table_rebuild(spec: str, name: str) -> None:
    """Build table NAME of SPEC anew from its whole source pool, with the spec's columns
    as they are now (after a changed column list, or a column that could not be read).

    The table is replaced in place, in its own history (`zync table history` shows the
    rebuild; time travel reads what it was before); each source event is applied once."""
    from zync_assets.core.config import current
    from zync_assets.kafka.registry import Registry
    from zync_assets.pipeline.failures import clear_failure
    from zync_assets.spark.session import spark_session
    from zync_assets.tables.apply import describe_table, rebuild_table

    loaded = load_spec(spec)
    found = lake_tables(loaded).tables
    if name not in {t.name for t in found}:
        have = ", ".join(t.name for t in found) or "none"
        raise ZyncError(f"{spec}: no table {name!r} to rebuild (its tables: {have})")
    result = rebuild_table(spark_session(), loaded, name, Registry(current().registry))
    clear_failure(f"table {name}")
    click.echo(describe_table(result).replace(f"table {name}:", f"table {name}: rebuilt:", 1))


@table.command("history")
@click.argument("name")
@click.option("--format", "style", type=click.Choice(["table", "json"]), default="table",
              show_default=True)  # fmt: skip
def history(name: str, style: str) -> None:
    """Versions of table NAME: when, what, and the pass and offsets each applied."""
    path = _existing(name)
    for v in table_history(path, name):
        when = dt.datetime.fromtimestamp(v.timestamp / 1000, dt.UTC).isoformat(timespec="seconds")
        if style == "json":
            click.echo(json.dumps({
                "version": v.version, "timestamp": when, "operation": v.operation, "run": v.run,
                "applied_to": offsets_to_json(v.cursors), **v.counts,
            }))  # fmt: skip
            continue
        line = f"{v.version:>6}  {when}  {v.operation}"
        if v.run is not None:
            ends = ", ".join(
                f"{topic}[{p}] <{end}" for topic, parts in v.cursors.items()
                for p, end in sorted(parts.items())
            )  # fmt: skip
            line += f"  run {v.run}: {v.counts.get('upserts', 0)} upserts, "
            line += f"{v.counts.get('deletes', 0)} deletes; applied to {ends}"
        click.echo(line)


@table.command("changes")
@click.argument("name")
@click.option("--from", "start", type=int, required=True, help="First version (included).")
@click.option("--to", "end", type=int, help="Last version (included; default: the newest).")
def changes(name: str, start: int, end: int | None) -> None:
    """What changed in table NAME between two versions (Delta's change data feed), as JSON
    lines with _change_type (insert, update_preimage, update_postimage, delete)."""
    from zync_assets.pipeline.query import change_feed
    from zync_assets.spark.session import spark_session

    path = _existing(name)  # before Spark's start: a wrong name answers at once
    for row in change_feed(spark_session(), path, start, end):
        click.echo(json.dumps(row, ensure_ascii=False, default=str))


def _existing(name: str) -> str:
    path = table_path(name)
    if not pool_exists(path):
        raise ZyncError(f"table {name!r} does not exist in {path.rsplit('/', 1)[0]}")
    return path
