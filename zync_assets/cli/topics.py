"""`zync ls`, `produce`, `consume`, `info`: Avro topics from the terminal."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, BinaryIO

import click

from zync_assets.core.config import current
from zync_assets.core.errors import ZyncError
from zync_assets.core.timeparse import parse_duration
from zync_assets.kafka.consume import Undecodable
from zync_assets.kafka.consume import consume as consume_topic
from zync_assets.kafka.offsets import topic_offsets
from zync_assets.kafka.produce import parse_lines
from zync_assets.kafka.produce import produce as produce_lines
from zync_assets.kafka.registry import Registry


def _read_schema(path: str | None) -> Any:
    if path is None:
        return None
    try:
        return json.loads(Path(path).read_text())
    except OSError as exc:
        raise ZyncError(f"cannot read schema file {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise ZyncError(f"schema file {path} is not JSON: {exc.msg} at line {exc.lineno}") from exc


@click.command()
def ls() -> None:
    """List registry subjects with their latest schemas."""
    registry = Registry(current().registry)
    for subject in sorted(registry.subjects()):
        latest = registry.latest(subject)
        click.echo(f"subject {subject}:")
        click.echo(f"  id {latest.schema_id}")
        click.echo(f"  version {latest.version}")
        click.echo(f"  schema {latest.schema.schema_str}")


@click.command()
@click.option("--topic", "-t", required=True, help="Topic to send to (created if missing).")
@click.option("--key-schema", type=click.Path(dir_okay=False), help="Avro schema (.avsc) of keys.")
@click.option(
    "--value-schema", type=click.Path(dir_okay=False), help="Avro schema (.avsc) of values."
)
@click.option("--partitions", default=1, show_default=True, help="Partitions if it is created.")
@click.argument("file", type=click.File("rb"), default="-")
def produce(
    topic: str, key_schema: str | None, value_schema: str | None, partitions: int, file: BinaryIO
) -> None:
    """Send JSON lines from FILE (or stdin) as Avro messages.

    A line {"key": K, "value": V} sends that key and value; any other line is the
    value itself with a null key. A null value is a tombstone. Without --*-schema
    the schema is inferred from all lines.
    """
    lines = parse_lines(file)
    result = produce_lines(
        topic,
        lines,
        current().kafka,
        Registry(current().registry),
        key_schema=_read_schema(key_schema),
        value_schema=_read_schema(value_schema),
        partitions=partitions,
    )
    click.echo(f"{result.messages} messages produced to topic {topic!r}", err=True)


@click.command()
@click.option("--topic", "-t", required=True, help="Topic to read.")
@click.option("--from-beginning", is_flag=True, help="Start at the earliest offset, not the end.")
@click.option("--exit-after", help="Stop when no message arrives for this long (e.g. 5s, 1m).")
@click.option("--metadata", is_flag=True, help="Add kafka {topic, partition, offset, timestamp}.")
def consume(topic: str, from_beginning: bool, exit_after: str | None, metadata: bool) -> None:
    """Print a topic's Avro messages as JSON lines {key, value}."""
    idle = parse_duration(exit_after) if exit_after else None
    undecodable = 0
    for record in consume_topic(
        current().kafka, Registry(current().registry), topic, from_beginning, idle, metadata
    ):
        if isinstance(record, Undecodable):
            undecodable += 1
            click.echo(
                f"zync: warning: {topic}/{record.partition}@{record.offset}: {record.error}",
                err=True,
            )
            continue
        sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    if undecodable:
        raise ZyncError(f"{undecodable} messages could not be decoded (see warnings above)")


@click.command()
@click.option("--topic", "-t", required=True, help="Topic to describe.")
def info(topic: str) -> None:
    """Low and high offsets per partition."""
    for part in topic_offsets(current().kafka, topic):
        click.echo(f"partition {part.partition} low {part.low} high {part.high}")
