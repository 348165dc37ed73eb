"""What a Kafka client's failure means, in one line: refused (credentials, certificates,
protocol — fix the settings) or unavailable (the broker is away — retrying may help).

librdkafka reports causes as error events and log lines, the Java client (Spark's Kafka
source, the JVM sender) as exception text; both are read here, nowhere else.
"""

from __future__ import annotations

import re

from confluent_kafka import KafkaError

from zync_assets.core.errors import Unavailable, ZyncError
from zync_assets.core.settings import KafkaSettings
from zync_assets.core.tls_probe import speaks_tls

CONNECT_TIMEOUT_S = 10.0


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


def unreachable(
    settings: KafkaSettings, detail: object, cause: KafkaError | None = None
) -> ZyncError:
    """The error for a broker that did not answer; `cause`, librdkafka's own account of the
    failure, picks the advice: credentials, certificates, protocol, or address."""
    if cause is not None and (refused := _refusal(settings, cause)) is not None:
        return refused
    if "SSL" not in settings.security_protocol and speaks_tls(_first_address(settings)):
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
    tls_failed = cause.code() == KafkaError._SSL or "SSL" in reason
    # librdkafka names the protocol as the likely cause only sometimes; a listener that
    # does not complete a TLS handshake of its own settles it ("SSL connection closed by
    # peer" is a plaintext broker as often as an untrusted certificate).
    if (
        "security.protocol" in reason
        or "PLAINTEXT broker listener" in reason
        or (tls_failed and not speaks_tls(_first_address(settings)))
    ):
        return ZyncError(
            f"{where} did not answer in that protocol ({reason}); set "
            "ZYNC_KAFKA_SECURITY_PROTOCOL to what this listener speaks (SSL, SASL_SSL, ...)"
        )
    if tls_failed:
        return ZyncError(
            f"TLS with {where} failed ({reason}); check ZYNC_KAFKA_SSL_CA (the CA that signed "
            "the broker's certificate) and, for mutual TLS, ZYNC_KAFKA_SSL_CERT and _KEY"
        )
    return None


def _first_address(settings: KafkaSettings) -> str:
    return settings.bootstrap_servers.split(",")[0].strip()


def _strip_broker_prefix(text: str) -> str:
    # "sasl_ssl://127.0.0.1:9094/bootstrap: SASL authentication error: ..." -> the reason
    _head, sep, tail = text.partition("/bootstrap: ")
    return tail if sep else text
