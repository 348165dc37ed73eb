"""confluent-kafka clients built from `KafkaSettings`, with bounded waits everywhere.

librdkafka retries a dead or mis-configured broker forever and logs to stderr;
here every call has a timeout and its logs go to the `zync.librdkafka` logger,
so a wrong address or security protocol becomes one clear error, not a hang.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic

from zync_assets.core.errors import ZyncError
from zync_assets.core.settings import KafkaSettings, verbose
from zync_assets.kafka.failures import CONNECT_TIMEOUT_S, ClientErrors, unreachable

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


def admin_client(
    settings: KafkaSettings, errors: ClientErrors | None = None, **overrides: Any
) -> AdminClient:
    config = {**_base(settings), **overrides}
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


def connected_producer(
    settings: KafkaSettings, topic: str | None = None, **overrides: Any
) -> Producer:
    """producer(...), connected (connect_producer) before its first record; a broker
    that does not answer is a ZyncError saying so."""
    made = producer(settings, **overrides)
    try:
        connect_producer(made, topic)
    except KafkaException as exc:
        raise unreachable(settings, exc.args[0].str() if exc.args else exc) from exc
    return made


def connect_producer(made: Producer, topic: str | None = None) -> None:
    """Have `made` fetch the metadata of `topic` (None: of every topic), which connects
    it to the brokers. Why before its first record: a new idempotent or transactional
    producer's first request (InitProducerId) can be lost with its bootstrap connection
    (_CONNECTED says how) and is asked again 0.5 s later. Measured on an idle local
    broker: one record of a new producer 0.51 s at the median, 60 ms after the metadata
    call; a transactional producer's init and first commit 0.30 s (p90 0.53, worst 1.14)
    against 72 ms (0.087)."""
    made.list_topics(topic, timeout=CONNECT_TIMEOUT_S)


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


# Why one admin client per process and settings, kept connected: a new librdkafka (2.x)
# client drops its bootstrap connection as soon as the first metadata names the brokers,
# and a partition-leader lookup already sent on it (ListOffsets, OffsetFetch) is lost and
# asked again 1-3 s later. Measured on an idle local broker: 3.0 s in 20-28 % of the
# ListOffsets of new clients, none in 100 over one client that had answered a metadata
# call (watermarks of 60 topics: 5 ms at the median instead of 63, 3 s at the p90).
_CONNECTED: dict[KafkaSettings, tuple[AdminClient, ClientErrors]] = {}
_CONNECTING = threading.Lock()
# A kept client's reconnect backoff caps here rather than at librdkafka's 10 s, so that a
# broker back from a restart is seen within moments, as a new client would see it.
_RECONNECT_MAX_MS = 1000
# librdkafka's clients do not survive a fork (their threads stay in the parent): a forked
# child starts with none kept, and holds the inherited ones unused rather than destroy
# them, which would wait on those threads.
_INHERITED: list[tuple[AdminClient, ClientErrors]] = []


def _forget_after_fork() -> None:
    global _CONNECTING  # a thread of the parent may have held it: the child's is free
    _CONNECTING = threading.Lock()
    _INHERITED.extend(_CONNECTED.values())
    _CONNECTED.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def connected_admin(settings: KafkaSettings) -> AdminClient:
    """This process's admin client for `settings`, connected to the brokers the cluster
    names (see _CONNECTED); a broker that does not answer is a ZyncError saying why."""
    kept = _CONNECTED.get(settings)
    if kept is None:
        cluster_metadata(settings)  # connects it, or says why it cannot
        kept = _CONNECTED[settings]
    kept[0].poll(0)  # serve its logs and errors: a kept client is polled nowhere else
    return kept[0]


def cluster_metadata(
    settings: KafkaSettings, topic: str | None = None, timeout: float = CONNECT_TIMEOUT_S
) -> ClusterMetadata:
    """Broker metadata, or a ZyncError saying the broker cannot be reached (and why: the
    credentials refused, the certificate not trusted, ...). Over the connected client
    (kept once it has answered)."""
    with _CONNECTING:
        admin, errors = _CONNECTED.get(settings) or _new_connection(settings)
    errors.seen.clear()  # this call's failures, not an earlier outage's
    try:
        metadata = admin.list_topics(topic=topic, timeout=timeout)
    except KafkaException as exc:
        admin.poll(0)  # serve the queued error events and logs (`zync -v` shows the logs)
        detail = exc.args[0].str() if exc.args else exc
        raise unreachable(settings, detail, errors.cause()) from exc
    with _CONNECTING:
        _CONNECTED.setdefault(settings, (admin, errors))
    admin.poll(0)
    return metadata


def _new_connection(settings: KafkaSettings) -> tuple[AdminClient, ClientErrors]:
    errors = ClientErrors()
    admin = admin_client(settings, errors, **{"reconnect.backoff.max.ms": _RECONNECT_MAX_MS})
    return admin, errors


def partitions_of(settings: KafkaSettings, topic: str) -> list[int]:
    """Partition ids of an existing topic; a clear error when it does not exist."""
    metadata = cluster_metadata(settings)
    if topic not in metadata.topics:
        raise no_such_topic(settings, topic)
    return sorted(metadata.topics[topic].partitions)


def no_such_topic(settings: KafkaSettings, topic: str) -> ZyncError:
    return ZyncError(
        f"topic {topic!r} does not exist on {settings.bootstrap_servers}; "
        "check the name, or create it by producing to it (`zync produce --topic T`)"
    )


def ensure_topic(settings: KafkaSettings, topic: str, partitions: int = 1) -> None:
    """Create `topic` with `partitions` partitions unless it already exists."""
    if topic in cluster_metadata(settings).topics:
        return
    admin = connected_admin(settings)
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
    except TimeoutError as exc:
        raise unreachable(
            settings, f"no answer to CreateTopics within {CONNECT_TIMEOUT_S:g}s"
        ) from exc


def topic_names(settings: KafkaSettings) -> list[str]:
    return sorted(cluster_metadata(settings).topics)


def delete_topics(settings: KafkaSettings, topics: list[str], timeout: float = 30.0) -> None:
    """Delete `topics` (those that exist) and wait until the broker no longer lists them."""
    existing = [t for t in topics if t in cluster_metadata(settings).topics]
    if not existing:
        return
    admin = connected_admin(settings)
    for future in admin.delete_topics(existing, operation_timeout=30).values():
        future.result()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(
        t in cluster_metadata(settings).topics for t in existing
    ):
        time.sleep(0.2)
