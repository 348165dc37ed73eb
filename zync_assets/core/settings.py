"""Connection settings from environment variables, `resources/*.json` or `~/.zync/*.json`.

Precedence: environment variable, then `resources/<file>.json` in the working
directory, then `~/.zync/<file>.json` (zync's keys), then the local-stack default.
Secrets are held here but never rendered by `describe()`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zync_assets.core.errors import ZyncError

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_REGISTRY_URL = "http://127.0.0.1:8081/apis/ccompat/v7"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

# env var -> key in zync's kafka.json
_KAFKA_KEYS = {
    "ZYNC_KAFKA_BOOTSTRAP": "bootstrap_servers",
    "ZYNC_KAFKA_SECURITY_PROTOCOL": "security_protocol",
    "ZYNC_KAFKA_SASL_MECHANISM": "sasl_mechanisms",
    "ZYNC_KAFKA_SASL_USERNAME": "sasl_username",
    "ZYNC_KAFKA_SASL_PASSWORD": "sasl_password",
    "ZYNC_KAFKA_SSL_CA": "tls_server_ca_cert_file",
    "ZYNC_KAFKA_SSL_CERT": "tls_client_cert_file",
    "ZYNC_KAFKA_SSL_KEY": "tls_client_key_file",
}
_REGISTRY_KEYS = {
    "ZYNC_SCHEMA_REGISTRY_URL": "url",
    "ZYNC_SCHEMA_REGISTRY_USER": "user",
    "ZYNC_SCHEMA_REGISTRY_PASSWORD": "password",
    "ZYNC_SCHEMA_REGISTRY_CA": "ca_cert_file",
}


def _read_json_config(name: str) -> dict[str, Any]:
    for folder in (Path("resources"), Path.home() / ".zync"):
        path = folder / name
        if path.is_file():
            try:
                data = json.loads(path.read_text())
            except json.JSONDecodeError as exc:
                raise ZyncError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
            if not isinstance(data, dict):
                raise ZyncError(f"{path}: expected a JSON object of settings")
            return data
    return {}


def _merge(
    keys: Mapping[str, str], file_values: Mapping[str, Any], env: Mapping[str, str]
) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for env_name, file_key in keys.items():
        value = env.get(env_name) or file_values.get(file_key)
        if value not in (None, ""):
            merged[file_key] = value
    return merged


@dataclass(frozen=True)
class KafkaSettings:
    bootstrap_servers: str = DEFAULT_BOOTSTRAP
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_ca: str | None = None
    ssl_cert: str | None = None
    ssl_key: str | None = None
    ssl_skip_verify: bool = False

    def client_config(self) -> dict[str, Any]:
        """librdkafka settings shared by producers, consumers and admin clients."""
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
        }
        if self.security_protocol.startswith("SASL_"):
            config["sasl.mechanism"] = self.sasl_mechanism or "PLAIN"
            if self.sasl_username is not None:
                config["sasl.username"] = self.sasl_username
            if self.sasl_password is not None:
                config["sasl.password"] = self.sasl_password
        if self.security_protocol.endswith("SSL"):
            if self.ssl_ca:
                config["ssl.ca.location"] = self.ssl_ca
            if self.ssl_cert and self.ssl_key:
                config["ssl.certificate.location"] = self.ssl_cert
                config["ssl.key.location"] = self.ssl_key
            if self.ssl_skip_verify:
                config["enable.ssl.certificate.verification"] = False
        return config

    def describe(self) -> str:
        return f"{self.bootstrap_servers} ({self.security_protocol})"


@dataclass(frozen=True)
class RegistrySettings:
    url: str = DEFAULT_REGISTRY_URL
    user: str | None = None
    password: str | None = None
    ca: str | None = None  # the CA that signed an https registry's certificate

    def client_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"url": self.url, "timeout": 10}
        if self.user:
            config["basic.auth.user.info"] = f"{self.user}:{self.password or ''}"
        if self.ca:
            config["ssl.ca.location"] = self.ca
        return config


def kafka_settings(env: Mapping[str, str] | None = None) -> KafkaSettings:
    env = os.environ if env is None else env
    values = _merge(_KAFKA_KEYS, _read_json_config("kafka.json"), env)
    protocol = str(values.get("security_protocol", "PLAINTEXT")).upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ZyncError(
            f"unknown Kafka security protocol {protocol!r}: "
            f"set ZYNC_KAFKA_SECURITY_PROTOCOL to one of {', '.join(SECURITY_PROTOCOLS)}"
        )
    mechanism = values.get("sasl_mechanisms")
    if mechanism is not None and str(mechanism).upper() not in SASL_MECHANISMS:
        raise ZyncError(
            f"unknown SASL mechanism {mechanism!r}: "
            f"set ZYNC_KAFKA_SASL_MECHANISM to one of {', '.join(SASL_MECHANISMS)}"
        )
    skip = _read_json_config("kafka.json").get("tls_server_insecure_skip_verify", False)
    return KafkaSettings(
        bootstrap_servers=str(values.get("bootstrap_servers", DEFAULT_BOOTSTRAP)),
        security_protocol=protocol,
        sasl_mechanism=str(mechanism).upper() if mechanism else None,
        sasl_username=values.get("sasl_username"),
        sasl_password=values.get("sasl_password"),
        ssl_ca=values.get("tls_server_ca_cert_file"),
        ssl_cert=values.get("tls_client_cert_file"),
        ssl_key=values.get("tls_client_key_file"),
        ssl_skip_verify=bool(skip),
    )


def registry_settings(env: Mapping[str, str] | None = None) -> RegistrySettings:
    env = os.environ if env is None else env
    values = _merge(_REGISTRY_KEYS, _read_json_config("schema_registry.json"), env)
    return RegistrySettings(
        url=str(values.get("url", DEFAULT_REGISTRY_URL)).rstrip("/"),
        user=values.get("user"),
        password=values.get("password"),
        ca=values.get("ca_cert_file"),
    )


def kafka_env(settings: KafkaSettings) -> dict[str, str]:
    """The `ZYNC_KAFKA_*` variables that configure `settings` (for a child process)."""
    values = {
        "ZYNC_KAFKA_BOOTSTRAP": settings.bootstrap_servers,
        "ZYNC_KAFKA_SECURITY_PROTOCOL": settings.security_protocol,
        "ZYNC_KAFKA_SASL_MECHANISM": settings.sasl_mechanism,
        "ZYNC_KAFKA_SASL_USERNAME": settings.sasl_username,
        "ZYNC_KAFKA_SASL_PASSWORD": settings.sasl_password,
        "ZYNC_KAFKA_SSL_CA": settings.ssl_ca,
        "ZYNC_KAFKA_SSL_CERT": settings.ssl_cert,
        "ZYNC_KAFKA_SSL_KEY": settings.ssl_key,
    }
    return {name: value for name, value in values.items() if value is not None}


def registry_env(settings: RegistrySettings) -> dict[str, str]:
    """The `ZYNC_SCHEMA_REGISTRY_*` variables that configure `settings`."""
    values = {
        "ZYNC_SCHEMA_REGISTRY_URL": settings.url,
        "ZYNC_SCHEMA_REGISTRY_USER": settings.user,
        "ZYNC_SCHEMA_REGISTRY_PASSWORD": settings.password,
        "ZYNC_SCHEMA_REGISTRY_CA": settings.ca,
    }
    return {name: value for name, value in values.items() if value is not None}


DEFAULT_SENSOR_INTERVAL = "1s"


DEFAULT_CONNECT_URL = "http://127.0.0.1:8083"  # the stack's Kafka Connect (`zync stack up --cdc`)


DEFAULT_SINK_STALL_AFTER_S = 300.0


@dataclass(frozen=True)
class SinkSettings:
    """The Kafka Connect worker that runs the sinks of zync's output topics, and which of
    its connectors `zync status` reports on (none named: every sink connector it has)."""

    connect_url: str = DEFAULT_CONNECT_URL
    names: tuple[str, ...] = ()
    # A RUNNING sink whose oldest waiting record is older than this has stalled: status
    # names it and a continuous run restarts its tasks (at most once per this interval).
    # Connect commits a healthy sink's offsets every few seconds (the stack: 1 s).
    stall_after_s: float = DEFAULT_SINK_STALL_AFTER_S


def sink_settings(env: Mapping[str, str] | None = None) -> SinkSettings:
    """`ZYNC_CONNECT_URL`, `ZYNC_SINKS` (connector names, comma-separated) and
    `ZYNC_SINK_STALL_AFTER` (a duration, default 5m)."""
    env = os.environ if env is None else env
    url = env.get("ZYNC_CONNECT_URL") or DEFAULT_CONNECT_URL
    if not re.match(r"^https?://[^/\s]+", url):
        raise ZyncError(
            f"ZYNC_CONNECT_URL={url!r} is not a URL: give Kafka Connect's REST address, "
            f"e.g. {DEFAULT_CONNECT_URL}"
        )
    names = tuple(n.strip() for n in env.get("ZYNC_SINKS", "").split(",") if n.strip())
    stall_after = _duration(env, "ZYNC_SINK_STALL_AFTER", "5m", minimum=1.0)
    return SinkSettings(url.rstrip("/"), names, stall_after)


def sensor_interval_seconds(env: Mapping[str, str] | None = None) -> int:
    """How often Dagster's sensors look for new data (`ZYNC_SENSOR_INTERVAL`, e.g. 1s, 1m).

    Dagster's sensor daemon evaluates sensors at most every 5 s, and skips a sensor whose
    last evaluation started less than its interval ago: an interval of 5 s meant every 5 or
    10 s, as the daemon's loop drifted. The default, 1 s, is every loop.

    The Kafka sensors read only end offsets, so a short interval is cheap.
    """
    return int(_duration(env, "ZYNC_SENSOR_INTERVAL", DEFAULT_SENSOR_INTERVAL, minimum=1))


DEFAULT_DISCOVERY_INTERVAL = "10s"


def discovery_interval_seconds(env: Mapping[str, str] | None = None) -> float:
    """How often a running pipeline asks Kafka for topics its specs' patterns take
    (`ZYNC_DISCOVERY_INTERVAL`, e.g. 10s, 1m): a new table's topic is ingested within it."""
    return _duration(env, "ZYNC_DISCOVERY_INTERVAL", DEFAULT_DISCOVERY_INTERVAL, minimum=1)


DEFAULT_OUTAGE_RETRY = "5m"


def outage_retry_seconds(env: Mapping[str, str] | None = None) -> float:
    """How long a continuous command keeps retrying an unavailable Kafka or registry
    (`ZYNC_OUTAGE_RETRY`, e.g. 30s, 10m; 0 fails at once)."""
    return _duration(env, "ZYNC_OUTAGE_RETRY", DEFAULT_OUTAGE_RETRY)


def _duration(
    env: Mapping[str, str] | None, name: str, default: str, minimum: float = 0.0
) -> float:
    """The duration variable `name` in seconds; a bad one names the variable."""
    from zync_assets.core.timeparse import parse_duration

    text = (os.environ if env is None else env).get(name, default)
    try:
        seconds = parse_duration(text)
    except ZyncError as exc:
        raise ZyncError(f"{name}: {exc}") from exc
    if seconds < minimum:
        raise ZyncError(f"{name} is {text!r}: give at least {minimum:g}s")
    return seconds


# The master URLs Spark takes (its `SparkContext` parses these forms), and Spark Connect's.
_SPARK_MASTER = re.compile(
    r"local(\[(\d+|\*)(,\d+)?\])?|local-cluster\[\d+, *\d+, *\d+\]|yarn"
    r"|(spark|k8s|mesos)://\S+|sc://[^/:;\s]+(:\d+)?(/.*)?"
)


def spark_master(env: Mapping[str, str] | None = None) -> str:
    """`ZYNC_SPARK_MASTER`: a Spark master URL, or `sc://host:port` for a Spark Connect
    server; `local[*]` (a JVM in this process) by default. Anything else is refused here,
    in one line, rather than by a JVM that exits before it says why."""
    master = (os.environ if env is None else env).get("ZYNC_SPARK_MASTER", "local[*]")
    if not _SPARK_MASTER.fullmatch(master):
        raise ZyncError(
            f"ZYNC_SPARK_MASTER={master!r} is not a Spark master: give local[*], "
            "spark://host:port (a standalone cluster) or sc://host:port (a Spark Connect "
            "server), or unset it to run Spark in this process"
        )
    return master


def verbose(env: Mapping[str, str] | None = None) -> bool:
    """Whether third-party client output is wanted (`zync -v` sets ZYNC_VERBOSE; ZYNC_DEBUG
    implies it): Spark's and librdkafka's logs, otherwise kept off the user's terminal."""
    values = os.environ if env is None else env
    return any(values.get(name, "") not in ("", "0") for name in ("ZYNC_VERBOSE", "ZYNC_DEBUG"))


# The metastore databases zync knows the JDBC driver of: a URL's prefix → the driver class.
# Derby's network client is in the jar cache (`zync jars --catalog`); another database's
# driver jar goes on the driver's class path (spark.driver.extraClassPath, spark.conf).
METASTORE_DRIVERS = {
    "jdbc:derby://": "org.apache.derby.jdbc.ClientDriver",
    "jdbc:postgresql://": "org.postgresql.Driver",
    "jdbc:mysql://": "com.mysql.cj.jdbc.Driver",
}
DEFAULT_CATALOG_DATABASE = "zync"


@dataclass(frozen=True)
class CatalogSettings:
    """Where the lake's tables are registered by name: a Hive metastore database
    (`metastore`, a JDBC URL; empty: no catalog) and the catalog database they go in."""

    metastore: str = ""
    database: str = DEFAULT_CATALOG_DATABASE

    @property
    def enabled(self) -> bool:
        return bool(self.metastore)

    @property
    def driver(self) -> str:
        return next(
            d for prefix, d in METASTORE_DRIVERS.items() if self.metastore.startswith(prefix)
        )


def catalog_settings(env: Mapping[str, str] | None = None) -> CatalogSettings:
    """`ZYNC_METASTORE` (a JDBC URL) and `ZYNC_CATALOG_DATABASE`, checked."""
    env = os.environ if env is None else env
    url = env.get("ZYNC_METASTORE", "").strip()
    database = env.get("ZYNC_CATALOG_DATABASE", "").strip() or DEFAULT_CATALOG_DATABASE
    return checked_catalog(
        CatalogSettings(url, database), "ZYNC_METASTORE", "ZYNC_CATALOG_DATABASE"
    )


def checked_catalog(
    settings: CatalogSettings, url_name: str, database_name: str
) -> CatalogSettings:
    """`settings`, or a one-line error naming the setting that is wrong."""
    url = settings.metastore
    if url and not url.startswith(tuple(METASTORE_DRIVERS)):
        raise ZyncError(
            f"{url_name} is {url!r}: give the metastore database's JDBC URL, e.g. "
            "jdbc:derby://127.0.0.1:1527/metastore;create=true (`zync stack up --catalog` "
            "prints it), or a jdbc:postgresql:// or jdbc:mysql:// URL"
        )
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", settings.database):
        raise ZyncError(
            f"{database_name} is {settings.database!r}: give a database name of letters, "
            "digits and _ (default zync)"
        )
    return settings
