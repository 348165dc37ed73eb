"""Entry point: the `zync` group, error handling, logging."""

from __future__ import annotations

import importlib
import logging
import os
import sys
from dataclasses import dataclass

import click

from zync_assets.core.config import ZyncConfig, in_force
from zync_assets.core.errors import ZyncError, first_line, storage_failure
from zync_assets.spark.jvm import QuietPy4J, jvm_lost


@dataclass(frozen=True)
class LazyCommand:
    """A command, imported only when it runs: `zync status` should not pay for PySpark's
    imports (1.5-3 s here), nor `zync --help` for any command's."""

    module: str
    name: str
    summary: str  # the first paragraph of the command's help, for `zync --help`

    def load(self) -> click.Command:
        command = getattr(importlib.import_module(self.module), self.name)
        assert isinstance(command, click.Command)
        return command


_TOPICS, _PIPELINE, _POOLS = (
    "zync_assets.cli.topics",
    "zync_assets.cli.stages",
    "zync_assets.cli.pools",
)
COMMANDS = {
    "stack": LazyCommand(
        "zync_assets.cli.stack", "stack",
        "Start, stop or show the local Kafka + schema registry (+ CDC services, Dagster); data "
        "in .zync/.",
    ),
    "ls": LazyCommand(_TOPICS, "ls", "List registry subjects with their latest schemas."),
    "produce": LazyCommand(
        _TOPICS, "produce", "Send JSON lines from FILE (or stdin) as Avro messages."
    ),
    "consume": LazyCommand(
        _TOPICS, "consume", "Print a topic's Avro messages as JSON lines {key, value}."
    ),
    "info": LazyCommand(_TOPICS, "info", "Low and high offsets per partition."),
    "from-kafka": LazyCommand(
        _PIPELINE, "from_kafka",
        "Ingest Kafka topics into raw pools, exactly once; continuous unless --once/--exit-after.",
    ),
    "etl": LazyCommand(
        _PIPELINE, "etl",
        "One ETL pass of SPEC (or, with --follow, one after another): raw pools → staging "
        "pools, outputs and done records in one commit.",
    ),
    "to-kafka": LazyCommand(
        "zync_assets.cli.tokafka", "to_kafka",
        "Send staging output records to Kafka from each topic's last committed record on.",
    ),
    "run": LazyCommand(
        "zync_assets.cli.run", "run",
        "Run SPECS' pipeline: ingest their topics, run their ETL, send their outputs to Kafka.",
    ),
    "status": LazyCommand(
        "zync_assets.cli.status", "status",
        "Lag, pending events and dead letters of the pools of SPECS (default: every spec in "
        "$ZYNC_SPECS or ./etl_specs), in the lake $ZYNC_LAKE (default ./.zync/lake), and the "
        "state, lag and dead letters of the sinks that read the output topics.",
    ),
    "query": LazyCommand(
        _POOLS, "query",
        "Run Spark SQL over the pools and lake tables (each is a view of its name) and print "
        "JSON lines.",
    ),
    "pool": LazyCommand(
        _POOLS, "pool", "List, maintain or drop pools (Delta tables under $ZYNC_LAKE)."
    ),
    "jars": LazyCommand(
        "zync_assets.cli.jars", "jars_command",
        "Fetch Delta Lake, Spark's Kafka source and Avro (with --s3, hadoop-aws and the AWS "
        "SDK; with --catalog, Derby's network client and server) with Maven into the jar "
        "cache, once.",
    ),
    "catalog": LazyCommand(
        "zync_assets.cli.catalog", "catalog",
        "List, register or drop the lake's entries in the catalog (ZYNC_METASTORE).",
    ),
    "table": LazyCommand(
        "zync_assets.cli.tables", "table",
        "Apply, and look back at, lake tables (SCD1 / SCD2; see docs/tables.md).",
    ),
}  # fmt: skip


class LazyGroup(click.Group):
    """A group that imports a command's module only to run it; its help lists the
    commands by their summaries."""

    _listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        lazy = COMMANDS.get(cmd_name)
        if lazy is None:
            return None
        return click.Command(cmd_name, help=lazy.summary) if self._listing else lazy.load()

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            self._listing = False


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="Show client logs (librdkafka, Spark).")
def zync(verbose: bool) -> None:
    """zync-assets: Kafka CDC → Delta Lake pools → Kafka, orchestrated by Dagster."""
    if verbose:  # read where the clients are made (settings.verbose), here and in subprocesses
        os.environ["ZYNC_VERBOSE"] = "1"
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not verbose:
        for handler in logging.getLogger().handlers:
            handler.addFilter(QuietPy4J())
    # The environment is read here, once: the command's stages read this configuration.
    click.get_current_context().with_resource(in_force(ZyncConfig.from_env()))


# What only the local stack and the demo import (the `stack` extra of pyproject.toml).
STACK_ONLY_MODULES = {"psycopg", "cryptography", "requests", "dagster_webserver"}


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; every failure is one line on stderr and a non-zero exit."""
    try:
        zync.main(args=argv, prog_name="zync", standalone_mode=False)
    except ZyncError as exc:
        click.echo(f"zync: error: {exc}", err=True)
        sys.exit(1)
    except click.exceptions.Abort:
        click.echo("zync: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        click.echo(f"zync: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("zync: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:
        if os.environ.get("ZYNC_DEBUG"):
            raise
        if isinstance(exc, ModuleNotFoundError) and exc.name in STACK_ONLY_MODULES:
            click.echo(
                f"zync: error: the local stack and the demo need {exc.name}, which a library "
                "install leaves out: pip install 'zync-assets[stack]'",
                err=True,
            )
            sys.exit(1)
        from zync_assets.spark.connect import connect_failure  # PySpark: only on a failure

        if (lost := connect_failure(exc)) is not None:  # the Spark Connect server went away
            click.echo(f"zync: error: {lost}", err=True)
            sys.exit(1)
        if (died := jvm_lost(exc)) is not None:  # a local Spark's JVM was killed
            click.echo(f"zync: error: {died}", err=True)
            sys.exit(1)
        if (refused := storage_failure(exc)) is not None:  # a full or read-only disk
            click.echo(f"zync: error: {refused}", err=True)
            sys.exit(1)
        click.echo(
            f"zync: internal error: {type(exc).__name__}: {first_line(exc)} "
            "(set ZYNC_DEBUG=1 for the traceback and please report it)",
            err=True,
        )
        sys.exit(2)


if __name__ == "__main__":
    main()
