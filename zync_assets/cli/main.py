"""Entry point: the `zync` group, error handling, logging."""

from __future__ import annotations

import logging
import os
import sys

import click

from zync_assets.cli.pipeline import etl, from_kafka
from zync_assets.cli.pools import pool, query
from zync_assets.cli.run import run
from zync_assets.cli.stack import stack
from zync_assets.cli.status import status
from zync_assets.cli.tables import table
from zync_assets.cli.tokafka import to_kafka
from zync_assets.cli.topics import consume, info, ls, produce
from zync_assets.errors import ZyncError, first_line, storage_failure
from zync_assets.spark_connect import connect_failure
from zync_assets.spark_jvm import QuietPy4J, jvm_lost


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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


for command in (
    stack,
    ls,
    produce,
    consume,
    info,
    from_kafka,
    etl,
    to_kafka,
    run,
    status,
    query,
    pool,
    table,
):
    zync.add_command(command)


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
