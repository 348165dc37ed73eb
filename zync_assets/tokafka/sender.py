"""to-kafka's transactional senders: one Kafka transaction per chunk of staging records.

A sender also reads what it sends: it is handed a topic's staging output records and
the schemas to encode them with, so each can read the pool in the way that suits it.

The transactional id is fixed per (pool, topic), or per pool for a pool whose topics are
sent together (together.py), so opening a sender fences any older one still alive and
aborts what it left open: after a kill -9 nothing half-sent stays visible to
read_committed consumers (a JDBC sink, or our own position reader), and two to-kafka
processes never interleave.

Two senders do the same job (sender_choice.py picks one):
- `jvm_sender.JvmSender` (the default, for a classic SparkSession): one Spark job
  checks the offsets and encodes the records on the executors (zync.spark.StagingFetch);
  they are collected into the driver JVM and sent there by the Java Kafka client, so
  they never cross into Python.
- `librdkafka_sender.LibrdkafkaSender` (for Spark Connect, whose driver JVM is out of
  reach): an offsets job, then the records encoded by `zync_variant_avro` in SQL come to
  Python as Arrow and go out through confluent-kafka.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pyspark.sql import DataFrame

from zync_assets.core.errors import ConcurrentWriter, Unavailable, ZyncError
from zync_assets.core.settings import KafkaSettings
from zync_assets.kafka.failures import is_transient
from zync_assets.tokafka.encode import Encoding, Span

TRANSACTION_TIMEOUT_S = 60.0


class Fetched(Protocol):
    """Encoded records with consecutive staging offsets, in offset order."""

    @property
    def count(self) -> int: ...

    @property
    def nbytes(self) -> int: ...


@dataclass(frozen=True)
class FirstFetch:
    span: Span  # the offsets from the start on: checked for gaps before anything is sent
    records: Fetched | None  # all of them, when they fit the budget and have no gap
    bytes_per_record: float  # of what was encoded (0 if nothing): to size the windows


class Sender(Protocol):
    def first_fetch(
        self, outputs: DataFrame, codec: Encoding, start: int, budget: int
    ) -> FirstFetch:
        """The span of `outputs`'s offsets from `start` on (outputs: offset, key, value,
        from start - 1 on) and, if the sender can, their records encoded with `codec`."""
        ...

    def fetch(self, outputs: DataFrame, codec: Encoding, low: int, high: int) -> Fetched:
        """The records of `outputs` with offsets [low, high), encoded; all must be there."""
        ...

    def send(self, fetched: Fetched, start: int, stop: int) -> None:
        """Records [start, stop) of `fetched` (indexes, not offsets), in one transaction."""
        ...

    def send_parts(self, parts: Sequence[Part]) -> None:
        """Each part's records to its topic, all in one transaction."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Part:
    """Records [start, stop) of `fetched` (indexes, not offsets), for `topic`."""

    topic: str
    fetched: Fetched
    start: int
    stop: int


def transactional_id(pool: str, topic: str | None) -> str:
    """Per (pool, topic); per pool (topic None) when the pool's topics go together."""
    return f"zync-to-kafka.{pool}" if topic is None else f"zync-to-kafka.{pool}.{topic}"


def sent_to(pool: str, topic: str | None) -> str:
    """What a sender sends to, in its errors."""
    return f"the topics of staging pool {pool}" if topic is None else f"topic {topic!r}"


def changed_while_sending(low: int, high: int) -> ZyncError:
    return ZyncError(f"staging offsets {low}..{high - 1} changed while sending; run again")


def fenced(target: str) -> ConcurrentWriter:
    return ConcurrentWriter(
        f"another to-kafka for {target} took over (this producer was fenced); "
        "nothing of the current batch was committed, and the other process goes on"
    )


def rolled_back(target: str, reason: str) -> ZyncError:
    """The error for a failed transaction: Unavailable if Kafka was away (a continuous
    to-kafka retries it), else a plain one. `target`: what `sent_to` says."""
    if is_transient(reason):
        return Unavailable(
            f"Kafka did not answer while sending to {target} ({reason}); the open "
            "transaction was rolled back; a new run resumes from the last committed record"
        )
    return ZyncError(
        f"sending to {target} failed and the batch was rolled back: {reason}; "
        "run again to resume from the last committed record"
    )


def cannot_start(kafka: KafkaSettings, target: str, reason: str) -> ZyncError:
    kind = Unavailable if is_transient(reason) else ZyncError
    return kind(
        f"cannot start a Kafka transaction for {target} at {kafka.bootstrap_servers} "
        f"({reason}); check that the broker is up and allows transactions"
    )
