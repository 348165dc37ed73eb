"""A user's own tables on the stack: Debezium's source for some tables of a database on the
stack's source PostgreSQL, and the JDBC sink for some output topics into its warehouse.

What `zync stack connector source|sink` does, and the demo and tests with it:

source  in the source database (as its owner, the stack's superuser): the connector's
        role `debezium` (LOGIN REPLICATION) unless it exists, SELECT on the tables, a
        publication named after the connector for exactly those tables (made here, so the
        role needs no ownership); then resources/connect/postgres-source.json with its
        placeholders filled, the slot named after the connector, registered with Connect
        (PUT: created, or its configuration changed), and waited on until it runs.
sink    resources/connect/jdbc-sink.json for the topics, upserting into the warehouse
        database (one table per topic, named after it), registered and waited on alike.

Both use the wire format's converter file (converter-avro.json with the registry's
Apicurio v2 API, or converter-json.json) for keys and values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from zync_assets.core.errors import ZyncError
from zync_assets.kafka.connect_api import ConnectApi
from zync_assets.stack import postgres
from zync_assets.stack.connectors import connector_config

CONNECTOR_ROLE = "debezium"
_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_TABLE = re.compile(r"^[a-z_][a-z0-9_]{0,62}\.[a-z_][a-z0-9_]{0,62}$")


@dataclass(frozen=True)
class StackAddresses:
    """Where the stack's CDC services answer (`zync stack up --cdc` ports)."""

    source_port: int
    warehouse_port: int
    connect_url: str
    registry_v2: str  # the registry's Apicurio v2 API, for the Avro converter


def check_name(kind: str, value: str) -> str:
    if not _IDENTIFIER.match(value):
        raise ZyncError(
            f"{kind} {value!r}: use a lower-case SQL identifier (letters, digits, _), as "
            "PostgreSQL names its slots and publications"
        )
    return value


def check_connector(name: str) -> str:
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$", name):
        raise ZyncError(f"connector name {name!r}: use letters, digits, '.', '_' and '-'")
    return name


def check_tables(tables: list[str]) -> list[str]:
    for table in tables:
        if not _TABLE.match(table):
            raise ZyncError(
                f"table {table!r}: name it schema.table in lower case, e.g. public.customers"
            )
    if not tables:
        raise ZyncError("no tables: name at least one, e.g. --tables public.customers")
    return tables


def register_source(
    at: StackAddresses, name: str, database: str, tables: list[str], wire_format: str,
    topic_prefix: str | None = None, publication: str | None = None,
    schema: str | None = None,
) -> list[str]:  # fmt: skip
    """Capture `tables` of `database` with connector `name` (or, with `schema`, every
    table of that schema, tables created later included); the topics it writes
    (`<topic prefix>.<schema>.<table>`, the prefix `name` unless given; for a schema, the
    pattern of them). The replication slot and the publication are named after the
    connector (`-` as `_`) unless given."""
    check_connector(name)
    if schema is None:
        check_tables(tables)
    else:
        check_name("schema", schema)
    prefix = topic_prefix or name
    publication = check_name("publication", publication or name.replace("-", "_"))
    _prepare_source(at.source_port, database, publication, tables, schema)
    config = connector_config(
        "postgres-source", wire_format, source_port=str(at.source_port), database=database,
        topic_prefix=prefix, slot=publication, publication=publication,
        tables=",".join(tables), registry_v2=at.registry_v2,
    )  # fmt: skip
    if schema is not None:  # the whole schema, and its truncates (Debezium skips them)
        del config["table.include.list"]
        config |= {"schema.include.list": schema, "skipped.operations": "none"}
    connect = ConnectApi(at.connect_url)
    connect.put(name, config)
    connect.wait_running(name)
    if schema is not None:
        return [f"{re.escape(prefix)}\\.{schema}\\..*"]
    return [f"{prefix}.{table}" for table in tables]


def _prepare_source(
    port: int, database: str, publication: str, tables: list[str], schema: str | None = None
) -> None:
    import psycopg

    listed = ", ".join(tables) if schema is None else f"ALL TABLES IN SCHEMA {schema}"
    published = f"TABLE {listed}" if schema is None else f"TABLES IN SCHEMA {schema}"
    try:
        with psycopg.connect(postgres.dsn(port, database), autocommit=True) as conn:
            conn.execute(f"""
                DO $$ BEGIN
                    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{CONNECTOR_ROLE}')
                    THEN CREATE ROLE {CONNECTOR_ROLE} LOGIN REPLICATION;
                    END IF;
                END $$
            """)  # fmt: skip
            conn.execute(f"GRANT SELECT ON {listed} TO {CONNECTOR_ROLE}")
            if schema is not None:  # and the tables created later
                conn.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} "
                             f"GRANT SELECT ON TABLES TO {CONNECTOR_ROLE}")  # fmt: skip
            exists = conn.execute(
                "SELECT 1 FROM pg_publication WHERE pubname = %s", [publication]
            ).fetchone()
            verb = "ALTER PUBLICATION {} SET" if exists else "CREATE PUBLICATION {} FOR"
            conn.execute(f"{verb.format(publication)} {published}")
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0]
        raise ZyncError(
            f"source database {database} on 127.0.0.1:{port}: {first} (are the tables there, "
            "and is the stack up with --cdc?)"
        ) from exc


def sink_dead_letters(name: str) -> str:
    """The topic where sink `name` puts the records it cannot write (not `warehouse_…`:
    a sink's own pattern must not take it)."""
    return f"dead-letters.{name}"


def register_sink(
    at: StackAddresses, name: str, topics: list[str], wire_format: str,
    database: str = postgres.WAREHOUSE.database, topics_regex: str | None = None,
) -> None:  # fmt: skip
    """Upsert `topics` (or every topic `topics_regex` matches, new ones included) into the
    warehouse `database` with connector `name`, a table per topic named after it; a
    tombstone deletes its row."""
    check_connector(name)
    if not topics and topics_regex is None:
        raise ZyncError("no topics: name at least one, e.g. --topics shop_invoices")
    config = connector_config(
        "jdbc-sink", wire_format, topics=",".join(topics), warehouse_port=str(at.warehouse_port),
        database=database, registry_v2=at.registry_v2, dead_letters=sink_dead_letters(name),
    )  # fmt: skip
    if topics_regex is not None:
        # A consumer finds the topics a pattern matches when it refreshes its metadata:
        # every 5 minutes by default, so a new table would wait that long to reach the
        # warehouse. Every 10 s, it waits about as long as zync's own discovery.
        del config["topics"]
        config |= {"topics.regex": topics_regex,
                   "consumer.override.metadata.max.age.ms": "10000"}  # fmt: skip
    connect = ConnectApi(at.connect_url)
    connect.put(name, config)
    connect.wait_running(name)
