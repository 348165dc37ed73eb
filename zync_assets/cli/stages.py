"""`zync from-kafka` and `zync etl`: the first two pipeline stages from the terminal."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from zync_assets.codec.formats import KEY_FORMATS, VALUE_FORMATS, WireFormat, wire_format
from zync_assets.core.config import current
from zync_assets.core.errors import ZyncError
from zync_assets.core.settings import KafkaSettings
from zync_assets.core.timeparse import parse_duration
from zync_assets.ingest.discovery import topics_now
from zync_assets.ingest.ingest import IngestResult, ingest
from zync_assets.ingest.shaper import Shaper
from zync_assets.kafka.registry import Registry
from zync_assets.pipeline.follow import follow
from zync_assets.specs.model import Spec, load_spec

if TYPE_CHECKING:  # PySpark and the ETL load when a command needs them
    from pyspark.sql import SparkSession

    from zync_assets.etl.run import EtlResult


def _routes(
    topic: str | None, pool: str | None, specs: list[Spec], kafka: KafkaSettings
) -> dict[str, list[str]]:
    """raw pool -> its topics now: --topic's, the specs' (patterns: as Kafka has them)."""
    if bool(topic) != bool(pool):
        raise ZyncError("give both --topic and --pool, or spec files")
    pools: dict[str, list[str]] = {pool: [topic]} if topic and pool else {}
    for name, topics in topics_now(specs, kafka).items():
        pools.setdefault(name, [])
        pools[name] += [t for t in topics if t not in pools[name]]
    if not pools:
        raise ZyncError("nothing to ingest: give --topic and --pool, or spec files with inputs")
    return pools


def _formats(
    topic: str | None, wire: WireFormat, specs: list[Spec], pools: dict[str, list[str]]
) -> dict[str, WireFormat]:
    """Each topic's wire format: the specs' routes and patterns, and --format/--key-format
    for --topic."""
    every = [t for topics in pools.values() for t in topics]
    formats: dict[str, WireFormat] = {}
    for spec in specs:
        formats |= spec.formats(every)
    if topic:
        formats[topic] = wire
    return formats


def spec_shaper(option: str | None, specs: tuple[str, ...]) -> Shaper | None:
    if option:
        return Shaper.from_file(option)
    shapers = {str(s.shaper) for s in map(load_spec, specs) if s.shaper}
    if len(shapers) > 1:
        raise ZyncError(f"the specs name different shapers ({', '.join(sorted(shapers))})")
    return Shaper.from_file(shapers.pop()) if shapers else None


def describe(result: IngestResult) -> str:
    if result.run is None:
        return f"pool {result.pool}: {result.note or 'nothing new'}"
    spans = ", ".join(f"{r.topic}[{r.partition}] {r.start}..{r.end - 1}" for r in result.ranges)
    return (
        f"pool {result.pool} run {result.run}: {result.rows} rows, "
        f"{result.dead_letters} dead letters ({spans})"
    )


@contextmanager
def graceful_stop() -> Iterator[list[bool]]:
    """First Ctrl-C/SIGTERM: finish the current commit, then stop. Second: stop now."""
    flag = [False]

    def handler(signum: int, _frame: object) -> None:
        if flag[0]:
            raise KeyboardInterrupt
        flag[0] = True
        click.echo("zync: stopping after the current commit (Ctrl-C again to abort)", err=True)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield flag
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@click.command("from-kafka")
@click.option("--topic", "-t", help="Topic to ingest (with --pool).")
@click.option("--pool", "-p", help="Raw pool to ingest into (with --topic).")
@click.option("--shaper", type=click.Path(dir_okay=False), help="SQL select list over envelopes.")
@click.option("--interval", default="5s", show_default=True, help="Longest wait between commits.")
@click.option("--max-records", type=int, help="At most this many messages per commit.")
@click.option("--exit-after", help="Stop once no new message arrived for this long (e.g. 5s).")
@click.option("--once", is_flag=True, help="One pass up to the current end offsets, then exit.")
@click.option("--format", "value_format", type=click.Choice(VALUE_FORMATS), default="avro",
              show_default=True,
              help="--topic's value format: Confluent-framed Avro, or Kafka Connect JSON.")  # fmt: skip
@click.option("--key-format", type=click.Choice(KEY_FORMATS),
              help="--topic's key format [default: the value's].")  # fmt: skip
@click.argument("specs", nargs=-1, type=click.Path(dir_okay=False))
def from_kafka(
    topic: str | None,
    pool: str | None,
    shaper: str | None,
    interval: str,
    max_records: int | None,
    exit_after: str | None,
    once: bool,
    value_format: str,
    key_format: str | None,
    specs: tuple[str, ...],
) -> None:
    """Ingest Kafka topics into raw pools, exactly once; continuous unless --once/--exit-after.

    Each spec route says its topic's formats (`format`, `key-format`); --format and
    --key-format say --topic's."""
    loaded = [load_spec(path) for path in specs]
    wire = wire_format(value_format, key_format)
    kafka, registry = current().kafka, Registry(current().registry)
    _routes(topic, pool, loaded, kafka)  # bad options fail before Spark starts
    the_shaper = spec_shaper(shaper, specs)
    from zync_assets.spark.session import spark_session

    started = time.monotonic()
    spark = spark_session()
    click.echo(f"spark ready ({time.monotonic() - started:.1f}s)", err=True)

    def run_once() -> list[IngestResult]:
        routes = _routes(topic, pool, loaded, kafka)  # a topic a pattern takes since: now too
        formats = _formats(topic, wire, loaded, routes)
        return [
            ingest(
                spark,
                name,
                topics,
                kafka,
                registry,
                shaper=the_shaper,
                max_records=max_records,
                missing_ok=bool(specs),
                formats=formats,
            )
            for name, topics in routes.items()
        ]

    with graceful_stop() as stop:
        follow(
            run_once,
            lambda result: click.echo(describe(result)),
            did_work=lambda result: result.run is not None,
            interval=parse_duration(interval),
            idle_timeout=0.0 if once else (parse_duration(exit_after) if exit_after else None),
            stop_requested=lambda: stop[0],
        )


def describe_etl(result: EtlResult) -> str:
    if result.run is None:
        return f"{result.spec} → {result.pool}: {result.note} ({result.pending} pending)"
    outputs = ", ".join(f"{n} to {t}" for t, n in result.outputs.items()) or "no outputs"
    return (
        f"{result.spec} → {result.pool} run {result.run}: read {result.read} pending events, "
        f"wrote {outputs} and {result.done} done records "
        f"({result.expired} expired, {result.unmatched} matched no rule); "
        f"{result.pending} left pending"
    )


@click.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--explain", is_flag=True, help="Show the compiled rules and cursors; run nothing.")
@click.option("--pending", is_flag=True, help="List the pending events with age and reason.")
@click.option("--follow", "keep_going", is_flag=True, help="Keep passing as the raw pools grow.")
@click.option("--interval", default="5s", show_default=True,
              help="With --follow: longest wait between passes.")  # fmt: skip
@click.option("--exit-after", help="With --follow: stop once a pass had nothing new this long.")
@click.option("--rebuild-view", "rebuild", multiple=True, metavar="TOPIC",
              help="Make the view writing TOPIC again from the raw pools in one pass; the "
              "sink gets only what differs. Repeatable.")  # fmt: skip
def etl(
    spec: str,
    explain: bool,
    pending: bool,
    keep_going: bool,
    interval: str,
    exit_after: str | None,
    rebuild: tuple[str, ...],
) -> None:
    """One ETL pass of SPEC (or, with --follow, one after another): raw pools → staging
    pools, outputs and done records in one commit."""
    from zync_assets.etl.run import run_etl
    from zync_assets.spark.session import spark_session

    the_spec = load_spec(spec)
    pause, idle = parse_duration(interval), parse_duration(exit_after) if exit_after else None
    the_spec.require_views(rebuild)  # before Spark starts
    spark = spark_session()
    if explain or pending:
        _report(spark, the_spec, explain)
        return
    if rebuild:
        for result in run_etl(spark, the_spec, rebuild=frozenset(rebuild)):
            click.echo(describe_etl(result))
        return
    with graceful_stop() as stop:
        follow(
            lambda: run_etl(spark, the_spec),
            lambda result: click.echo(describe_etl(result)),
            did_work=lambda result: result.run is not None,
            interval=pause,
            idle_timeout=(idle if keep_going else 0.0),
            stop_requested=lambda: stop[0],
        )


def _report(spark: SparkSession, spec: Spec, explain: bool) -> None:
    from zync_assets.etl.report import explain_spec, pending_report

    if explain:
        click.echo(explain_spec(spark, spec))
        return
    for line in pending_report(spark, spec):
        click.echo(line)
