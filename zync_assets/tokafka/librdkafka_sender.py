"""to-kafka's sender for Spark Connect sessions (no driver JVM at hand): the offsets are
checked by a job of their own, then the records, encoded by `zync_variant_avro` in SQL,
come to Python through Arrow and go out through confluent-kafka's transactional
producer."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from zync_assets.core.settings import KafkaSettings
from zync_assets.kafka import clients
from zync_assets.tokafka.encode import Encoding, encoded, span
from zync_assets.tokafka.position import offset_header, pool_header
from zync_assets.tokafka.sender import (
    TRANSACTION_TIMEOUT_S,
    Fetched,
    FirstFetch,
    Part,
    cannot_start,
    changed_while_sending,
    fenced,
    rolled_back,
    sent_to,
    transactional_id,
)


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

    def __init__(self, kafka: KafkaSettings, pool: str, topic: str | None) -> None:
        """`topic` None: the pool's topics go together (send_parts only)."""
        self._topic = topic
        self._target = sent_to(pool, topic)
        self._partitions: dict[str, int] = {}
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
                "retry.backoff.ms": 10,  # see jvm_sender: a transaction's first send retries
            },
        )
        try:
            clients.connect_producer(self._producer, topic)
            self._producer.init_transactions(clients.CONNECT_TIMEOUT_S)
        except KafkaException as exc:
            raise cannot_start(kafka, self._target, _describe(exc)) from exc

    def first_fetch(
        self, outputs: DataFrame, codec: Encoding, start: int, budget: int
    ) -> FirstFetch:
        return FirstFetch(span(outputs, start), None, 0.0)  # the records come in windows

    def fetch(self, outputs: DataFrame, codec: Encoding, low: int, high: int) -> ArrowBatch:
        window = encoded(outputs.where(F.col("offset").between(low, high - 1)), codec)
        # Sorted here, not by Spark: a global orderBy samples (encoding every record twice)
        # and shuffles, where Arrow sorts a chunk in milliseconds.
        table = window.toArrow().sort_by("offset")
        if table.num_rows != high - low or table.column("offset").to_pylist() != list(
            range(low, high)
        ):
            raise changed_while_sending(low, high)
        return ArrowBatch(table)

    def send(self, fetched: Fetched, start: int, stop: int) -> None:
        assert self._topic is not None, "a sender of several topics sends parts"
        self.send_parts([Part(self._topic, fetched, start, stop)])

    def send_parts(self, parts: Sequence[Part]) -> None:
        try:
            self._producer.begin_transaction()
            for part in parts:
                assert isinstance(part.fetched, ArrowBatch)
                rows = part.fetched.table.slice(part.start, part.stop - part.start)
                self._produce(part.topic, rows)
            self._producer.commit_transaction(TRANSACTION_TIMEOUT_S)
        except KafkaException as exc:
            self._abort(exc)

    def close(self) -> None:
        try:
            self._producer.flush(clients.CONNECT_TIMEOUT_S)
        except KafkaException as exc:
            # A producer fenced (a fatal error) has nothing left to deliver: its open
            # transaction was aborted, and its send already raised saying so. librdkafka
            # reports the fatal error again from flush when it lands after the send.
            if not exc.args[0].fatal():
                raise

    def _produce(self, topic: str, part: pa.Table) -> None:
        first = part.column("offset")[0].as_py()
        keys, values = part.column("key").to_pylist(), part.column("value").to_pylist()
        # The next run reads the headers from each partition's last committed record (see
        # KafkaSender): with one partition only the transaction's last record needs them.
        # With more, librdkafka picks the partitions, and every record carries them.
        tag_all = self._partition_count(topic) > 1
        last = len(keys) - 1
        for index, (key, value) in enumerate(zip(keys, values, strict=True)):
            tagged = tag_all or index == last
            headers: list[tuple[str, str | bytes | None]] | None = (
                [self._pool_header, offset_header(first + index)] if tagged else None
            )
            while True:
                try:
                    self._producer.produce(topic, value=value, key=key, headers=headers)
                    break
                except BufferError:  # local queue full: let librdkafka drain it
                    self._producer.poll(0.05)
            if index % 10_000 == 0:
                self._producer.poll(0)

    def _partition_count(self, topic: str) -> int:
        if topic not in self._partitions:  # a topic's partitions are fixed (sync.py)
            metadata = self._producer.list_topics(topic, timeout=clients.CONNECT_TIMEOUT_S)
            self._partitions[topic] = len(metadata.topics[topic].partitions)
        return self._partitions[topic]

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
            raise fenced(self._target) from exc
        if not error.fatal():
            # Also when the error does not require it (a record refused locally): what was
            # produced before it must not stay in an open transaction, which holds
            # read_committed consumers back until the transaction times out.
            with contextlib.suppress(KafkaException):
                self._producer.abort_transaction(TRANSACTION_TIMEOUT_S)
        raise rolled_back(self._target, error.str()) from exc


def _describe(exc: KafkaException) -> str:
    return exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc)
