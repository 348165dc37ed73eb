"""`zync catalog`: the lake's tables (and, if asked, pools) registered in the catalog by
name, and entries whose table is gone found and, if asked, dropped.

Passes register their own table after each new table's first commit (tables/apply.py);
this registers a lake made before it had a catalog, or moved to another one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pyspark.sql import SparkSession

from zync_assets.core.errors import ZyncError
from zync_assets.core.settings import CatalogSettings
from zync_assets.lake.pools import list_pools, list_tables, pool_path, table_path
from zync_assets.spark.catalog import catalog_names, drop_entry, register_table

POOLS_SUFFIX = "_pools"  # pools go in their own database: a pool and a table may share a name


@dataclass
class CatalogSync:
    """What a sync did, by qualified name (`zync.orders`)."""

    registered: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # entries whose table is not in the lake
    dropped: list[str] = field(default_factory=list)


def pools_catalog(catalog: CatalogSettings) -> CatalogSettings:
    """Where pools are registered: database `<database>_pools`."""
    return replace(catalog, database=catalog.database + POOLS_SUFFIX)


def require_catalog(catalog: CatalogSettings) -> CatalogSettings:
    if not catalog.enabled:
        raise ZyncError(
            "no catalog: set ZYNC_METASTORE to the metastore's JDBC URL (`zync stack up "
            "--catalog` starts one and prints it); see docs/tables.md#a-catalog"
        )
    return catalog


def sync_catalog(
    spark: SparkSession, catalog: CatalogSettings, pools: bool = False, prune: bool = False
) -> CatalogSync:
    """Register every lake table (with `pools`, every pool too) that the catalog does not
    hold; entries of the database(s) whose table is gone are stale (`prune`: dropped)."""
    done = CatalogSync()
    wanted = [(catalog, {name: table_path(name) for name in list_tables()})]
    if pools:
        wanted.append((pools_catalog(catalog), {name: pool_path(name) for name in list_pools()}))
    for database, locations in wanted:
        for name, location in locations.items():
            qualified = f"{database.database}.{name}"
            fresh = register_table(spark, database, name, location)
            (done.registered if fresh else done.kept).append(qualified)
        in_lake = {n.lower() for n in locations}  # the metastore keeps names in lower case
        for name in catalog_names(spark, database):
            if name.lower() in in_lake:
                continue
            qualified = f"{database.database}.{name}"
            if prune:
                drop_entry(spark, database, name)
                done.dropped.append(qualified)
            else:
                done.stale.append(qualified)
    return done
