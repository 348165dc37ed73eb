"""`zync to-kafka`: staging pool → output topics, exactly once, once or continuously."""

from __future__ import annotations

import time

import click
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)

from zync_assets.cli.stages import graceful_stop
from zync_assets.codec.formats import OUTPUT_FORMATS
from zync_assets.core.config import current
from zync_assets.core.timeparse import parse_duration
from zync_assets.kafka.registry import Registry
from zync_assets.pipeline.follow import follow
from zync_assets.tokafka.sync import SyncResult


def describe(result: SyncResult) -> str:
    if not result.sent:
        return f"pool {result.pool} → {result.topic}: up to date at staging offset {result.next_offset}"
    return (
        f"pool {result.pool} → {result.topic}: sent {result.sent} records "
        f"(staging offsets {result.first_offset}..{result.next_offset - 1}); "
        f"high-water marks {result.high_water_before} → {result.high_water_after}"
    )


@click.command("to-kafka")
@click.option("--pool", "-p", required=True, help="Staging pool to send from.")
@click.option("--topic", "-t", "topics", multiple=True,
              help="Output topic to sync (repeatable); default: every topic the pool has records "
              "for. A pool with gated or txn rules sends all its topics, together.")  # fmt: skip
@click.option("--partitions", type=click.IntRange(min=1),
              help="Create missing topics with N partitions (records spread by key hash).")  # fmt: skip
@click.option("--transaction-size", type=click.IntRange(min=1), default=200_000, show_default=True,
              help="Records per Kafka transaction: what a crash rolls back and resends.")  # fmt: skip
@click.option("--format", "wire_format", type=click.Choice(OUTPUT_FORMATS), default="avro",
              show_default=True,
              help="Wire format: Confluent-framed Avro through the registry, or Kafka Connect's "
              "JSON envelope (schema + payload).")  # fmt: skip
@click.option("--follow", "keep_going", is_flag=True, help="Keep syncing as staging grows.")
@click.option(
    "--interval",
    default="5s",
    show_default=True,
    help="With --follow: longest wait between passes.",
)
@click.option("--exit-after", help="With --follow: stop once nothing new came for this long.")
def to_kafka(
    pool: str,
    topics: tuple[str, ...],
    partitions: int | None,
    transaction_size: int,
    wire_format: str,
    keep_going: bool,
    interval: str,
    exit_after: str | None,
) -> None:
    """Send staging output records to Kafka from each topic's last committed record on."""
    from zync_assets.spark.session import spark_session
    from zync_assets.tokafka.encode import require_staging
    from zync_assets.tokafka.sync import sync_pool

    require_staging(pool)  # before paying for Spark's start
    pause, idle = parse_duration(interval), parse_duration(exit_after) if exit_after else None
    kafka, registry = current().kafka, Registry(current().registry)
    started = time.monotonic()
    spark = spark_session()
    click.echo(f"spark ready ({time.monotonic() - started:.1f}s)", err=True)

    with _progress_bar() as bar, graceful_stop() as stop:
        tasks: dict[str, TaskID] = {}

        def show(topic: str, sent: int, total: int) -> None:
            if topic not in tasks:
                tasks[topic] = bar.add_task(topic, total=total)
            bar.update(tasks[topic], completed=sent, total=total)

        def run_once() -> list[SyncResult]:
            tasks.clear()
            chosen = list(topics)
            results = sync_pool(
                spark, pool, kafka, registry, chosen, partitions, show, transaction_size,
                default_format=wire_format,
            )  # fmt: skip
            if not results and not keep_going:
                bar.console.print(f"pool {pool}: no output records yet, nothing to send")
            return results

        follow(
            run_once,
            lambda result: bar.console.print(describe(result), soft_wrap=True),
            did_work=lambda result: result.sent > 0,
            interval=pause,
            idle_timeout=(idle if keep_going else 0.0),
            stop_requested=lambda: stop[0],
        )


def _progress_bar() -> Progress:
    return Progress(
        TextColumn("sending to {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        transient=True,
    )
