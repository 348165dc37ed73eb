"""The lake's tables in a catalog: Spark's own Hive-compatible catalog, its metastore a
database that any number of processes share (the stack's Derby network server by default,
or PostgreSQL / MySQL), so that any Spark session configured for it reads a lake table by
name (`SELECT * FROM zync.orders`), as zync's own commands do.

A table is registered as an external Delta table (`CREATE TABLE … USING delta LOCATION
…`): the catalog holds its name and location only. Its schema, rows and history stay in
the table's Delta log, so a registration never goes stale as the table changes, and
dropping the entry (`DROP TABLE`) leaves the table's files alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from zync_assets.core.errors import ZyncError
from zync_assets.core.locations import jars_dir
from zync_assets.core.settings import CatalogSettings

CATALOG_FETCH_HINT = "fetch it with `zync jars --catalog` (in a checkout: scripts/install.sh)"
# (metastore, database, name, location) registered by this process: a pass registers its
# table once per process, not once per pass (a restart registers again: a no-op).
_REGISTERED: set[tuple[str, str, str, str]] = set()


def metastore_conf(catalog: CatalogSettings, lake: str) -> dict[str, str]:
    """The Spark properties of a session whose catalog is `catalog`'s Hive metastore.
    Static properties: a session takes them when it starts."""
    conf = {
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL": catalog.metastore,
        "spark.hadoop.javax.jdo.option.ConnectionDriverName": catalog.driver,
        # The metastore's own tables are made on first use; Hive's schema-version check
        # wants a schema made by Hive's tool instead.
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
        "spark.hadoop.hive.metastore.schema.verification": "false",
        # A metastore that is down is said in seconds, not after Hive's ten tries 2 s apart.
        "spark.hadoop.hive.hmshandler.retry.attempts": "2",
        "spark.hadoop.hive.hmshandler.retry.interval": "1s",
        # Where a database's folder goes (zync's tables keep their own locations).
        "spark.sql.warehouse.dir": f"{lake}/_catalog",
    }
    if catalog.metastore.startswith("jdbc:derby://"):
        # Hive's client loads the JDBC driver from the JVM's own class path, not from
        # spark.jars: the network client goes there.
        conf["spark.driver.extraClassPath"] = derby_client_jar()
    return conf


def derby_client_jar() -> str:
    found = sorted((jars_dir() / "catalog").glob("derbyclient-*.jar"))
    if not found:
        raise ZyncError(
            f"Derby's network client (the catalog's metastore driver) is missing from "
            f"{jars_dir() / 'catalog'}; {CATALOG_FETCH_HINT}"
        )
    return str(found[-1])


def register_table(spark: SparkSession, catalog: CatalogSettings, name: str, location: str) -> bool:
    """Register the Delta table at `location` as `<database>.<name>` (once per process);
    True when this call registered it. A name the catalog holds for another location is
    refused: the entry is someone else's."""
    memo = (catalog.metastore, catalog.database, name, location)
    if memo in _REGISTERED:
        return False
    with metastore_errors(catalog):
        spark.sql(f"CREATE DATABASE IF NOT EXISTS `{catalog.database}`")
        held = entry_location(spark, catalog, name)
        if held is None:
            spark.sql(
                f"CREATE TABLE IF NOT EXISTS {qualified(catalog, name)} USING delta "
                f"LOCATION '{_quoted(location)}'"
            )
        elif held.rstrip("/") != _uri(location):
            raise ZyncError(
                f"catalog entry {catalog.database}.{name} is the table at {held}, not this "
                f"lake's {location}: drop that entry (DROP TABLE {catalog.database}.{name}) or "
                "give this lake another ZYNC_CATALOG_DATABASE"
            )
    _REGISTERED.add(memo)
    return held is None


def catalog_names(spark: SparkSession, catalog: CatalogSettings) -> list[str]:
    """The catalog database's tables (none: no such database). Names only: a table's
    location is in its entry, which Delta's catalog reads with the table's log."""
    with metastore_errors(catalog):
        if not spark.catalog.databaseExists(catalog.database):
            return []
        return sorted(t.name for t in spark.catalog.listTables(catalog.database))


def catalog_entries(spark: SparkSession, catalog: CatalogSettings) -> dict[str, str]:
    """The catalog database's tables, each with its location."""
    names = catalog_names(spark, catalog)
    with metastore_errors(catalog):
        return {name: entry_location(spark, catalog, name) or "" for name in names}


def entry_location(spark: SparkSession, catalog: CatalogSettings, name: str) -> str | None:
    """Where entry `<database>.<name>` points (None: no such entry)."""
    try:
        rows = spark.sql(f"DESCRIBE TABLE EXTENDED {qualified(catalog, name)}").collect()
    except AnalysisException as exc:
        if "TABLE_OR_VIEW_NOT_FOUND" in str(exc) or "SCHEMA_NOT_FOUND" in str(exc):
            return None
        raise
    found = [row["data_type"] for row in rows if row["col_name"] == "Location"]
    return found[0] if found else ""


def drop_entry(spark: SparkSession, catalog: CatalogSettings, name: str) -> None:
    """Remove entry `<database>.<name>` from the catalog; the table's files stay."""
    with metastore_errors(catalog):
        spark.sql(f"DROP TABLE IF EXISTS {qualified(catalog, name)}")
    _REGISTERED.difference_update({m for m in _REGISTERED if m[1:3] == (catalog.database, name)})


def qualified(catalog: CatalogSettings, name: str) -> str:
    return f"`{catalog.database}`.`{name.replace('`', '``')}`"


def _quoted(location: str) -> str:
    return location.replace("\\", "\\\\").replace("'", "\\'")


def _uri(location: str) -> str:
    """How the metastore writes a location: a local folder as a file: URI."""
    location = location.rstrip("/")
    return f"file:{location}" if location.startswith("/") else location


@contextmanager
def metastore_errors(catalog: CatalogSettings) -> Iterator[None]:
    """Turns the metastore's failures (down, refused, a wrong URL) into one line that says
    which setting and what to do."""
    try:
        yield
    except ZyncError:
        raise
    except Exception as exc:
        text = str(exc)
        if "MetaStoreClient" not in text and "metastore" not in text.lower():
            raise
        raise ZyncError(
            f"the catalog's metastore at {catalog.metastore} (ZYNC_METASTORE) did not answer: "
            "start it (`zync stack up --catalog` starts the local one), or unset "
            "ZYNC_METASTORE to keep the lake without a catalog"
        ) from exc
