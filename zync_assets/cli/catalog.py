"""`zync catalog ls|sync|drop`: the lake's tables by name in the catalog (ZYNC_METASTORE)."""

from __future__ import annotations

import click

from zync_assets.core.config import current
from zync_assets.core.errors import ZyncError


@click.group()
def catalog() -> None:
    """List, register or drop the lake's entries in the catalog (ZYNC_METASTORE)."""


@catalog.command("ls")
@click.option("--pools", is_flag=True, help="Also the pools' database (<database>_pools).")
def catalog_ls(pools: bool) -> None:
    """The catalog database's tables, each with its location."""
    from zync_assets.pipeline.catalog import pools_catalog, require_catalog
    from zync_assets.spark.catalog import catalog_entries
    from zync_assets.spark.session import spark_session

    settings = require_catalog(current().catalog)
    spark = spark_session()
    for database in [settings, pools_catalog(settings)] if pools else [settings]:
        for name, location in catalog_entries(spark, database).items():
            click.echo(f"{database.database}.{name}  {location}")


@catalog.command("sync")
@click.option("--pools", is_flag=True, help="Also register every pool, in <database>_pools.")
@click.option("--prune", is_flag=True, help="Drop entries whose table the lake no longer has "
              "(the entry only: no file is deleted).")  # fmt: skip
def catalog_sync(pools: bool, prune: bool) -> None:
    """Register every lake table the catalog lacks (a lake made before it had a catalog);
    report entries whose table is gone."""
    from zync_assets.pipeline.catalog import require_catalog, sync_catalog
    from zync_assets.spark.session import spark_session

    done = sync_catalog(spark_session(), require_catalog(current().catalog), pools, prune)
    for name in done.registered:
        click.echo(f"registered {name}")
    for name in done.dropped:
        click.echo(f"dropped {name} (its table is no longer in the lake)")
    for name in done.stale:
        click.echo(f"stale {name}: its table is no longer in the lake (--prune drops the entry)")
    click.echo(f"{len(done.registered)} registered, {len(done.kept)} already there")


@catalog.command("drop")
@click.argument("name")
def catalog_drop(name: str) -> None:
    """Remove entry NAME (a table's name) from the catalog; the table's files stay."""
    from zync_assets.pipeline.catalog import require_catalog
    from zync_assets.spark.catalog import drop_entry, entry_location, metastore_errors
    from zync_assets.spark.session import spark_session

    settings = require_catalog(current().catalog)
    spark = spark_session()
    with metastore_errors(settings):
        held = entry_location(spark, settings, name)
    if held is None:
        raise ZyncError(f"the catalog has no {settings.database}.{name} (see `zync catalog ls`)")
    drop_entry(spark, settings, name)
    click.echo(f"dropped {settings.database}.{name} (its files stay)")
