"""to-kafka's sender in Spark's driver JVM: `zync.spark.StagingFetch` (jvm/src) reads and
encodes a topic's staging records on the executors, `zync.spark.KafkaSender`, the Java
Kafka client's transactional producer, sends them from the driver; no record passes
through Python."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from zync_assets.core.errors import ZyncError
from zync_assets.core.settings import KafkaSettings
from zync_assets.kafka import clients
from zync_assets.kafka.java_config import java_client_config
from zync_assets.spark.functions import java_class
from zync_assets.tokafka.encode import Encoding, Span
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

SENDER_CLASS = "zync.spark.KafkaSender"
FETCH_CLASS = "zync.spark.StagingFetch"
FETCH_MANY_CLASS = "zync.spark.StagingFetchMany"
_EVERYTHING = 2**63 - 1  # a Java long's largest: no upper offset
_JAVA_FENCED = {"ProducerFencedException", "InvalidProducerEpochException"}


def java_producer_config(kafka: KafkaSettings, pool: str, topic: str | None) -> dict[str, str]:
    return {
        **java_client_config(kafka),
        "transactional.id": transactional_id(pool, topic),
        "transaction.timeout.ms": str(int(TRANSACTION_TIMEOUT_S * 1000)),
        "max.block.ms": str(int(clients.CONNECT_TIMEOUT_S * 1000)),  # init, metadata
        "delivery.timeout.ms": "30000",
        "request.timeout.ms": "20000",
        "linger.ms": "20",
        # A transaction's first send waits until the coordinator has finished the last
        # commit, retrying after this: the default 100 ms cost ~0.1 s per transaction.
        "retry.backoff.ms": "10",
        "batch.size": str(512 * 1024),
        "buffer.memory": str(128 * 1024 * 1024),
    }


class JvmBatch:
    """A `zync.spark.EncodedBatch`: the records stay in the JVM, Python holds a handle."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.count: int = handle.size()
        self.nbytes: int = handle.bytes()


class JvmSender:
    """`zync.spark.KafkaSender` (jvm/src): the Java transactional producer in Spark's driver."""

    def __init__(
        self, spark: SparkSession, kafka: KafkaSettings, pool: str, topic: str | None
    ) -> None:
        """`topic` None: the pool's topics go together (send_parts only)."""
        self._fetch = java_class(spark._jvm, FETCH_CLASS)
        sender = java_class(spark._jvm, SENDER_CLASS)
        self._target = sent_to(pool, topic)
        try:
            self._sender = sender(java_producer_config(kafka, pool, topic), topic, pool)
        except Py4JJavaError as exc:
            raise cannot_start(kafka, self._target, _java_reason(exc)) from exc

    def first_fetch(
        self, outputs: DataFrame, codec: Encoding, start: int, budget: int
    ) -> FirstFetch:
        return _first_fetch(self._run(outputs, codec, start, start, _EVERYTHING, budget), start)

    def fetch(self, outputs: DataFrame, codec: Encoding, low: int, high: int) -> JvmBatch:
        window = outputs.where(F.col("offset").between(low, high - 1))
        return self._batch(self._run(window, codec, low, low, high, _EVERYTHING), low, high)

    def _run(
        self, outputs: DataFrame, codec: Encoding, start: int, low: int, high: int, budget: int
    ) -> Any:
        key_schemas, value_schemas = bytearray(codec.key_schemas), bytearray(codec.value_schemas)
        return self._fetch.run(outputs._jdf, key_schemas, value_schemas, start, low, high, budget)

    def _batch(self, result: Any, low: int, high: int) -> JvmBatch:
        return _batch(result, low, high)

    def send(self, fetched: Fetched, start: int, stop: int) -> None:
        assert isinstance(fetched, JvmBatch)
        try:
            self._sender.sendTransaction(fetched.handle, start, stop)
        except Py4JJavaError as exc:
            raise self._failed(exc) from exc

    def send_parts(self, parts: Sequence[Part]) -> None:
        try:
            self._sender.beginTransaction()
        except Py4JJavaError as exc:
            raise self._failed(exc) from exc
        try:
            for part in parts:
                assert isinstance(part.fetched, JvmBatch)
                self._sender.sendPart(part.fetched.handle, part.topic, part.start, part.stop)
        except Py4JJavaError as exc:
            self._sender.abortTransaction()
            raise self._failed(exc) from exc
        try:
            self._sender.commitTransaction()  # aborts, when a send failed
        except Py4JJavaError as exc:
            raise self._failed(exc) from exc

    def _failed(self, exc: Py4JJavaError) -> ZyncError:
        if _JAVA_FENCED & set(_java_classes(exc)):
            return fenced(self._target)
        return rolled_back(self._target, _java_reason(exc))

    def close(self) -> None:
        self._sender.close()


def fetch_many(
    spark: SparkSession, outputs: DataFrame, codecs: Sequence[Encoding], starts: Sequence[int],
    budget: int,
) -> list[FirstFetch]:  # fmt: skip
    """`JvmSender.first_fetch` of several topics in one Spark job (zync.spark.StagingFetchMany):
    `outputs` has columns topic (the index of its codec and start), offset, key, value,
    from each topic's start - 1 on."""
    fetch = java_class(spark._jvm, FETCH_MANY_CLASS)
    results = fetch.run(
        outputs._jdf, [bytearray(c.key_schemas) for c in codecs],
        [bytearray(c.value_schemas) for c in codecs], list(starts), budget,
    )  # fmt: skip
    return [_first_fetch(result, start) for result, start in zip(results, starts, strict=True)]


def _first_fetch(result: Any, start: int) -> FirstFetch:
    """A StagingFetch.Result of the records from `start` on: their span and, when they are
    dense and within the budget, the records."""
    java_span = result.span()
    count = java_span.count()
    found = Span(
        count=count,
        low=java_span.low() if count else None,
        high=java_span.high() if count else None,
        has_previous=java_span.previous(),
    )
    records = None
    dense = count and found.low == start and found.high == start + count - 1
    if dense and not result.overflowed():
        records = _batch(result, start, start + count)
    return FirstFetch(found, records, result.bytesPerRecord())


def _batch(result: Any, low: int, high: int) -> JvmBatch:
    try:
        return JvmBatch(result.batch(low, high))
    except Py4JJavaError as exc:
        if "IllegalStateException" in _java_classes(exc):
            raise changed_while_sending(low, high) from exc
        raise


def _java_classes(exc: Py4JJavaError) -> list[str]:
    """Simple class names of the Java exception and its causes."""
    names: list[str] = []
    error = exc.java_exception
    while error is not None and len(names) < 10:
        names.append(error.getClass().getSimpleName())
        error = error.getCause()
    return names


def _java_reason(exc: Py4JJavaError) -> str:
    error = exc.java_exception
    return f"{error.getClass().getSimpleName()}: {error.getMessage()}"
