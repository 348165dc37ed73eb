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


def test_a_continuous_ingest_and_to_kafka_ride_out_a_broker_restart(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    """One restart under both: the ingest after its first commit, the to-kafka mid-send
    (a couple of its transactions are in)."""
    count, sent, size = 12_000, 60_000, 2000  # the to-kafka's 30 transactions
    produce_many(stack, topic, count, every_bad=1009)
    out = f"{topic}_out"
    write_outputs(spark, "SendOutage", out, sent)
    ensure_topic(stack.kafka, out)
    ingest = start([ZYNC, "from-kafka", "-t", topic, "-p", "Outage", "--max-records", "3000",
                    "--interval", "0.5s", "--exit-after", "5s"], stack.env())  # fmt: skip
    to_kafka = start([ZYNC, "to-kafka", "--pool", "SendOutage", "--transaction-size",
                      str(size), "--follow", "--interval", "0.5s", "--exit-after", "5s"],
                     stack.env())  # fmt: skip
    ingest.wait_for("run 1:")
    deadline = time.monotonic() + 120
    while _high_water(stack, out) < 2 * size:
        assert to_kafka.process.poll() is None and time.monotonic() < deadline, to_kafka.err
        time.sleep(0.05)
    with down(stack.stop_kafka, stack.start_kafka):
        ingest.wait_for("retrying in")
        to_kafka.wait_for("retrying in")
    assert_rode_it_out(ingest, "Kafka")
    assert_rode_it_out(to_kafka, "Kafka")
    assert any("run 2" in line for line in ingest.out), "the outage came after the last commit"
    assert_each_offset_once(spark, lake, "Outage", count)
    records = read_topic(stack, out)  # read_committed: an aborted transaction is hidden
    assert [r.key["ID"] for r in records] == list(range(sent))  # the key is the offset


def test_a_continuous_ingest_and_to_kafka_ride_out_a_registry_restart(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    """The registry gone before either looks a schema up (a process looks each up once;
    a to-kafka registers its schemas as a pass starts)."""
    count, sent = 10_000, 20_000
    produce_many(stack, topic, count)
    out = f"{topic}_out"
    write_outputs(spark, "RegSendOutage", out, sent)
    ensure_topic(stack.kafka, out)
    with down(stack.stop_registry, stack.start_registry):
        ingest = start([ZYNC, "from-kafka", "-t", topic, "-p", "RegOutage", "--max-records",
                        "2000", "--interval", "0.5s", "--exit-after", "5s"], stack.env())  # fmt: skip
        to_kafka = start([ZYNC, "to-kafka", "--pool", "RegSendOutage", "--follow", "--interval",
                          "0.5s", "--exit-after", "5s"], stack.env())  # fmt: skip
        ingest.wait_for("retrying in")
        to_kafka.wait_for("retrying in")
    assert_rode_it_out(ingest, "schema registry")
    assert_rode_it_out(to_kafka, "schema registry")
    assert_each_offset_once(spark, lake, "RegOutage", count)
    assert [r.key["ID"] for r in read_topic(stack, out)] == list(range(sent))


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
