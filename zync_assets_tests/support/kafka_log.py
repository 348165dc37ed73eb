"""What the broker itself recorded: the Kafka transactions that committed, read from its
transaction log (`__transaction_state`) with Kafka's own DumpLogSegments tool.

A consumer cannot tell whether two topics' records were sent in one Kafka transaction
or in two back to back: by the time it reads, both are committed. The transaction
coordinator's log can: each commit is a PrepareCommit record that names every
partition the transaction wrote.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from zync_assets.stack.java import find_java
from zync_assets.stack.kafka import _kafka_command

if TYPE_CHECKING:
    from zync_assets_tests.conftest import Stack

PREPARE_COMMIT = 2  # Kafka's TransactionState ids: 0 Empty, 1 Ongoing, 2 PrepareCommit, …


def committed_transactions(home: Path, topics: set[str]) -> list[set[str]]:
    """The partitions (`topic-partition`) of each committed transaction that wrote to any
    of `topics`, in commit order, from the stack at `home`."""
    java = find_java(17, "Kafka", "ZYNC_KAFKA_JAVA_HOME")
    segments = sorted((home / "kafka" / "data").glob("__transaction_state-*/*.log"))
    command = _kafka_command(
        java, home, "kafka.tools.DumpLogSegments", "--transaction-log-decoder",
        "--files", ",".join(str(s) for s in segments),
    )  # fmt: skip
    dumped = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    found = []
    for line in dumped.stdout.splitlines():
        if " payload: " not in line:
            continue
        data = json.loads(line.split(" payload: ", 1)[1])["data"]
        if data["transactionStatus"] != PREPARE_COMMIT:
            continue
        partitions = {
            f"{part['topic']}-{number}"
            for part in data["transactionPartitions"] or []
            for number in part["partitionIds"]
        }
        if any(p.rsplit("-", 1)[0] in topics for p in partitions):
            found.append(partitions)
    return found


def assert_sent_together(stack: Stack, topics: list[str]) -> None:
    """Every committed Kafka transaction that wrote to one of `topics` wrote to all of
    them: a read_committed consumer never sees one topic's part without the others'."""
    committed = committed_transactions(stack.home, set(topics))
    assert committed, f"no committed transaction wrote to {topics}"
    for partitions in committed:
        assert {p.rsplit("-", 1)[0] for p in partitions} == set(topics), committed
