"""The transactional producer: one Kafka transaction per chunk of staging records.

The transactional id is fixed per (pool, topic), so starting a new producer
fences any older one still alive and aborts what it left open: after a kill -9
nothing half-sent stays visible to read_committed consumers (a JDBC sink, or
our own position reader), and two to-kafka processes never interleave.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, Producer

from zync_assets.errors import ZyncError
from zync_assets.kafka import clients
from zync_assets.settings import KafkaSettings
from zync_assets.tokafka.position import offset_header, pool_header

TRANSACTION_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Chunk:
    """Encoded records with consecutive staging offsets first, first+1, ..."""

    first: int
    keys: list[bytes | None]
    values: list[bytes | None]


def transactional_id(pool: str, topic: str) -> str:
    return f"zync-to-kafka.{pool}.{topic}"


class FatalErrors(list[KafkaError]):
    """librdkafka's fatal errors, as its error callback reports them: a failed call
    only says "Local: Fatal error"; this says why (e.g. the producer was fenced)."""

    def __call__(self, error: KafkaError) -> None:
        if error.fatal():
            self.append(error)


def open_producer(
    kafka: KafkaSettings, pool: str, topic: str, **overrides: object
) -> tuple[Producer, FatalErrors]:
    """A transactional producer that has fenced its predecessors."""
    fatal = FatalErrors()
    producer = clients.producer(
        kafka,
        **{
            "error_cb": fatal,
            "transactional.id": transactional_id(pool, topic),
            "transaction.timeout.ms": int(TRANSACTION_TIMEOUT_S * 1000),
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            **overrides,
        },
    )
    try:
        producer.init_transactions(clients.CONNECT_TIMEOUT_S)
    except KafkaException as exc:
        raise ZyncError(
            f"cannot start a Kafka transaction for topic {topic!r} at {kafka.bootstrap_servers} "
            f"({_describe(exc)}); check that the broker is up and allows transactions"
        ) from exc
    return producer, fatal


def send_chunks(
    producer: Producer,
    fatal: FatalErrors,
    topic: str,
    pool: str,
    chunks: Iterator[Chunk],
    on_commit: Callable[[int], None] = lambda sent: None,
) -> int:
    """Send each chunk in its own transaction; returns the records committed."""
    sent = 0
    for chunk in chunks:
        try:
            producer.begin_transaction()
            _produce(producer, topic, pool, chunk)
            producer.commit_transaction(TRANSACTION_TIMEOUT_S)
        except KafkaException as exc:
            _abort(producer, exc, fatal, topic)
        sent += len(chunk.keys)
        on_commit(sent)
    return sent


def _produce(producer: Producer, topic: str, pool: str, chunk: Chunk) -> None:
    same = pool_header(pool)
    for index, (key, value) in enumerate(zip(chunk.keys, chunk.values, strict=True)):
        record_headers = [same, offset_header(chunk.first + index)]
        while True:
            try:
                producer.produce(topic, value=value, key=key, headers=record_headers)
                break
            except BufferError:  # local queue full: let librdkafka drain it
                producer.poll(0.05)
        if index % 10_000 == 0:
            producer.poll(0)


_FENCED = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)


def _abort(producer: Producer, exc: KafkaException, fatal: FatalErrors, topic: str) -> None:
    error: KafkaError = exc.args[0]
    if error.code() == KafkaError._FATAL:
        deadline = time.monotonic() + 3.0  # poll serves queued events, the error callback's too
        while not fatal and time.monotonic() < deadline:
            try:
                producer.poll(0.1)
            except KafkaException as raised:  # a fatal producer may raise it from poll
                fatal.append(raised.args[0])
        error = fatal[0] if fatal else error
    if error.code() in _FENCED:
        raise ZyncError(
            f"another `zync to-kafka` for topic {topic!r} took over (this producer was fenced); "
            "nothing of the current batch was committed, and the other process goes on"
        ) from exc
    if error.txn_requires_abort():
        producer.abort_transaction(TRANSACTION_TIMEOUT_S)
    raise ZyncError(
        f"sending to {topic!r} failed and the batch was rolled back: {error.str()}; "
        "run again to resume from the last committed record"
    ) from exc


def _describe(exc: KafkaException) -> str:
    return exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc)
