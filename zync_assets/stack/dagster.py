"""`dagster dev` (webserver + daemon) as a stack service, and a small GraphQL client for it.

The daemon runs the Kafka sensors and the automation sensor, so once it is up, new
events flow raw → staging → output topics without anyone clicking anything.
Its instance (runs, materializations, sensor cursors) lives in `<state>/dagster`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from zync_assets.core.errors import ZyncError
from zync_assets.core.settings import RegistrySettings, registry_env
from zync_assets.lake.store import is_object_store
from zync_assets.stack.process import Running, Service

DAGSTER_PORT = 3000
DAGSTER_START_TIMEOUT_S = 120.0

# Runs are separate processes, each with its own Spark JVM: two at a time is what a
# small machine carries; the rest wait in the queue, which is looked at every second
# (Dagster's default, 5 s, adds up to 5 s to every sensor-started change). Sensors are
# evaluated in threads: a Kafka sensor watches for new offsets for most of the daemon's
# 5-s loop (orchestration/raw.py), and one pool's watch must not hold up the next's.
_INSTANCE_YAML = """\
telemetry:
  enabled: false
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config:
    max_concurrent_runs: 2
    dequeue_interval_seconds: 1
sensors:
  use_threads: true
  num_workers: 8
"""

# Paths the runs resolve: absolute, since runs start in other working directories.
_PATH_VARIABLES = ("ZYNC_LAKE", "ZYNC_HOME", "ZYNC_SPECS", "ZYNC_JARS")


def dagster_home(state: Path) -> Path:
    return state / "dagster"


def instance_home(state: Path) -> Path | None:
    """The Dagster instance to report to: $DAGSTER_HOME, else the stack's if it exists."""
    if os.environ.get("DAGSTER_HOME"):
        return Path(os.environ["DAGSTER_HOME"])
    home = dagster_home(state)
    return home if (home / "dagster.yaml").is_file() else None


def dagster_url(port: int = DAGSTER_PORT) -> str:
    return f"http://127.0.0.1:{port}"


def graphql(url: str, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    """One query against the webserver's GraphQL API; its `data`, or ZyncError."""
    try:
        response = requests.post(
            f"{url}/graphql", json={"query": query, "variables": variables or {}}, timeout=10
        )
        response.raise_for_status()
    except requests.RequestException as exc:
        raise ZyncError(f"the Dagster webserver at {url} did not answer ({exc})") from exc
    body = response.json()
    if body.get("errors"):
        raise ZyncError(f"Dagster GraphQL error: {body['errors'][0].get('message')}")
    return body["data"]


_LOCATIONS = """
{ workspaceOrError { __typename ... on Workspace { locationEntries {
    name loadStatus
    locationOrLoadError { __typename ... on PythonError {
        message cause { message cause { message cause { message } } }
    } }
} } } }
"""


def _root_cause(error: dict[str, Any]) -> str:
    """The innermost error's first line: e.g. the spec file that does not parse."""
    while error.get("cause"):
        error = error["cause"]
    return error["message"].strip().splitlines()[0]


def _code_loaded(url: str) -> bool:
    """True once the webserver answers and every code location has loaded."""
    try:
        data = graphql(url, _LOCATIONS)
    except ZyncError:
        return False
    entries = data["workspaceOrError"].get("locationEntries") or []
    for entry in entries:
        location = entry.get("locationOrLoadError") or {}
        if location.get("__typename") == "PythonError":
            raise ZyncError(
                f"Dagster could not load code location {entry['name']}: {_root_cause(location)}"
            )
    return bool(entries) and all(e["loadStatus"] == "LOADED" for e in entries)


def _dagster_env(
    home: Path, kafka: str, registry: RegistrySettings, spark: str | None
) -> dict[str, str]:
    """The runs talk to this stack's Kafka, registry and Spark Connect server (when it has
    one: every run then shares its warm JVM), whatever the caller's defaults."""
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "ZYNC_KAFKA_BOOTSTRAP": kafka,
        **registry_env(registry),
    }
    if spark is not None:
        env["ZYNC_SPARK_MASTER"] = spark
    for name in _PATH_VARIABLES:
        if env.get(name) and not is_object_store(env[name]):
            env[name] = str(Path(env[name]).resolve())
    return env


def launch_dagster(
    state: Path, port: int, kafka: str, registry: RegistrySettings, spark: str | None = None
) -> Callable[[], Running]:
    """Start `dagster dev -m zync_assets.definitions` (unless running); returns a call that
    waits until its code is loaded."""
    service = dagster_service(state)
    if (running := service.running()) is not None:
        return lambda: running
    home = dagster_home(state)
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():  # yours to edit afterwards (e.g. max_concurrent_runs)
        config.write_text(_INSTANCE_YAML)
    dagster = str(Path(sys.executable).parent / "dagster")
    command = [dagster, "dev", "-m", "zync_assets.definitions", "-h", "127.0.0.1", "-p", str(port)]
    proc = service.launch(command, port, env=_dagster_env(home, kafka, registry, spark))
    url = dagster_url(port)
    return lambda: service.wait_ready(
        proc, port, lambda: _code_loaded(url), DAGSTER_START_TIMEOUT_S
    )


def dagster_service(state: Path) -> Service:
    return Service("dagster", state / "run")
