"""Kafka and the registry going away under a continuous ingest and a continuous to-kafka:
each says it is retrying (with a bound), commits nothing half-way, and once the service is
back carries on — every record exactly once.

These stop and restart the session's own broker and registry (a clean shutdown, the same
ports and data afterwards), as an operator's restart or a managed service's failover does.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from zync_assets.kafka.clients import ensure_topic
from zync_assets_tests.conftest import (
    ZYNC,
    Stack,
    assert_each_offset_once,
    produce_many,
    read_topic,
)
from zync_assets_tests.support.pool_data import write_outputs
from zync_assets_tests.test_tokafka_faults import _high_water

pytestmark = [pytest.mark.integration, pytest.mark.slow]


class Lines:
    """A process's stderr and stdout lines as they come (read on threads)."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(stream, into), daemon=True)
            for stream, into in ((process.stdout, self.out), (process.stderr, self.err))
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream, into: list[str]) -> None:
        for line in stream:
            into.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.out + self.err):
            assert self.process.poll() is None, f"exited: {self.out} {self.err}"
            assert time.monotonic() < deadline, f"no {text!r} in {timeout}s: {self.out} {self.err}"
            time.sleep(0.1)

    def finish(self, timeout: float = 300) -> int:
        code = self.process.wait(timeout=timeout)
        for reader in self._readers:
            reader.join(timeout=10)
        return code


@contextmanager
def down(stop: Callable[[], None], start_again: Callable[[], None]) -> Iterator[None]:
    """A service stopped for the block's length, then started again (even on failure)."""
    stop()
    try:
        yield
    finally:
        start_again()


def start(command: list[str], env: dict[str, str]) -> Lines:
    process = subprocess.Popen(
        command, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    return Lines(process)


def assert_rode_it_out(run: Lines, service: str) -> None:
    """It exited 0, said what was unavailable and that it retries (with a bound), and said
    when it was back; no traceback."""
    code = run.finish()
    assert code == 0, run.err
    retries = [line for line in run.err if "retrying in" in line]
    assert retries and all(service in line and "for up to" in line for line in retries), run.err
    assert any("back after" in line for line in run.err), run.err
    assert not any("Traceback" in line or line.startswith("\tat ") for line in run.err), run.err


def test_a_continuous_ingest_rides_out_a_broker_restart(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    count = 12_000
    produce_many(stack, topic, count, every_bad=1009)
    command = [ZYNC, "from-kafka", "-t", topic, "-p", "Outage", "--max-records", "3000",
               "--interval", "0.5s", "--exit-after", "5s"]  # fmt: skip
    run = start(command, stack.env())
    run.wait_for("run 1:")  # a commit is in; then the broker goes away mid-stream
    with down(stack.stop_kafka, stack.start_kafka):
        run.wait_for("retrying in")
    assert_rode_it_out(run, "Kafka")
    assert any("run 2" in line for line in run.out), "the outage came after the last commit"
    assert_each_offset_once(spark, lake, "Outage", count)


def test_a_continuous_ingest_rides_out_a_registry_restart(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    count = 10_000
    produce_many(stack, topic, count)
    command = [ZYNC, "from-kafka", "-t", topic, "-p", "RegOutage", "--max-records", "2000",
               "--interval", "0.5s", "--exit-after", "5s"]  # fmt: skip
    # A process looks each schema up once: the registry is gone before the first lookup.
    with down(stack.stop_registry, stack.start_registry):
        run = start(command, stack.env())
        run.wait_for("retrying in")
    assert_rode_it_out(run, "schema registry")
    assert_each_offset_once(spark, lake, "RegOutage", count)


def test_a_continuous_to_kafka_rides_out_a_broker_restart_mid_send(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    count, size = 60_000, 2000  # 30 transactions
    write_outputs(spark, "SendOutage", topic, count)
    ensure_topic(stack.kafka, topic)
    command = [ZYNC, "to-kafka", "--pool", "SendOutage", "--transaction-size", str(size),
               "--follow", "--interval", "0.5s", "--exit-after", "5s"]  # fmt: skip
    run = start(command, stack.env())
    deadline = time.monotonic() + 120
    while _high_water(stack, topic) < 2 * size:  # a couple of transactions are in
        assert run.process.poll() is None and time.monotonic() < deadline, run.err
        time.sleep(0.05)
    with down(stack.stop_kafka, stack.start_kafka):
        run.wait_for("retrying in")
    assert_rode_it_out(run, "Kafka")
    records = read_topic(stack, topic)  # read_committed: an aborted transaction is hidden
    assert [r.key["ID"] for r in records] == list(range(count))  # the key is the offset


def test_a_continuous_to_kafka_rides_out_a_registry_outage(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    count = 20_000
    write_outputs(spark, "RegSendOutage", topic, count)
    ensure_topic(stack.kafka, topic)
    command = [ZYNC, "to-kafka", "--pool", "RegSendOutage", "--follow", "--interval", "0.5s",
               "--exit-after", "5s"]  # fmt: skip
    with down(stack.stop_registry, stack.start_registry):  # schemas register as a pass starts
        run = start(command, stack.env())
        run.wait_for("retrying in")
    assert_rode_it_out(run, "schema registry")
    assert [r.key["ID"] for r in read_topic(stack, topic)] == list(range(count))


def test_the_kept_kafka_client_says_in_one_line_that_its_broker_went_away_then_carries_on(
    stack: Stack, topic: str
) -> None:
    """The process's kept admin client (kafka/clients.py) over a broker restart: while it
    is down, a read is the one-line "cannot reach Kafka" error; once it is back, the same
    client answers again."""
    from zync_assets.core.errors import ZyncError
    from zync_assets.kafka import clients
    from zync_assets.kafka.offsets import watermarks

    ensure_topic(stack.kafka, topic)
    kept = clients.connected_admin(stack.kafka)
    with down(stack.stop_kafka, stack.start_kafka):
        with pytest.raises(ZyncError) as raised:
            watermarks(stack.kafka, [topic])
        said = str(raised.value)
        assert said.startswith(f"cannot reach Kafka at {stack.kafka.bootstrap_servers}"), said
        assert "\n" not in said, said
    assert [p.partition for p in watermarks(stack.kafka, [topic])[topic]] == [0]
    assert clients.connected_admin(stack.kafka) is kept
