"""The local schema registry: Apicurio Registry 3 (Confluent-compatible API) on 127.0.0.1.

Plain HTTP by default. Secured (`zync stack up --secure`) it serves HTTPS only, with the
stack CA's server certificate, and asks every request for HTTP basic auth (user `zync`,
the stack's password) — Quarkus's own embedded-user realm, so no proxy in front.
"""

from __future__ import annotations

import base64
import ssl
import urllib.request
from collections.abc import Callable
from pathlib import Path

from zync_assets.core.errors import ZyncError
from zync_assets.core.locations import INSTALL_HINT
from zync_assets.core.settings import RegistrySettings
from zync_assets.stack.java import find_java
from zync_assets.stack.kafka import jar_dir
from zync_assets.stack.process import Running, Service
from zync_assets.stack.secure import SASL_USER, LocalCredentials, local_credentials

REGISTRY_START_TIMEOUT_S = 90.0
CCOMPAT_PATH = "/apis/ccompat/v7"


def registry_service(home: Path) -> Service:
    return Service("registry", home / "run")


def _secure_config(home: Path) -> Path:
    return home / "registry" / "secure.properties"


def is_secured(home: Path) -> bool:
    """Whether the registry of this stack home was last started secured."""
    return _secure_config(home).exists()


def registry_url(port: int, secure: bool = False) -> str:
    return f"{'https' if secure else 'http'}://127.0.0.1:{port}{CCOMPAT_PATH}"


def registry_v2_url(port: int) -> str:
    """The registry's Apicurio v2 API, which Kafka Connect's Avro converter talks to."""
    return f"http://127.0.0.1:{port}/apis/registry/v2"


def secured_registry_settings(home: Path, port: int) -> RegistrySettings:
    """Client settings for a secured registry: its URL, user, password and CA."""
    credentials = local_credentials(home)
    return RegistrySettings(
        registry_url(port, secure=True), SASL_USER, credentials.password(), str(credentials.ca)
    )


def _ready(settings: RegistrySettings) -> bool:
    request = urllib.request.Request(f"{settings.url}/subjects")
    context = None
    if settings.ca:
        context = ssl.create_default_context(cafile=settings.ca)
        token = base64.b64encode(f"{settings.user}:{settings.password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=1, context=context) as reply:
            return reply.status == 200
    except OSError:
        return False


def _write_secure_config(home: Path, credentials: LocalCredentials, port: int) -> Path:
    """Quarkus settings for HTTPS + basic auth, in an owner-only file: a password on the
    command line would show in every `ps`."""
    lines = [
        f"quarkus.http.ssl-port={port}",
        f"quarkus.http.ssl.certificate.files={credentials.server_cert}",
        f"quarkus.http.ssl.certificate.key-files={credentials.server_key}",
        "quarkus.http.insecure-requests=disabled",
        "quarkus.http.auth.basic=true",
        "quarkus.security.users.embedded.plain-text=true",
        f"quarkus.security.users.embedded.users.{SASL_USER}={credentials.password()}",
        f"quarkus.security.users.embedded.roles.{SASL_USER}=sr-admin",
        "quarkus.http.auth.permission.everything.paths=/*",
        "quarkus.http.auth.permission.everything.policy=authenticated",
    ]
    path = _secure_config(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text("\n".join(lines) + "\n")
    return path


def launch_registry(
    home: Path, port: int, management: int, secure: bool = False
) -> Callable[[], Running]:
    """Start the registry (unless running); returns a call that waits until it answers."""
    service = registry_service(home)
    if (running := service.running()) is not None:
        if secure and not is_secured(home):
            raise ZyncError(
                "the registry is running without TLS and basic auth; stop the stack "
                "(`zync stack down`) and start it with `zync stack up --secure`"
            )
        return lambda: running
    runner = jar_dir("registry") / "quarkus-run.jar"
    if not runner.exists():
        raise ZyncError(f"the schema registry is missing ({runner}); {INSTALL_HINT}")
    java = find_java(21, "the schema registry (Apicurio 3.3)", "ZYNC_REGISTRY_JAVA_HOME")
    _secure_config(home).unlink(missing_ok=True)
    secured = []
    if secure:
        config = _write_secure_config(home, local_credentials(home), port)
        secured = [f"-Dquarkus.config.locations={config}"]
    command = [
        java, "-Xms128m", "-Xmx512m", "-XX:TieredStopAtLevel=1",
        "-Dquarkus.http.host=127.0.0.1", f"-Dquarkus.http.port={port}", *secured,
        "-Dquarkus.log.level=WARN", "-Dquarkus.banner.enabled=false",
        # Its health/metrics interface would listen on 0.0.0.0:9000: keep it on loopback.
        "-Dquarkus.management.host=127.0.0.1", f"-Dquarkus.management.port={management}",
        # Schemas must outlive a restart as the topics do: H2 file storage under .zync/.
        "-Dapicurio.storage.kind=sql", "-Dapicurio.storage.sql.kind=h2",
        f"-Dapicurio.datasource.url=jdbc:h2:file:{home / 'registry' / 'schemas'}",
        "-jar", str(runner),
    ]  # fmt: skip
    proc = service.launch(command, port)
    settings = (
        secured_registry_settings(home, port) if secure else RegistrySettings(registry_url(port))
    )
    return lambda: service.wait_ready(
        proc, port, lambda: _ready(settings), REGISTRY_START_TIMEOUT_S
    )
