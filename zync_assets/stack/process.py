"""Start, track and stop one background service process by its PID file."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from zync_assets.core.errors import ZyncError


@dataclass(frozen=True)
class Running:
    pid: int
    port: int
    log: Path


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); treat it as gone.
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        return waited == 0
    except ChildProcessError:
        return True


class Service:
    """One named process: its command, its log, its PID file, its readiness probe."""

    def __init__(
        self,
        name: str,
        run_dir: Path,
        stop_signal: int = signal.SIGTERM,
        stop_group: bool = True,
        stop_timeout: float = 20.0,
    ) -> None:
        self.name = name
        self.stop_signal = stop_signal  # PostgreSQL shuts down fast on SIGINT, slowly on TERM
        # False: the signal goes to the leader alone, which stops its children itself
        # (`zync run` finishes its commit first; its Spark JVM must outlive the signal).
        self.stop_group = stop_group
        self.stop_timeout = stop_timeout  # then SIGKILL
        self.pid_file = run_dir / f"{name}.json"
        self.log = run_dir.parent / "logs" / f"{name}.log"

    def running(self) -> Running | None:
        if not self.pid_file.exists():
            return None
        info = json.loads(self.pid_file.read_text())
        if not _alive(info["pid"]):
            self.pid_file.unlink(missing_ok=True)
            return None
        return Running(info["pid"], info["port"], self.log)

    def launch(
        self,
        command: list[str],
        port: int,
        env: dict[str, str] | None = None,
        user: str | None = None,
        group: int | None = None,
        extra_groups: list[int] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.Popen:
        """Start the process in its own process group, logging to `self.log`, as `user`
        (default: this one)."""
        if not port_free(port):
            raise ZyncError(
                f"port {port} for {self.name} is in use on 127.0.0.1; stop whatever listens "
                f"there or pick another port (see `zync stack up --help`)"
            )
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            proc = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                user=user,
                group=group,
                extra_groups=extra_groups,
                cwd=cwd,
                start_new_session=True,  # own process group: stop() signals all of it
            )
        self.pid_file.write_text(json.dumps({"pid": proc.pid, "port": port}))
        return proc

    def wait_ready(
        self, proc: subprocess.Popen, port: int, ready: Callable[[], bool], timeout: float
    ) -> Running:
        """Poll `ready` until it answers; stop the process and explain if it never does."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.pid_file.unlink(missing_ok=True)
                raise ZyncError(
                    f"{self.name} exited with status {proc.returncode} while starting; "
                    f"see its log: {self.log}"
                )
            if ready():
                return Running(proc.pid, port, self.log)
            time.sleep(0.25)
        self.stop()
        raise ZyncError(
            f"{self.name} did not answer on port {port} within {timeout:g}s; "
            f"see its log: {self.log}"
        )

    def stop(self, timeout: float | None = None) -> bool:
        """Stop the process group; True if something was running."""
        running = self.running()
        if running is None:
            return False
        if self.stop_group:
            _signal_group(running.pid, self.stop_signal)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(running.pid, self.stop_signal)
        deadline = time.monotonic() + (self.stop_timeout if timeout is None else timeout)
        while _alive(running.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(running.pid):
            _signal_group(running.pid, signal.SIGKILL)
        self.pid_file.unlink(missing_ok=True)
        return True


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def console_log4j2(loggers: dict[str, str]) -> str:
    """A Log4j2 configuration that writes WARN and above to the console (the service's
    log file), and `loggers` (name -> level) at their own levels."""
    lines = [
        "status = warn",
        "appender.stdout.type = Console",
        "appender.stdout.name = STDOUT",
        "appender.stdout.layout.type = PatternLayout",
        "appender.stdout.layout.pattern = [%d] %p %m (%c)%n",
        "rootLogger.level = WARN",
        "rootLogger.appenderRef.stdout.ref = STDOUT",
    ]
    for i, (name, level) in enumerate(loggers.items()):
        lines += [f"logger.l{i}.name = {name}", f"logger.l{i}.level = {level}"]
    return "\n".join(lines) + "\n"
