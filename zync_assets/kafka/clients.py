"""confluent-kafka clients built from `KafkaSettings`, with bounded waits everywhere.

librdkafka retries a dead or mis-configured broker forever and logs to stderr;
here every call has a timeout and its logs go to the `zync.librdkafka` logger,
so a wrong address or security protocol becomes one clear error, not a hang.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic

from zync_assets.errors import Unavailable, ZyncError
from zync_assets.settings import KafkaSettings, verbose
from zync_assets.tls_probe import speaks_tls

CONNECT_TIMEOUT_S = 10.0
LIBRDKAFKA_LOG = logging.getLogger("zync.librdkafka")


# librdkafka's syslog levels: 7 debug ... 3 error, 2 critical.
_QUIET_LOG_LEVEL = 2
_VERBOSE_LOG_LEVEL = 6


def _base(settings: KafkaSettings) -> dict[str, Any]:
    # librdkafka logs every failed connection attempt and every retry ("GETPID ...
    # Coordinator load in progress: retrying" on a transactional producer's first call);
    # zync's errors say once what failed. `zync -v` (or ZYNC_DEBUG=1) shows them.
    level = _VERBOSE_LOG_LEVEL if verbose() else _QUIET_LOG_LEVEL
    return {**settings.client_config(), "logger": LIBRDKAFKA_LOG, "log_level": level}


class ClientErrors:
    """librdkafka's error events of one client (its `error_cb`): a failed call then names
    why — the credentials refused, the certificate not trusted — not only that it timed out."""

    def __init__(self) -> None:
        self.seen: list[KafkaError] = []

    def __call__(self, error: KafkaError) -> None:
        self.seen.append(error)

    def cause(self) -> KafkaError | None:
        """The most telling error seen: an authentication or TLS failure over a
        disconnect, a disconnect over "all brokers down"."""
        ranked = sorted(self.seen, key=_rank)
        return ranked[0] if ranked else None


def _rank(error: KafkaError) -> int:
    text = error.str()
    if error.code() == KafkaError._AUTHENTICATION:
        return 0
    if error.code() == KafkaError._SSL or "SSL" in text or "security.protocol" in text:
        return 1
    return 3 if error.code() == KafkaError._ALL_BROKERS_DOWN else 2


def admin_client(settings: KafkaSettings, errors: ClientErrors | None = None) -> AdminClient:
    config = _base(settings)
    if errors is not None:
        config["error_cb"] = errors
    return AdminClient(config)


def producer(settings: KafkaSettings, **overrides: Any) -> Producer:
    config = {
        **_base(settings),
        "enable.idempotence": True,
        "partitioner": "murmur2_random",  # same key -> partition mapping as Java clients
        "linger.ms": 20,
        "message.timeout.ms": 30_000,
        **overrides,
    }
    return Producer(config)


def consumer(settings: KafkaSettings, **overrides: Any) -> Consumer:
    """A consumer for explicit partition assignment; it never commits a group offset."""
    config = {
        **_base(settings),
        "group.id": f"zync-{uuid.uuid4().hex[:12]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "allow.auto.create.topics": False,
        "enable.partition.eof": True,
        **overrides,
    }
    return Consumer(config)


def unreachable(
    settings: KafkaSettings, detail: object, cause: KafkaError | None = None
) -> ZyncError:
    """The error for a broker that did not answer; `cause`, librdkafka's own account of the
    failure, picks the advice: credentials, certificates, protocol, or address."""
    if cause is not None and (refused := _refusal(settings, cause)) is not None:
        return refused
    first = settings.bootstrap_servers.split(",")[0].strip()
    if "SSL" not in settings.security_protocol and speaks_tls(first):
        # A TLS listener drops a plaintext client's first request without a word.
        return ZyncError(
            f"Kafka at {settings.describe()} answers only TLS; set ZYNC_KAFKA_SECURITY_PROTOCOL "
            "to SSL or SASL_SSL (with ZYNC_KAFKA_SSL_CA), as this listener expects"
        )
    return Unavailable(
        f"cannot reach Kafka at {settings.describe()} within {CONNECT_TIMEOUT_S:g}s ({detail}); "
        "check ZYNC_KAFKA_BOOTSTRAP and ZYNC_KAFKA_SECURITY_PROTOCOL, or start the local "
        "stack with `zync stack up`"
    )


# The Java client's errors that mean "the broker is away for now" (Spark's Kafka source and
# the JVM sender raise them through py4j or Spark Connect as text).
_JAVA_TRANSIENT = re.compile(
    r"org\.apache\.kafka\.common\.errors\.(TimeoutException|DisconnectException|"
    r"NetworkException|NotLeaderOrFollowerException|LeaderNotAvailableException|"
    r"NotEnoughReplicasException|CoordinatorNotAvailableException): ([^\n]*)"
)


# librdkafka's words for the same.
_LIBRDKAFKA_TRANSIENT = re.compile(
    r"Local: (Timed out|Broker transport failure|All broker connections are down)|"
    r"_TIMED_OUT|_TRANSPORT|_ALL_BROKERS_DOWN|NOT_LEADER|COORDINATOR_NOT_AVAILABLE"
)
# The JVM sender's reasons name the exception class without its package.
_SHORT_TRANSIENT = re.compile(
    r"^(TimeoutException|DisconnectException|NetworkException|NotLeaderOrFollowerException|"
    r"LeaderNotAvailableException|CoordinatorNotAvailableException): "
)


def is_transient(reason: str) -> bool:
    """Whether a Kafka client's failure text means the broker is away for now (retry
    later), not that the request was refused."""
    return any(p.search(reason) for p in (_JAVA_TRANSIENT, _LIBRDKAFKA_TRANSIENT, _SHORT_TRANSIENT))


def java_outage(settings: KafkaSettings, exc: BaseException) -> Unavailable | None:
    """An Unavailable error if `exc` (from the JVM) says the broker could not be reached."""
    found = _JAVA_TRANSIENT.search(str(exc))
    if found is None:
        return None
    return Unavailable(
        f"Kafka at {settings.describe()} did not answer ({found.group(1)}: "
        f"{found.group(2).strip()}); nothing was committed"
    )


def _refusal(settings: KafkaSettings, cause: KafkaError) -> ZyncError | None:
    where = f"Kafka at {settings.describe()}"
    reason = _strip_broker_prefix(cause.str())
    if cause.code() == KafkaError._AUTHENTICATION:
        return ZyncError(
            f"{where} refused the credentials ({reason}); check ZYNC_KAFKA_SASL_MECHANISM, "
            "ZYNC_KAFKA_SASL_USERNAME and ZYNC_KAFKA_SASL_PASSWORD (or sasl_* in kafka.json)"
        )
    if "security.protocol" in reason or "PLAINTEXT broker listener" in reason:
        return ZyncError(
            f"{where} did not answer in that protocol ({reason}); set "
            "ZYNC_KAFKA_SECURITY_PROTOCOL to what this listener speaks (SSL, SASL_SSL, ...)"
        )
    if cause.code() == KafkaError._SSL or "SSL" in reason:
        return ZyncError(
            f"TLS with {where} failed ({reason}); check ZYNC_KAFKA_SSL_CA (the CA that signed "
            "the broker's certificate) and, for mutual TLS, ZYNC_KAFKA_SSL_CERT and _KEY"
        )
    return None


def _strip_broker_prefix(text: str) -> str:
    # "sasl_ssl://127.0.0.1:9094/bootstrap: SASL authentication error: ..." -> the reason
    _head, sep, tail = text.partition("/bootstrap: ")
    return tail if sep else text


def cluster_metadata(
    settings: KafkaSettings, topic: str | None = None, timeout: float = CONNECT_TIMEOUT_S
) -> ClusterMetadata:
    """Broker metadata, or a ZyncError saying the broker cannot be reached."""
    errors = ClientErrors()
    admin = admin_client(settings, errors)
    try:
        return admin.list_topics(topic=topic, timeout=timeout)
    except KafkaException as exc:
        admin.poll(0)  # serve the queued error events and logs (`zync -v` shows the logs)
        detail = exc.args[0].str() if exc.args else exc
        raise unreachable(settings, detail, errors.cause()) from exc


def partitions_of(settings: KafkaSettings, topic: str) -> list[int]:
    """Partition ids of an existing topic; a clear error when it does not exist."""
    metadata = cluster_metadata(settings)
    if topic not in metadata.topics:
        raise ZyncError(
            f"topic {topic!r} does not exist on {settings.bootstrap_servers}; "
            "check the name, or create it by producing to it (`zync produce --topic T`)"
        )
    return sorted(metadata.topics[topic].partitions)


def ensure_topic(settings: KafkaSettings, topic: str, partitions: int = 1) -> None:
    """Create `topic` with `partitions` partitions unless it already exists."""
    if topic in cluster_metadata(settings).topics:
        return
    admin = admin_client(settings)  # must outlive the futures it returns
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=-1)],
        request_timeout=CONNECT_TIMEOUT_S,
    )
    try:
        futures[topic].result(timeout=CONNECT_TIMEOUT_S)
    except KafkaException as exc:
        error = exc.args[0]
        if error.name() != "TOPIC_ALREADY_EXISTS":
            raise ZyncError(f"cannot create topic {topic!r}: {error.str()}") from exc


def topic_names(settings: KafkaSettings) -> list[str]:
    return sorted(cluster_metadata(settings).topics)


def delete_topics(settings: KafkaSettings, topics: list[str], timeout: float = 30.0) -> None:
    """Delete `topics` (those that exist) and wait until the broker no longer lists them."""
    existing = [t for t in topics if t in cluster_metadata(settings).topics]
    if not existing:
        return
    admin = admin_client(settings)  # held until the futures resolve: a dropped client aborts them
    for future in admin.delete_topics(existing, operation_timeout=30).values():
        future.result()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(
        t in cluster_metadata(settings).topics for t in existing
    ):
        time.sleep(0.2)
