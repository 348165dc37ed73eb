"""The local Kafka broker: single-node KRaft from the jars in the cache, on 127.0.0.1.

Its PLAINTEXT listener serves the stack's own services. With `secure` ports it also
opens the two listeners a managed Kafka offers: SASL_SSL (PLAIN, SCRAM-SHA-256 and
SCRAM-SHA-512 for user `zync`) and SSL that requires a client certificate (mutual TLS),
both with certificates from the stack's private CA (`stack/secure.py`).
"""

from __future__ import annotations

import base64
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from zync_assets.core.errors import ZyncError
from zync_assets.core.locations import INSTALL_HINT, jars_dir
from zync_assets.core.settings import KafkaSettings
from zync_assets.stack.java import find_java
from zync_assets.stack.process import Running, Service, console_log4j2
from zync_assets.stack.secure import SASL_MECHANISMS, SASL_USER, LocalCredentials, local_credentials

KAFKA_START_TIMEOUT_S = 90.0

# Kafka's own WARNs, and the line that says the broker started.
_LOG4J2 = console_log4j2({"kafka": "WARN", "kafka.server.KafkaRaftServer": "INFO"})
_SCRAM_ITERATIONS = 8192


@dataclass(frozen=True)
class SecurePorts:
    """The secured listeners' ports (`zync stack up --secure`)."""

    sasl_ssl: int
    mtls: int


def jar_dir(name: str) -> Path:
    folder = jars_dir() / name
    if not folder.is_dir() or not any(folder.glob("*.jar")):
        raise ZyncError(f"the {name} jars are missing from {folder}; {INSTALL_HINT}")
    return folder


def kafka_service(home: Path) -> Service:
    return Service("kafka", home / "run")


def _listeners(port: int, controller: int, secure: SecurePorts | None) -> list[str]:
    names = {"PLAINTEXT": port}
    if secure is not None:
        names |= {"SASL_SSL": secure.sasl_ssl, "SSL": secure.mtls}
    listeners = ",".join(f"{name}://127.0.0.1:{p}" for name, p in names.items())
    protocols = ",".join(f"{name}:{name}" for name in names)
    return [
        f"listeners={listeners},CONTROLLER://127.0.0.1:{controller}",
        f"advertised.listeners={listeners}",
        f"listener.security.protocol.map={protocols},CONTROLLER:PLAINTEXT",
    ]


def _security(credentials: LocalCredentials) -> list[str]:
    # No authorizer: any authenticated principal may do anything, as on a fresh cluster.
    login = {
        "plain": "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'user_{SASL_USER}="{credentials.password()}";',
        "scram-sha-256": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "scram-sha-512": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    }
    return [
        f"sasl.enabled.mechanisms={','.join(SASL_MECHANISMS)}",
        *(f"listener.name.sasl_ssl.{m}.sasl.jaas.config={jaas}" for m, jaas in login.items()),
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={credentials.broker_keystore}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={credentials.ca}",
        "listener.name.ssl.ssl.client.auth=required",
    ]


def _kafka_properties(home: Path, port: int, controller: int, secure: SecurePorts | None) -> str:
    data = home / "kafka" / "data"
    security = [] if secure is None else _security(local_credentials(home))
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{controller}",
            *_listeners(port, controller, secure),
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            *security,
            f"log.dirs={data}",
            "num.partitions=1",
            # zync creates topics explicitly; a typo in a consumer must not create one.
            "auto.create.topics.enable=false",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "log.retention.hours=-1",
            "",
        ]
    )


def _kafka_command(java: str, home: Path, main: str, *args: str) -> list[str]:
    classpath = f"{jar_dir('kafka')}/*"
    log4j = home / "kafka" / "log4j2.properties"
    return [
        java, "-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j}", "-cp", classpath, main, *args,
    ]  # fmt: skip


def _format_kafka_storage(java: str, home: Path, properties: Path) -> None:
    if (home / "kafka" / "data" / "meta.properties").exists():
        return
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    command = _kafka_command(
        # One argument: a base64 id may start with "-", which the tool would take for a flag.
        java, home, "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}",
        "-c", str(properties), "--ignore-formatted",
    )  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise ZyncError(f"formatting Kafka storage failed: {done.stderr.strip()[-300:]}")


def _kafka_ready(port: int) -> bool:
    from confluent_kafka import KafkaException

    from zync_assets.kafka.clients import admin_client

    try:
        metadata = admin_client(KafkaSettings(f"127.0.0.1:{port}")).list_topics(timeout=1)
    except KafkaException:
        return False
    return bool(metadata.brokers)


def _create_scram_users(port: int, credentials: LocalCredentials) -> None:
    """Upsert user `zync`'s SCRAM credentials in KRaft's metadata (through the PLAINTEXT
    listener; idempotent, so a restarted stack keeps one user)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    from zync_assets.kafka.clients import admin_client

    password = credentials.password().encode()
    admin = admin_client(KafkaSettings(f"127.0.0.1:{port}"))
    # One request per mechanism: the broker refuses two changes to one user in one request.
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        info = ScramCredentialInfo(mechanism, _SCRAM_ITERATIONS)
        upsert = UserScramCredentialUpsertion(SASL_USER, info, password)
        try:
            for future in admin.alter_user_scram_credentials([upsert], request_timeout=30).values():
                future.result(timeout=30)
        except KafkaException as exc:
            raise ZyncError(f"creating Kafka's SCRAM user {SASL_USER!r} failed: {exc}") from exc


def _check_listeners(properties: Path, secure: SecurePorts | None) -> None:
    if secure is not None and "SASL_SSL://" not in properties.read_text():
        raise ZyncError(
            "Kafka is running without its secure listeners; stop the stack "
            "(`zync stack down`) and start it with `zync stack up --secure`"
        )


def launch_kafka(
    home: Path, port: int, controller: int, secure: SecurePorts | None = None
) -> Callable[[], Running]:
    """Start Kafka (unless running); returns a call that waits until it answers."""
    service = kafka_service(home)
    folder = home / "kafka"
    properties = folder / "server.properties"
    if (running := service.running()) is not None:
        _check_listeners(properties, secure)
        return lambda: running
    java = find_java(17, "Kafka", "ZYNC_KAFKA_JAVA_HOME")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "log4j2.properties").write_text(_LOG4J2)
    properties.write_text(_kafka_properties(home, port, controller, secure))
    properties.chmod(0o600)  # it holds the PLAIN user's password when secured
    _format_kafka_storage(java, home, properties)
    proc = service.launch(_kafka_command(java, home, "kafka.Kafka", str(properties)), port)

    def wait() -> Running:
        running = service.wait_ready(proc, port, lambda: _kafka_ready(port), KAFKA_START_TIMEOUT_S)
        if secure is not None:
            _create_scram_users(port, local_credentials(home))
        return running

    return wait
