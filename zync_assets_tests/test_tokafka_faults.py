"""to-kafka under kill -9 and a rival process: every staging record exactly once, in order."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from zync_assets.kafka.clients import admin_client, consumer, ensure_topic
from zync_assets.kafka.offsets import watermarks
from zync_assets_tests.conftest import ZYNC, Stack, read_topic, run_zync
from zync_assets_tests.support.pool_data import PER_TOPIC, write_outputs, write_outputs_together
from zync_assets_tests.support.process_tree import tree_states

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _high_water(stack: Stack, topic: str) -> int:
    return sum(p.high for p in watermarks(stack.kafka, [topic])[topic])


def _kill_once_past(proc: subprocess.Popen, stack: Stack, topic: str, mark: int) -> None:
    """kill -9 the run as soon as the topic's high-water mark passes `mark`: mid-send. One
    consumer polls every few milliseconds: a sync sends a transaction in tens of them."""
    reader = consumer(stack.kafka)
    try:
        deadline = time.monotonic() + 120
        while reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1] < mark:
            assert proc.poll() is None, "to-kafka ended before the kill: make the sync larger"
            assert time.monotonic() < deadline, "to-kafka sent nothing for 120 s"
            time.sleep(0.002)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        reader.close()


def test_kill_9_during_a_large_sync_then_resume_sends_each_record_once_in_order(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    count, size = 60_000, 4000  # 15 transactions (one partition)
    write_outputs(spark, "Big", topic, count)
    ensure_topic(stack.kafka, topic)
    env = stack.env(ZYNC_LAKE=str(lake))
    command = [ZYNC, "to-kafka", "--pool", "Big", "--transaction-size", str(size)]
    rng = random.Random(11)
    for attempt in range(2):
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)  # fmt: skip
        if attempt == 0:  # while Spark starts, reads the pool or encodes: nothing sent yet
            time.sleep(rng.uniform(3, 8))
            assert proc.poll() is None
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # after 1 to 3 transactions: the one open then is cut short
            mark = _high_water(stack, topic) + rng.randint(1, 3) * size + rng.randint(1, size)
            _kill_once_past(proc, stack, topic, mark)
        proc.wait()
    sent = read_topic(stack, topic, decode=False)
    assert 0 < len(sent) < count  # the kills cut the sync short; some of it is in
    done = run_zync(*command[1:], env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    records = read_topic(stack, topic)  # read_committed: aborted batches hidden
    assert [r.key["ID"] for r in records] == list(range(count))  # the key is the offset


def test_kill_9_while_a_pools_topics_are_read_in_one_job_then_resume_sends_each_once(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    """A pool of several topics whose schemas are registered (a mirror's steady state):
    one Spark job reads them all, then each topic is sent in its own transactions
    (tokafka/many_topics.py). A kill -9 inside the second topic's sends leaves the first
    whole, the second part-sent, the rest unsent; the rerun sends each record once."""
    topics = [f"{topic}_{n}" for n in range(4)]
    first, count, size = 10, 8_000, 500  # 16 transactions per topic after the first ten
    for name in topics:
        write_outputs(spark, "Many", name, first)
        ensure_topic(stack.kafka, name)
    env = stack.env(ZYNC_LAKE=str(lake))
    command = [ZYNC, "to-kafka", "--pool", "Many", "--transaction-size", str(size)]
    assert run_zync(*command[1:], env=env, timeout=600).returncode == 0  # registers schemas
    for name in topics:
        write_outputs(spark, "Many", name, count, first=first)
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    _kill_once_past(proc, stack, topics[1], _high_water(stack, topics[1]) + 3 * size + 1)
    proc.wait()
    sent = [len(read_topic(stack, name, decode=False)) for name in topics]
    assert sent[0] == first + count and first < sent[1] < first + count, sent  # it landed
    assert sent[2:] == [first, first], sent
    done = run_zync(*command[1:], env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    for name in topics:
        records = read_topic(stack, name)  # read_committed: the cut transaction is hidden
        assert [r.key["ID"] for r in records] == list(range(first + count)), name


def _end_offsets(admin: AdminClient, topic: str) -> tuple[int, int]:
    """The partition's end as a read_committed reader sees it (the last stable offset: an
    open transaction's records stay beyond it) and as a read_uncommitted one does."""
    partition = TopicPartition(topic, 0)
    ends = [
        admin.list_offsets({partition: OffsetSpec.latest()}, isolation_level=level)[partition]
        for level in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED)
    ]
    stable, high = (end.result(timeout=10).offset for end in ends)
    return stable, high


def _stop_inside_a_transaction(
    proc: subprocess.Popen, admin: AdminClient, topic: str, size: int
) -> int:
    """SIGSTOP the run's process group while a transaction of its is open and not yet
    whole: fewer of its `size` records on the broker (beyond the last stable offset) than
    it holds, checked once every process of the run is seen stopped, so that it cannot
    have asked for its commit (a stop inside the commit lets that transaction win, and
    nothing is left to fence). The partition's high-water mark then."""
    deadline = time.monotonic() + 120
    while True:
        assert proc.poll() is None, "to-kafka ended before it was stopped: make the sync larger"
        assert time.monotonic() < deadline, "no open transaction seen in 120 s"
        stable, high = _end_offsets(admin, topic)
        if 0 < high - stable < size:
            os.killpg(proc.pid, signal.SIGSTOP)
            _wait_stopped(proc)
            stable, high = _end_offsets(admin, topic)
            if 0 < high - stable < size:
                return high
            os.killpg(proc.pid, signal.SIGCONT)  # it sent the rest in between: try again
        time.sleep(0.002)


STOPPED = "TZX"  # stopped, or a child that has exited (a zombie its parent reaps later)


def _wait_stopped(proc: subprocess.Popen) -> None:
    """Until every process of `proc`'s tree (its Spark JVM too) is stopped (`T`), all in
    its process group: what a SIGSTOP to the group does, seen rather than assumed."""
    deadline = time.monotonic() + 10
    while True:
        states = tree_states(proc.pid)
        assert all(group == proc.pid for _, _, group, _ in states), f"outside its group: {states}"
        if all(state in STOPPED for _, state, _, _ in states):
            return
        assert time.monotonic() < deadline, f"not all stopped 10 s after SIGSTOP: {states}"
        time.sleep(0.001)


def test_a_second_to_kafka_fences_the_first_and_nothing_doubles(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    """The second run starts while the first holds an open transaction (the first is
    stopped there, seen from the topic's offsets): the second fences it, aborts that
    transaction and sends the rest; the first, resumed, says it was fenced and exits 1;
    the topic holds each record once, in order."""
    # A transaction of 50,000 records (about 6.5 MB) is 13 of the sender's 512 KiB
    # batches, and at most 5 are in flight: whenever one is open, most of it has not left
    # the process yet, so a stop anywhere in it holds. (6,000-record transactions left
    # the process in two batches within the producer's 20 ms linger: under load the stop
    # came too late for most of them, and a run could end before one was caught.)
    count, size = 200_000, 50_000
    write_outputs(spark, "Race", topic, count)
    ensure_topic(stack.kafka, topic)
    env = stack.env(ZYNC_LAKE=str(lake))
    command = [ZYNC, "to-kafka", "--pool", "Race", "--transaction-size", str(size)]
    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)  # fmt: skip
    admin = admin_client(stack.kafka)
    try:
        open_until = _stop_inside_a_transaction(first, admin, topic, size)
        second = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)  # fmt: skip
        # Its initTransactions fences the first: the coordinator aborts the first's open
        # transaction (an abort marker past it). Resumed then, the first finds out from the
        # broker, well within its own delivery and commit timeouts.
        deadline = time.monotonic() + 120
        while _end_offsets(admin, topic)[0] <= open_until:
            assert second.poll() is None, second.communicate()
            assert time.monotonic() < deadline, "the second run fenced nothing in 120 s"
            states = tree_states(first.pid)  # a full suite once found the first running on
            assert all(state in STOPPED for _, state, _, _ in states), f"resumed: {states}"
            time.sleep(0.05)
    finally:
        os.killpg(first.pid, signal.SIGCONT)
    out, err = first.communicate(timeout=600)
    assert second.wait(timeout=600) == 0, second.communicate()
    said = [line for line in err.splitlines() if line.startswith("zync")]  # not its timing
    assert first.returncode == 1 and len(said) == 1, f"stopped at {open_until}: {out} {err}"
    assert "took over (this producer was fenced)" in said[0], err
    stable, high = _end_offsets(admin, topic)
    assert stable == high  # nothing left open
    records = read_topic(stack, topic)
    assert [r.key["ID"] for r in records] == list(range(count))  # the key is the offset


def test_kill_9_while_a_pools_topics_go_together_leaves_whole_transactions_only(
    spark, stack: Stack, topic: str, lake: Path
) -> None:
    """A pool with source transactions (5 records in each of two topics per transaction)
    killed mid-send: what is committed holds the same transactions in both topics, whole;
    the rerun sends the rest, each record once, in order."""

    per_topic, size = 20_000, 4000  # the kill cuts it at most 1.5 transactions in
    topics = [f"{topic}_a", f"{topic}_b"]
    write_outputs_together(spark, "Both", topics, per_topic, 0, txn=True)
    for name in topics:
        ensure_topic(stack.kafka, name)
    env = stack.env(ZYNC_LAKE=str(lake))
    command = [ZYNC, "to-kafka", "--pool", "Both", "--transaction-size", str(size)]
    rng = random.Random(7)
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    mark = _high_water(stack, topics[0]) + rng.randint(1, 3) * size // 2 + rng.randint(1, 99)
    _kill_once_past(proc, stack, topics[0], mark)
    proc.wait()
    committed = [len(read_topic(stack, name, decode=False)) for name in topics]
    assert committed[0] == committed[1] and committed[0] % PER_TOPIC == 0, committed
    assert 0 < committed[0] < per_topic  # the kill cut the sync short
    done = run_zync(*command[1:], env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    for name in topics:
        records = read_topic(stack, name)  # read_committed: aborted batches hidden
        assert [r.key["ID"] for r in records] == list(range(per_topic))  # the key is the offset
