"""A Spark standalone cluster as stack services: one master and N workers on 127.0.0.1,
started from PySpark's own distribution (`spark-class` with Spark's Master and Worker
classes; nothing downloaded).

Point any zync command at it with `ZYNC_SPARK_MASTER=spark://127.0.0.1:PORT`: the command's
process is then the driver (it plans, commits Delta and runs to-kafka's sender) and the
workers' executors run its tasks (decode, transform, encode, write the data files). The
executors get zync's jars from the driver (`spark.jars`) and run no Python (zync has no
Python UDFs), so a worker needs nothing but Java (docs/operations.md).
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyspark

from zync_assets.core.errors import ZyncError
from zync_assets.spark.session import SPARK_LOG4J2
from zync_assets.stack.java import find_java
from zync_assets.stack.process import Running, Service

CLUSTER_START_TIMEOUT_S = 90.0
_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


@dataclass(frozen=True)
class ClusterPorts:
    """The master's RPC port, its web UI port (whose `/json/` says which workers joined) and
    one RPC port per worker."""

    master: int = 7077
    master_ui: int = 8090  # not Spark's 8080: leave that to a cluster of the user's own
    workers: tuple[int, ...] = ()


def master_url(port: int) -> str:
    return f"spark://127.0.0.1:{port}"


def master_service(state: Path) -> Service:
    return Service("spark-master", state / "run", stop_timeout=20.0)


def worker_service(state: Path, number: int) -> Service:
    # SIGTERM to the group: the worker stops its executors with it.
    return Service(f"spark-worker-{number}", state / "run", stop_timeout=20.0)


def cluster_services(state: Path, workers: int = 8) -> list[Service]:
    """The master and every worker a stack may have started, workers first (the order they
    stop in)."""
    return [*(worker_service(state, n) for n in range(workers, 0, -1)), master_service(state)]


def _spark_env(java: str) -> dict[str, str]:
    home = Path(pyspark.__file__).parent
    return {
        **os.environ,
        "JAVA_HOME": str(Path(java).resolve().parent.parent),
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        # The daemons' own log lines: Spark's WARNs and up, to the service's log.
        "SPARK_DAEMON_JAVA_OPTS": f"-Dlog4j2.configurationFile={SPARK_LOG4J2}",
        "SPARK_DAEMON_MEMORY": "512m",
    }


def _spark_class(*args: str) -> list[str]:
    return [str(Path(pyspark.__file__).parent / "bin" / "spark-class"), *args]


def alive_workers(ui_port: int) -> int | None:
    """How many workers the master counts as alive; None if the master does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=1) as answer:
            return int(json.load(answer).get("aliveworkers", 0))
    except (OSError, ValueError):
        return None


def launch_cluster(
    state: Path, ports: ClusterPorts, cores: int = 1, memory: str = "2g"
) -> Callable[[], list[Running]]:
    """Start the master and one worker per port in `ports.workers` (each with `cores` cores
    and `memory` for executors), unless running; returns a call that waits until the master
    counts every worker alive."""
    java = find_java(17, "Spark", "ZYNC_SPARK_JAVA_HOME")
    env = _spark_env(java)
    folder = state / "spark-cluster"
    folder.mkdir(parents=True, exist_ok=True)
    master = master_service(state)
    master_proc = None
    if master.running() is None:
        command = _spark_class(_MASTER_CLASS, "--host", "127.0.0.1", "--port", str(ports.master),
                               "--webui-port", str(ports.master_ui))  # fmt: skip
        master_proc = master.launch(command, ports.master, env=env, cwd=folder)
    workers = []
    for number, port in enumerate(ports.workers, start=1):
        worker = worker_service(state, number)
        proc = None
        if worker.running() is None:
            command = _spark_class(
                _WORKER_CLASS, "--host", "127.0.0.1", "--port", str(port), "--webui-port", "0",
                "--cores", str(cores), "--memory", memory,
                "--work-dir", str(folder / f"worker-{number}"), master_url(ports.master),
            )  # fmt: skip
            proc = worker.launch(command, port, env=env, cwd=folder)
        workers.append((worker, proc, port))

    def wait() -> list[Running]:
        """The master, then each worker, in order."""
        want = len(ports.workers)
        checks = [(master, master_proc, ports.master,
                   lambda: alive_workers(ports.master_ui) is not None)]  # fmt: skip
        checks += [(worker, proc, port, lambda: (alive_workers(ports.master_ui) or 0) >= want)
                   for worker, proc, port in workers]  # fmt: skip
        started = []
        for service, proc, port, ready in checks:
            running = service.running() if proc is None else None
            if running is None:
                assert proc is not None  # launched, or found running
                running = service.wait_ready(proc, port, ready, CLUSTER_START_TIMEOUT_S)
            started.append(running)
        return started

    return wait


def stop_cluster(state: Path) -> list[str]:
    """Stop the workers, then the master; the names of those that were running."""
    return [s.name for s in cluster_services(state) if s.stop()]


def require_workers(ui_port: int, want: int) -> None:
    """Refuse to measure or test on a cluster that lost a worker."""
    alive = alive_workers(ui_port)
    if alive is None or alive < want:
        raise ZyncError(
            f"the Spark master on UI port {ui_port} counts {alive or 0} alive workers, not "
            f"{want}; see the spark-worker logs under the stack's logs folder"
        )
