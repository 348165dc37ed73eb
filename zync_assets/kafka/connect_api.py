"""Kafka Connect's REST API: the calls the stack's commands and `zync status` make."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from zync_assets.core.errors import ZyncError


class ConnectApi:
    """The few calls of Kafka Connect's REST API the stack needs."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data, {"Content-Type": "application/json"}, method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as reply:
                text = reply.read()
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")
            if e.code == 404:
                raise LookupError(detail) from e
            raise ZyncError(f"Kafka Connect refused {method} {path}: {e.code} {detail}") from e
        except OSError as e:
            raise ZyncError(
                f"Kafka Connect does not answer at {self.url} ({e}); start it with "
                "`zync stack up --cdc`"
            ) from e
        return json.loads(text) if text else None

    def put(self, name: str, config: dict[str, str]) -> None:
        """Create the connector, or change its configuration (idempotent)."""
        self._call("PUT", f"/connectors/{name}/config", config)

    def names(self) -> list[str]:
        """The connectors the worker holds."""
        return list(self._call("GET", "/connectors"))

    def described(self) -> dict[str, Any]:
        """Every connector's configuration, type and status, in one call: name →
        `{"info": {"config", "type", …}, "status": {"connector", "tasks"}}`."""
        return dict(self._call("GET", "/connectors?expand=info&expand=status"))

    def delete(self, name: str) -> bool:
        """Delete the connector and the source offsets Connect keeps for it, so one made
        again under its name starts afresh (a source connector: with a new snapshot)."""
        try:
            self._call("PUT", f"/connectors/{name}/stop")
        except LookupError:
            return False
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.state(name)[0] != "STOPPED":
            time.sleep(0.2)
        self._call("DELETE", f"/connectors/{name}/offsets")
        self._call("DELETE", f"/connectors/{name}")
        return True

    def restart_task(self, name: str, task: int) -> None:
        """Restart one task of the connector (its thread, consumer and writer made anew)."""
        self._call("POST", f"/connectors/{name}/tasks/{task}/restart")

    def state(self, name: str) -> tuple[str, list[str]]:
        """The connector's state and its tasks' states, with each failed task's trace."""
        status = self._call("GET", f"/connectors/{name}/status")
        tasks = [
            t["state"] + (f": {t['trace'].splitlines()[0]}" if t.get("trace") else "")
            for t in status.get("tasks", [])
        ]
        return status["connector"]["state"], tasks

    def wait_running(self, name: str, timeout: float = 60.0) -> None:
        """Wait until the connector and all its tasks run; explain a failure."""
        deadline = time.monotonic() + timeout
        state: str = "UNKNOWN"
        tasks: list[str] = []
        while time.monotonic() < deadline:
            try:
                state, tasks = self.state(name)
            except LookupError:
                state, tasks = "UNKNOWN", []
            if any(t.startswith("FAILED") for t in tasks) or state == "FAILED":
                raise ZyncError(f"connector {name} failed: {state}; tasks: {tasks}")
            if state == "RUNNING" and tasks and all(t == "RUNNING" for t in tasks):
                return
            time.sleep(0.5)
        raise ZyncError(f"connector {name} is not running after {timeout:g}s: {state} {tasks}")
