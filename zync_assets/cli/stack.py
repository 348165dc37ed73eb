"""`zync stack up|down|status`."""

from __future__ import annotations

import time

import click

from zync_assets.stack.services import StackPorts, stack_down, stack_status, stack_up


@click.group()
def stack() -> None:
    """Start, stop or show the local Kafka + schema registry (data under .zync/)."""


@stack.command()
@click.option("--kafka-port", default=9092, show_default=True, help="Kafka listener port.")
@click.option("--controller-port", type=int, help="KRaft controller port [default: kafka+1].")
@click.option("--registry-port", default=8081, show_default=True, help="Schema registry port.")
@click.option("--management-port", type=int, help="Registry health port [default: registry+1].")
def up(
    kafka_port: int, controller_port: int | None, registry_port: int, management_port: int | None
) -> None:
    """Start Kafka and the registry on 127.0.0.1 and wait until both answer."""
    started = time.monotonic()
    ports = StackPorts(kafka_port, registry_port, controller_port, management_port)
    for status in stack_up(ports):
        click.echo(status.line())
    click.echo(f"stack is up ({time.monotonic() - started:.1f}s)")


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
