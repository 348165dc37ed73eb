"""`zync stack up|down|status`."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from zync_assets.core.errors import ZyncError
from zync_assets.core.locations import state_dir
from zync_assets.spark.connect import SPARK_CONNECT_PORT
from zync_assets.stack.dagster import DAGSTER_PORT
from zync_assets.stack.kafka import SecurePorts
from zync_assets.stack.metastore import METASTORE_PORT, metastore_url
from zync_assets.stack.registry import registry_url
from zync_assets.stack.s3 import LAKE_BUCKET, s3_credentials_file, s3_endpoint
from zync_assets.stack.secure import SASL_USER, local_credentials, write_client_settings
from zync_assets.stack.services import (
    CdcPorts,
    StackPorts,
    stack_down,
    stack_status,
    stack_up,
)
from zync_assets.stack.spark_cluster import ClusterPorts, master_url
from zync_assets.stack.spark_server import spark_url

if TYPE_CHECKING:  # the stack's modules load when a command runs, not at start-up
    from zync_assets.stack.register import StackAddresses

_Command = TypeVar("_Command", bound=Callable[..., Any])


@click.group()
def stack() -> None:
    """Start, stop or show the local Kafka + schema registry (+ CDC services, Dagster); data
    in .zync/."""


@stack.command()
@click.option("--kafka-port", default=9092, show_default=True, help="Kafka listener port.")
@click.option("--controller-port", type=int, help="KRaft controller port [default: kafka+1].")
@click.option("--registry-port", default=8081, show_default=True, help="Schema registry port.")
@click.option("--management-port", type=int, help="Registry health port [default: registry+1].")
@click.option(
    "--secure", "with_secure", is_flag=True,
    help="Also open Kafka's SASL_SSL (PLAIN, SCRAM-SHA-256/512) and mutual-TLS listeners on "
    "kafka+2 and kafka+3, with a private CA and credentials made in .zync/secure/.",
)  # fmt: skip
@click.option(
    "--dagster", "with_dagster", is_flag=True,
    help="Also start `dagster dev` (webserver + daemon: sensors start the runs).",
)  # fmt: skip
@click.option("--dagster-port", default=DAGSTER_PORT, show_default=True, help="Dagster UI port.")
@click.option(
    "--cdc", "with_cdc", is_flag=True,
    help="Also start the CDC services: PostgreSQL source and warehouse clusters and a "
    "Kafka Connect worker with Debezium's PostgreSQL source and JDBC sink.",
)  # fmt: skip
@click.option("--source-db-port", default=CdcPorts.source_db, show_default=True,
              help="Source PostgreSQL port (wal_level=logical).")  # fmt: skip
@click.option("--warehouse-db-port", default=CdcPorts.warehouse_db, show_default=True,
              help="Warehouse PostgreSQL port (the JDBC sink's target).")  # fmt: skip
@click.option("--connect-port", default=CdcPorts.connect, show_default=True,
              help="Kafka Connect REST port.")  # fmt: skip
@click.option(
    "--spark-port",
    default=SPARK_CONNECT_PORT,
    show_default=True,
    help="Spark Connect server port: the warm Spark that Dagster's runs share.",
)
@click.option(
    "--no-spark",
    "without_spark",
    is_flag=True,
    help="Start no Spark Connect server: each run starts a local Spark.",
)
@click.option(
    "--spark-workers", default=0, show_default=True, type=click.IntRange(0, 8),
    help="Also start a Spark standalone cluster: a master and this many one-core workers, "
    "from PySpark's distribution (point commands at it with ZYNC_SPARK_MASTER).",
)  # fmt: skip
@click.option("--spark-master-port", default=ClusterPorts.master, show_default=True,
              help="The cluster master's port; its web UI is on --spark-master-ui-port, "
              "the workers on the ports after it.")  # fmt: skip
@click.option("--spark-master-ui-port", default=ClusterPorts.master_ui, show_default=True,
              help="The cluster master's web UI port.")  # fmt: skip
@click.option(
    "--s3", "with_s3", is_flag=True,
    help="Also start an S3 API server (S3Proxy) with a bucket `zync` kept in .zync/s3/; "
    "put the lake there with ZYNC_LAKE=s3a://zync/lake and the variables `up` prints.",
)  # fmt: skip
@click.option("--s3-port", default=9000, show_default=True, help="S3 API server port.")
@click.option(
    "--catalog", "with_catalog", is_flag=True,
    help="Also start the catalog's metastore (Derby's network server, kept in .zync/metastore/) "
    "and give the Spark Connect server its catalog: lake tables are registered by name with "
    "the ZYNC_METASTORE `up` prints.",
)  # fmt: skip
@click.option("--catalog-port", default=METASTORE_PORT, show_default=True,
              help="The metastore's port.")  # fmt: skip
@click.option("--follow", "follow", multiple=True, type=click.Path(dir_okay=False, exists=True),
              help="Also run `zync run SPEC --follow` as a service: the continuous pipeline "
              "of this spec (repeatable).")  # fmt: skip
def up(
    kafka_port: int,
    controller_port: int | None,
    registry_port: int,
    management_port: int | None,
    with_secure: bool,
    with_dagster: bool,
    dagster_port: int,
    with_cdc: bool,
    source_db_port: int,
    warehouse_db_port: int,
    connect_port: int,
    spark_port: int,
    without_spark: bool,
    spark_workers: int,
    spark_master_port: int,
    spark_master_ui_port: int,
    with_s3: bool,
    s3_port: int,
    with_catalog: bool,
    catalog_port: int,
    follow: tuple[str, ...],
) -> None:
    """Start Kafka, the registry and a Spark Connect server on 127.0.0.1 (and the CDC
    services, Dagster, the continuous pipeline) and wait until they answer."""
    started = time.monotonic()
    secure = SecurePorts(kafka_port + 2, kafka_port + 3) if with_secure else None
    ports = StackPorts(kafka_port, registry_port, controller_port, management_port, secure)
    cdc = CdcPorts(source_db_port, warehouse_db_port, connect_port) if with_cdc else None
    dagster = dagster_port if with_dagster else None
    specs = [Path(path) for path in follow]
    spark = None if without_spark else spark_port
    workers = tuple(spark_master_port + n for n in range(1, spark_workers + 1))
    cluster = ClusterPorts(spark_master_port, spark_master_ui_port, workers) if workers else None
    statuses = stack_up(
        ports, dagster_port=dagster, cdc=cdc, follow=specs, spark_port=spark,
        secure_registry=with_secure, cluster=cluster, s3_port=s3_port if with_s3 else None,
        metastore_port=catalog_port if with_catalog else None,
    )  # fmt: skip
    for status in statuses:
        click.echo(status.line())
    if secure is not None:
        _echo_secure_listeners(ports, secure)
    click.echo(f"stack is up ({time.monotonic() - started:.1f}s)")
    if with_s3:
        click.echo(f"the lake goes to the S3 server with: export ZYNC_LAKE=s3a://{LAKE_BUCKET}/lake "
                   f"ZYNC_S3_ENDPOINT={s3_endpoint(s3_port)}, and AWS_ACCESS_KEY_ID / "
                   f"AWS_SECRET_ACCESS_KEY from {s3_credentials_file(state_dir())}")  # fmt: skip
    if with_catalog:
        click.echo(f"lake tables are registered in the catalog with: export "
                   f"ZYNC_METASTORE='{metastore_url(catalog_port)}'")  # fmt: skip
    if cluster is not None:
        click.echo(f"zync commands run on the cluster with: export ZYNC_SPARK_MASTER="
                   f"{master_url(cluster.master)}")  # fmt: skip
    elif spark is not None and not os.environ.get("ZYNC_SPARK_MASTER"):
        click.echo(
            f"zync commands share its Spark with: export ZYNC_SPARK_MASTER={spark_url(spark)}"
        )


def _echo_secure_listeners(ports: StackPorts, secure: SecurePorts) -> None:
    """Where the secured listeners are, and client settings for each (no secret printed)."""
    credentials = local_credentials(state_dir())
    files = {
        "kafka-sasl_ssl.json": credentials.sasl_client_settings(f"127.0.0.1:{secure.sasl_ssl}"),
        "kafka-mtls.json": credentials.mtls_client_settings(f"127.0.0.1:{secure.mtls}"),
        "schema_registry.json": credentials.registry_client_settings(
            registry_url(ports.registry, secure=True)
        ),
    }
    saved = {name: write_client_settings(credentials, name, s) for name, s in files.items()}
    click.echo(
        f"kafka        SASL_SSL 127.0.0.1:{secure.sasl_ssl} (user {SASL_USER}: PLAIN, "
        f"SCRAM-SHA-256, SCRAM-SHA-512)  client settings {saved['kafka-sasl_ssl.json']}"
    )
    click.echo(f"kafka        SSL with a client certificate 127.0.0.1:{secure.mtls}  "
               f"client settings {saved['kafka-mtls.json']}")  # fmt: skip
    click.echo(f"registry     https with basic auth (user {SASL_USER})  "
               f"client settings {saved['schema_registry.json']}")  # fmt: skip
    click.echo(
        "  (copy them to resources/kafka.json and resources/schema_registry.json to use them; "
        "they hold the password: keep them 0600)"
    )


@stack.command()
def down() -> None:
    """Stop the services started by `zync stack up`."""
    stopped = stack_down()
    click.echo(f"stopped {', '.join(stopped)}" if stopped else "nothing was running")


@stack.command()
def status() -> None:
    """Show which services run, their PIDs, addresses and logs."""
    for service in stack_status():
        click.echo(service.line())


@stack.group()
def connector() -> None:
    """Register Debezium's source for your own tables, or the JDBC sink for output topics,
    on the stack's Kafka Connect (`zync stack up --cdc`)."""


def _addresses(
    source_port: int, warehouse_port: int, connect_port: int, registry_port: int
) -> StackAddresses:
    from zync_assets.stack.register import StackAddresses
    from zync_assets.stack.registry import registry_v2_url

    return StackAddresses(
        source_port, warehouse_port, f"http://127.0.0.1:{connect_port}",
        registry_v2_url(registry_port),
    )  # fmt: skip


_FORMAT = click.option("--format", "wire_format", type=click.Choice(["avro", "json"]),
                       default="avro", show_default=True,
                       help="Wire format: Avro through the stack's registry, or Connect JSON.")  # fmt: skip
_PORTS = [
    click.option("--source-db-port", default=CdcPorts.source_db, show_default=True),
    click.option("--warehouse-db-port", default=CdcPorts.warehouse_db, show_default=True),
    click.option("--connect-port", default=CdcPorts.connect, show_default=True),
    click.option("--registry-port", default=8081, show_default=True),
]


def _with_ports(command: _Command) -> _Command:
    for option in reversed(_PORTS):
        command = option(command)
    return command


@connector.command("source")
@click.argument("name")
@click.option(
    "--database", required=True, help="The source database (on the stack's source PostgreSQL)."
)
@click.option("--tables",
              help="Comma-separated schema.table names to capture, e.g. public.customers,public.accounts.")  # fmt: skip
@click.option("--schema", help="Capture every table of this schema instead, tables created "
              "later and truncates included, e.g. public.")  # fmt: skip
@click.option("--topic-prefix", help="Debezium's topic.prefix [default: NAME].")
@_FORMAT
@_with_ports
def connector_source(
    name: str, database: str, tables: str | None, schema: str | None, topic_prefix: str | None,
    wire_format: str, source_db_port: int, warehouse_db_port: int, connect_port: int,
    registry_port: int,
) -> None:  # fmt: skip
    """Capture TABLES of DATABASE with Debezium's PostgreSQL source named NAME: the
    connector's role, SELECT on the tables, a publication and a slot named after NAME, and
    the connector (resources/connect/postgres-source.json), waited on until it runs.
    Prints the topics, as a spec's inputs take them."""
    from zync_assets.stack.register import register_source

    if (tables is None) == (schema is None):
        raise ZyncError("give --tables (some tables) or --schema (all of a schema's)")
    at = _addresses(source_db_port, warehouse_db_port, connect_port, registry_port)
    listed = [t.strip() for t in (tables or "").split(",") if t.strip()]
    topics = register_source(at, name, database, listed, wire_format, topic_prefix, schema=schema)
    click.echo(f"connector {name} runs; its topics, for a spec's inputs:")
    for topic in topics:
        key = "topic" if schema is None else "topics"
        shown = topic if schema is None else f"'{topic}'"
        click.echo(f"  - {{{key}: {shown}, pool: Raw, format: {wire_format}}}")


@connector.command("sink")
@click.argument("name")
@click.option("--topics", help="Comma-separated output topics to upsert.")
@click.option("--topics-regex", help="Upsert every topic this matches instead, new ones "
              "included (Kafka Connect's topics.regex), e.g. 'warehouse_.*'.")  # fmt: skip
@_FORMAT
@_with_ports
def connector_sink(
    name: str, topics: str | None, topics_regex: str | None, wire_format: str,
    source_db_port: int, warehouse_db_port: int, connect_port: int, registry_port: int,
) -> None:  # fmt: skip
    """Upsert TOPICS into the stack's warehouse with Debezium's JDBC sink named NAME
    (resources/connect/jdbc-sink.json): a table per topic named after it, a tombstone
    deletes its row; waited on until it runs."""
    from zync_assets.stack.register import register_sink

    if (topics is None) == (topics_regex is None):
        raise ZyncError("give --topics (some topics) or --topics-regex (a pattern)")
    at = _addresses(source_db_port, warehouse_db_port, connect_port, registry_port)
    listed = [t.strip() for t in (topics or "").split(",") if t.strip()]
    register_sink(at, name, listed, wire_format, topics_regex=topics_regex)
    what = ", ".join(listed) or f"the topics matching {topics_regex}"
    click.echo(f"connector {name} runs: {what} → warehouse tables of those names")
