"""Private PostgreSQL clusters for the CDC stack, from Debian's server binaries.

Two clusters, each its own data directory under `.zync/postgres/` and its own port on
127.0.0.1: `source`, the database Debezium captures (`wal_level=logical`), and
`warehouse`, where the JDBC sink writes. Separate clusters, so the source can be
restarted (as the restart tests do) without taking the warehouse with it.

PostgreSQL refuses to run as root: when zync runs as root the clusters run as the
`postgres` user the Debian package creates. Authentication is `trust` on loopback —
this is a local development and test stack; point zync at your own database for more.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from zync_assets.core.errors import ZyncError
from zync_assets.stack.process import Running, Service

POSTGRES_START_TIMEOUT_S = 30.0
SUPERUSER = "postgres"


@dataclass(frozen=True)
class Cluster:
    name: str  # source | warehouse
    database: str  # the one database the stack creates in it
    logical: bool  # wal_level=logical, for Debezium's replication slot


SOURCE = Cluster("source", "shop", logical=True)
WAREHOUSE = Cluster("warehouse", "warehouse", logical=False)
CLUSTERS = (SOURCE, WAREHOUSE)


def postgres_bin() -> Path:
    """The newest installed PostgreSQL's bin directory (Debian: /usr/lib/postgresql/N/bin)."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/postgres"),
        key=lambda p: int(Path(p).parent.parent.name),
    )
    if not found:
        if shutil.which("postgres"):
            return Path(shutil.which("postgres") or "").parent
        raise ZyncError("PostgreSQL is not installed; run scripts/install.sh")
    return Path(found[-1]).parent


def _run_as() -> str | None:
    """The user to run PostgreSQL as: `postgres` when we are root, else ourselves."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SUPERUSER)
    except KeyError as e:
        raise ZyncError(
            "PostgreSQL cannot run as root and there is no `postgres` user; "
            "run scripts/install.sh (Debian's postgresql package creates it)"
        ) from e
    return SUPERUSER


def as_user(user: str | None) -> dict:
    """subprocess arguments that run a child as `user` with only that user's group (not
    root's groups, which would make a 0700 folder of root's unreachable to it)."""
    if user is None:
        return {}
    return {"user": user, "group": pwd.getpwnam(user).pw_gid, "extra_groups": []}


def service(home: Path, cluster: Cluster) -> Service:
    return Service(f"pg-{cluster.name}", home / "run", stop_signal=signal.SIGINT)


def dsn(port: int, database: str, user: str = SUPERUSER) -> str:
    return f"host=127.0.0.1 port={port} dbname={database} user={user}"


def _data_dir(home: Path, cluster: Cluster) -> Path:
    return home / "postgres" / cluster.name


def _init(home: Path, cluster: Cluster, user: str | None) -> None:
    data = _data_dir(home, cluster)
    if (data / "PG_VERSION").exists():
        return
    data.mkdir(parents=True, exist_ok=True)
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(data, entry.pw_uid, entry.pw_gid)
        _let_through(data.parent)
    command = [
        str(postgres_bin() / "initdb"), "-D", str(data), "-U", SUPERUSER,
        "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "--no-instructions",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, **as_user(user))
    if done.returncode != 0:
        raise ZyncError(
            f"initdb of the {cluster.name} PostgreSQL cluster failed: "
            f"{(done.stderr or done.stdout).strip()[-300:]}"
        )


def _let_through(folder: Path) -> None:
    """Let the `postgres` user reach its data directory: add search permission (x, not
    read) to each of our ancestors that lacks it, as a private temp folder (0700) does."""
    for parent in [folder, *folder.parents]:
        mode = parent.stat()
        if mode.st_uid == os.geteuid() and not mode.st_mode & 0o001:
            parent.chmod(mode.st_mode | 0o001)


def _settings(cluster: Cluster, port: int) -> list[str]:
    settings = {
        "port": str(port),
        "listen_addresses": "127.0.0.1",
        "unix_socket_directories": "",  # TCP on loopback only; no socket in /var/run
        "max_connections": "40",
        "shared_buffers": "32MB",
        "log_min_messages": "warning",
    }
    if cluster.logical:
        settings |= {"wal_level": "logical", "max_wal_senders": "10", "max_replication_slots": "10"}
    return [arg for key, value in settings.items() for arg in ("-c", f"{key}={value}")]


def _ready(port: int) -> bool:
    import psycopg

    try:
        with psycopg.connect(dsn(port, "postgres"), connect_timeout=1):
            return True
    except psycopg.OperationalError:
        return False


def create_database(port: int, database: str) -> None:
    """Create `database` in the cluster on `port` unless it exists."""
    import psycopg

    with psycopg.connect(dsn(port, "postgres"), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{database}"')


def launch_postgres(home: Path, cluster: Cluster, port: int) -> Callable[[], Running]:
    """Start `cluster` (initialising it the first time) unless it runs; returns a call
    that waits until it accepts connections and has its database."""
    svc = service(home, cluster)
    if (running := svc.running()) is not None:
        return lambda: running
    user = _run_as()
    _init(home, cluster, user)
    command = [str(postgres_bin() / "postgres"), "-D", str(_data_dir(home, cluster))]
    proc = svc.launch([*command, *_settings(cluster, port)], port, **as_user(user))

    def wait() -> Running:
        running = svc.wait_ready(proc, port, lambda: _ready(port), POSTGRES_START_TIMEOUT_S)
        create_database(port, cluster.database)
        return running

    return wait
