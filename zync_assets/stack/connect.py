"""A Kafka Connect worker (distributed mode, one node) for Debezium's connectors.

It runs from the jars scripts/install.sh fetched (`.zync/jars/connect/`), with Debezium's
PostgreSQL source, its JDBC sink and an Avro converter in its plugin path
(`.zync/jars/connect-plugins/`). Connector configurations are files under
`resources/connect/` (see connectors.py); this module only runs the worker.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from pathlib import Path

from zync_assets.core.errors import ZyncError
from zync_assets.core.locations import INSTALL_HINT, jars_dir
from zync_assets.stack.java import find_java
from zync_assets.stack.process import Running, Service, console_log4j2

CONNECT_START_TIMEOUT_S = 90.0
CONNECT_GROUP = "zync-connect"

# A connector's start, its snapshot and a task's failure are worth a line each.
_LOG4J2 = console_log4j2(
    {"io.debezium": "INFO", "org.apache.kafka.connect.runtime.WorkerTask": "INFO"}
)


def service(home: Path) -> Service:
    return Service("connect", home / "run")


def connect_url(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def _folder(name: str) -> Path:
    folder = jars_dir() / name
    if not folder.is_dir() or not any(folder.iterdir()):
        raise ZyncError(f"the Kafka Connect {name} are missing from {folder}; {INSTALL_HINT}")
    return folder


def _worker_properties(home: Path, port: int, bootstrap: str) -> str:
    return "\n".join(
        [
            f"bootstrap.servers={bootstrap}",
            f"group.id={CONNECT_GROUP}",
            f"listeners=http://127.0.0.1:{port}",
            "rest.advertised.host.name=127.0.0.1",
            f"rest.advertised.port={port}",
            # Defaults for connectors that name no converter; ours always name theirs.
            "key.converter=org.apache.kafka.connect.json.JsonConverter",
            "value.converter=org.apache.kafka.connect.json.JsonConverter",
            f"config.storage.topic={CONNECT_GROUP}-configs",
            f"offset.storage.topic={CONNECT_GROUP}-offsets",
            f"status.storage.topic={CONNECT_GROUP}-status",
            "config.storage.replication.factor=1",
            "offset.storage.replication.factor=1",
            "status.storage.replication.factor=1",
            # Source offsets (the LSN Debezium has sent) are flushed each second, so a
            # restarted worker re-sends at most a second of changes (at-least-once:
            # zync's ingest and the upserting sink absorb the repeats).
            "offset.flush.interval.ms=1000",
            "topic.creation.enable=true",
            # Sinks read only committed records: zync's to-kafka writes in transactions,
            # and a killed one leaves an aborted batch a sink must not apply.
            "consumer.isolation.level=read_committed",
            f"plugin.path={_folder('connect-plugins')}",
            # Find plugins by their ServiceLoader manifests: 4 s to start instead of 10.
            "plugin.discovery=service_load",
            f"# data and logs: {home}",
            "",
        ]
    )


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"{connect_url(port)}/connector-plugins", timeout=2) as r:
            return r.status == 200 and bool(json.load(r))
    except (OSError, ValueError):
        return False


def launch_connect(home: Path, port: int, bootstrap: str) -> Callable[[], Running]:
    """Start the worker (unless running); returns a call that waits until its REST API
    answers with its plugins loaded."""
    svc = service(home)
    if (running := svc.running()) is not None:
        return lambda: running
    java = find_java(17, "Kafka Connect", "ZYNC_CONNECT_JAVA_HOME")
    folder = home / "connect"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "log4j2.properties").write_text(_LOG4J2)
    properties = folder / "worker.properties"
    properties.write_text(_worker_properties(home, port, bootstrap))
    command = [
        java, "-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={folder / 'log4j2.properties'}",
        "-cp", f"{_folder('connect')}/*",
        "org.apache.kafka.connect.cli.ConnectDistributed", str(properties),
    ]  # fmt: skip
    proc = svc.launch(command, port)
    return lambda: svc.wait_ready(proc, port, lambda: _ready(port), CONNECT_START_TIMEOUT_S)
