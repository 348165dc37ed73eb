"""The catalog's metastore as a stack service: Apache Derby's network server over one
database kept in `.zync/metastore/`, which Spark's Hive catalog uses as its metastore.

Why a server: Spark's default metastore is an embedded Derby database, which one JVM at
a time may open. A running pipeline would lock every other reader out (`zync query`, a
Dagster run, a notebook); over the network server they all share it. The server is
Derby's own (`derbynet`, with the engine PySpark ships), so it persists across restarts
with nothing more to install.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pyspark

from zync_assets.core.errors import ZyncError
from zync_assets.core.locations import jars_dir
from zync_assets.spark.catalog import CATALOG_FETCH_HINT
from zync_assets.stack.java import find_java
from zync_assets.stack.process import Running, Service

METASTORE_PORT = 1527  # Derby's own default
METASTORE_START_TIMEOUT_S = 60.0
DATABASE = "metastore"


def metastore_service(home: Path) -> Service:
    return Service("catalog", home / "run", stop_timeout=15.0)


def metastore_url(port: int) -> str:
    """The JDBC URL to give as ZYNC_METASTORE (the database is made on first use)."""
    return f"jdbc:derby://127.0.0.1:{port}/{DATABASE};create=true"


def server_class_path() -> str:
    """Derby's network server and client (the jar cache) with its engine (PySpark's)."""
    shipped = Path(pyspark.__file__).parent / "jars"
    engine = sorted(shipped.glob("derby*.jar"))
    network = sorted((jars_dir() / "catalog").glob("derby*.jar"))
    if not any(p.name.startswith("derbynet") for p in network):
        raise ZyncError(
            f"Derby's network server is missing from {jars_dir() / 'catalog'}; {CATALOG_FETCH_HINT}"
        )
    return ":".join(str(p) for p in [*network, *engine])


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def launch_metastore(home: Path, port: int) -> Callable[[], Running]:
    """Start Derby's network server on 127.0.0.1 (unless running); returns a call that
    waits until it accepts connections."""
    service = metastore_service(home)
    if (running := service.running()) is not None:
        return lambda: running
    java = find_java(17, "the catalog's metastore", "ZYNC_METASTORE_JAVA_HOME")
    folder = home / "metastore"
    folder.mkdir(parents=True, exist_ok=True)
    command = [
        java, "-Xmx256m", f"-Dderby.system.home={folder}", "-cp", server_class_path(),
        "org.apache.derby.drda.NetworkServerControl", "start", "-h", "127.0.0.1",
        "-p", str(port), "-noSecurityManager",
    ]  # fmt: skip
    proc = service.launch(command, port, cwd=folder)
    return lambda: service.wait_ready(proc, port, lambda: _answers(port), METASTORE_START_TIMEOUT_S)
