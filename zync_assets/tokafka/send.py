"""to-kafka's transactional senders: one Kafka transaction per chunk of staging records.

The transactional id is fixed per (pool, topic), so opening a sender fences any
older one still alive and aborts what it left open: after a kill -9 nothing
half-sent stays visible to read_committed consumers (a JDBC sink, or our own
position reader), and two to-kafka processes never interleave.

Two senders do the same job:
- `JvmSender` (the default, for a classic SparkSession): Spark's encoded records are
  collected into the driver JVM and sent there by the Java Kafka client, so the
  records never cross into Python (which cost more than encoding them).
- `LibrdkafkaSender` (for Spark Connect, whose driver JVM is out of reach): the
  records come to Python as Arrow and go out through confluent-kafka.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer
from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, SparkSession

from zync_assets.errors import ZyncError
from zync_assets.kafka import clients
from zync_assets.kafka.java_config import java_client_config
from zync_assets.settings import KafkaSettings
from zync_assets.tokafka.position import offset_header, pool_header

TRANSACTION_TIMEOUT_S = 60.0


class Fetched(Protocol):
    """Encoded records with consecutive staging offsets, in offset order."""

    @property
    def count(self) -> int: ...

    @property
    def nbytes(self) -> int: ...


class Sender(Protocol):
    def fetch(self, encoded: DataFrame, low: int, high: int) -> Fetched:
        """The records of `encoded` (offset, key, value), which holds offsets [low, high)."""
        ...

    def send(self, fetched: Fetched, start: int, stop: int) -> None:
        """Records [start, stop) of `fetched` (indexes, not offsets), in one transaction."""
        ...

    def close(self) -> None: ...


def transactional_id(pool: str, topic: str) -> str:
    return f"zync-to-kafka.{pool}.{topic}"


def open_sender(spark: SparkSession, kafka: KafkaSettings, pool: str, topic: str) -> Sender:
    """A sender that has fenced its predecessors: in the driver JVM when there is one."""
    if getattr(spark, "_jvm", None) is not None:
        return JvmSender(spark, kafka, pool, topic)
    return LibrdkafkaSender(kafka, pool, topic)


def changed_while_sending(low: int, high: int) -> ZyncError:
    return ZyncError(f"staging offsets {low}..{high - 1} changed while sending; run again")


def fenced(topic: str) -> ZyncError:
    return ZyncError(
        f"another `zync to-kafka` for topic {topic!r} took over (this producer was fenced); "
        "nothing of the current batch was committed, and the other process goes on"
    )


def rolled_back(topic: str, reason: str) -> ZyncError:
    return ZyncError(
        f"sending to {topic!r} failed and the batch was rolled back: {reason}; "
        "run again to resume from the last committed record"
    )


def cannot_start(kafka: KafkaSettings, topic: str, reason: str) -> ZyncError:
    return ZyncError(
        f"cannot start a Kafka transaction for topic {topic!r} at {kafka.bootstrap_servers} "
        f"({reason}); check that the broker is up and allows transactions"
    )


# --- in the driver JVM --------------------------------------------------------------------

_JAVA_FENCED = {"ProducerFencedException", "InvalidProducerEpochException"}


def java_producer_config(kafka: KafkaSettings, pool: str, topic: str) -> dict[str, str]:
    return {
        **java_client_config(kafka),
        "transactional.id": transactional_id(pool, topic),
        "transaction.timeout.ms": str(int(TRANSACTION_TIMEOUT_S * 1000)),
        "max.block.ms": str(int(clients.CONNECT_TIMEOUT_S * 1000)),  # init, metadata
        "delivery.timeout.ms": "30000",
        "request.timeout.ms": "20000",
        "linger.ms": "20",
        "batch.size": str(512 * 1024),
        "buffer.memory": str(128 * 1024 * 1024),
    }


class JvmBatch:
    """A `zync.spark.KafkaSender.Batch`: the records stay in the JVM, Python holds a handle."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.count: int = handle.size()
        self.nbytes: int = handle.bytes()


class JvmSender:
    """`zync.spark.KafkaSender` (jvm/src): the Java transactional producer in Spark's driver."""

    def __init__(self, spark: SparkSession, kafka: KafkaSettings, pool: str, topic: str) -> None:
        self._jvm = spark._jvm  # type: ignore[attr-defined]
        self._topic = topic
        try:
            self._sender = self._jvm.zync.spark.KafkaSender(
                java_producer_config(kafka, pool, topic), topic, pool
            )
        except Py4JJavaError as exc:
            raise cannot_start(kafka, topic, _java_reason(exc)) from exc

    def fetch(self, encoded: DataFrame, low: int, high: int) -> JvmBatch:
        try:
            batch = self._jvm.zync.spark.KafkaSender.Batch.collect(encoded._jdf, low, high)
        except Py4JJavaError as exc:
            if "IllegalStateException" in _java_classes(exc):
                raise changed_while_sending(low, high) from exc
            raise
        return JvmBatch(batch)

    def send(self, fetched: Fetched, start: int, stop: int) -> None:
        assert isinstance(fetched, JvmBatch)
        try:
            self._sender.sendTransaction(fetched.handle, start, stop)
        except Py4JJavaError as exc:
            if _JAVA_FENCED & set(_java_classes(exc)):
                raise fenced(self._topic) from exc
            raise rolled_back(self._topic, _java_reason(exc)) from exc

    def close(self) -> None:
        self._sender.close()


def _java_classes(exc: Py4JJavaError) -> list[str]:
    """Simple class names of the Java exception and its causes."""
    names, error = [], exc.java_exception
    while error is not None and len(names) < 10:
        names.append(error.getClass().getSimpleName())
        error = error.getCause()
    return names


def _java_reason(exc: Py4JJavaError) -> str:
    error = exc.java_exception
    return f"{error.getClass().getSimpleName()}: {error.getMessage()}"


# --- in Python, through librdkafka ----------------------------------------------------------


class ArrowBatch:
    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.count: int = table.num_rows
        self.nbytes: int = table.nbytes


class FatalErrors(list[KafkaError]):
    """librdkafka's fatal errors, as its error callback reports them: a failed call
    only says "Local: Fatal error"; this says why (e.g. the producer was fenced)."""

    def __call__(self, error: KafkaError) -> None:
        if error.fatal():
            self.append(error)


_FENCED = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)


class LibrdkafkaSender:
    """confluent-kafka's transactional producer, fed through Arrow."""

    def __init__(self, kafka: KafkaSettings, pool: str, topic: str, **overrides: object) -> None:
        self._topic = topic
        self._pool_header = pool_header(pool)
        self._fatal = FatalErrors()
        self._producer: Producer = clients.producer(
            kafka,
            **{
                "error_cb": self._fatal,
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
            self._producer.init_transactions(clients.CONNECT_TIMEOUT_S)
        except KafkaException as exc:
            raise cannot_start(kafka, topic, _describe(exc)) from exc

    def fetch(self, encoded: DataFrame, low: int, high: int) -> ArrowBatch:
        # Sorted here, not by Spark: a global orderBy samples (encoding every record twice)
        # and shuffles, where Arrow sorts a chunk in milliseconds.
        table = encoded.toArrow().sort_by("offset")
        if table.num_rows != high - low or table.column("offset").to_pylist() != list(
            range(low, high)
        ):
            raise changed_while_sending(low, high)
        return ArrowBatch(table)

    def send(self, fetched: Fetched, start: int, stop: int) -> None:
        assert isinstance(fetched, ArrowBatch)
        part = fetched.table.slice(start, stop - start)
        try:
            self._producer.begin_transaction()
            self._produce(part)
            self._producer.commit_transaction(TRANSACTION_TIMEOUT_S)
        except KafkaException as exc:
            self._abort(exc)

    def close(self) -> None:
        self._producer.flush(clients.CONNECT_TIMEOUT_S)

    def _produce(self, part: pa.Table) -> None:
        first = part.column("offset")[0].as_py()
        keys, values = part.column("key").to_pylist(), part.column("value").to_pylist()
        for index, (key, value) in enumerate(zip(keys, values, strict=True)):
            headers = [self._pool_header, offset_header(first + index)]
            while True:
                try:
                    self._producer.produce(self._topic, value=value, key=key, headers=headers)
                    break
                except BufferError:  # local queue full: let librdkafka drain it
                    self._producer.poll(0.05)
            if index % 10_000 == 0:
                self._producer.poll(0)

    def _abort(self, exc: KafkaException) -> None:
        error: KafkaError = exc.args[0]
        if error.code() == KafkaError._FATAL:
            deadline = time.monotonic() + 3.0  # poll serves queued events, the error callback's
            while not self._fatal and time.monotonic() < deadline:
                try:
                    self._producer.poll(0.1)
                except KafkaException as raised:  # a fatal producer may raise it from poll
                    self._fatal.append(raised.args[0])
            error = self._fatal[0] if self._fatal else error
        if error.code() in _FENCED:
            raise fenced(self._topic) from exc
        if error.txn_requires_abort():
            self._producer.abort_transaction(TRANSACTION_TIMEOUT_S)
        raise rolled_back(self._topic, error.str()) from exc


def _describe(exc: KafkaException) -> str:
    return exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc)
