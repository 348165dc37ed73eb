"""`zync pool ls|drop|maintain` and `zync query`."""

from __future__ import annotations

import json

import click

from zync_assets.core.errors import ZyncError
from zync_assets.lake import store as lake_store
from zync_assets.lake.pools import lake_dir, list_pools, pool_exists, pool_path, pool_version


@click.group()
def pool() -> None:
    """List, maintain or drop pools (Delta tables under $ZYNC_LAKE)."""


@pool.command("ls")
def pool_ls() -> None:
    """Pools with their latest Delta version."""
    for name in list_pools():
        click.echo(f"{name}  version {pool_version(pool_path(name)) or 0}")


@pool.command("drop")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def pool_drop(name: str, yes: bool) -> None:
    """Delete pool NAME and all its data."""
    path = pool_path(name)
    if not pool_exists(path):
        raise ZyncError(f"pool {name!r} does not exist in {lake_dir()}")
    if not yes and not _confirmed(f"Delete pool {name} ({path}) and all its data?"):
        raise ZyncError(f"pool {name} kept: not confirmed (--yes drops it without asking)")
    lake_store.delete_tree(path)
    click.echo(f"dropped pool {name}")


def _confirmed(question: str) -> bool:
    try:
        return click.confirm(question, default=False)
    except click.exceptions.Abort:  # end of input: no answer is no
        return False


@pool.command("maintain")
@click.argument("names", nargs=-1)
def pool_maintain(names: tuple[str, ...]) -> None:
    """Compact, carry writer states and vacuum pools NAMES (default: every pool).

    Safe beside running writers. `zync run --follow` does this by itself every
    --compact-every commits; see docs/operations.md#maintenance."""
    from zync_assets.pipeline.maintenance import maintain_pools
    from zync_assets.spark.session import spark_session

    chosen = names or list_pools()
    paths = [pool_path(name) for name in chosen]
    missing = [name for name, path in zip(chosen, paths, strict=True) if not pool_exists(path)]
    if missing:
        raise ZyncError(f"no such pool: {', '.join(missing)} (see `zync pool ls`)")
    for done in maintain_pools(spark_session(), paths):
        click.echo(f"{done.describe()} ({done.seconds:.1f}s)")


@click.command()
@click.argument("sql")
@click.option("--as-of", help="Read every pool and table as of this Delta version or time.")
def query(sql: str, as_of: str | None) -> None:
    """Run Spark SQL over the pools and lake tables (each is a view of its name) and
    print JSON lines."""
    from zync_assets.pipeline.query import check_as_of, run_query
    from zync_assets.spark.session import spark_session

    if as_of is not None:
        check_as_of(as_of)  # before Spark starts: a typo costs no JVM
    for row in run_query(spark_session(), sql, as_of):
        click.echo(json.dumps(row, ensure_ascii=False))
