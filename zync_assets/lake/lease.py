"""Which running pipeline (`zync run --follow`) feeds a pool: a heartbeat file per pool.

Dagster's sensors read it so they start no run that would only race the pipeline.
It is advice, not a lock: exactly once never depends on it (each stage's commit does),
so a stale or missing file costs at most a run that finds nothing new.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from zync_assets.core.config import carried
from zync_assets.lake import store as lake_store
from zync_assets.lake.pools import check_pool_name, lake_entry

# A heartbeat older than this is a pipeline that died without removing its files.
LEASE_TTL_S = 30.0
BEAT_EVERY_S = 5.0


@dataclass(frozen=True)
class Lease:
    pid: int
    host: str
    specs: list[str]
    heartbeat: float  # time.time() of the last beat

    def describe(self) -> str:
        return f"`zync run` (pid {self.pid} on {self.host}, specs {', '.join(self.specs)})"


def _lease_file(pool: str) -> str:
    return lake_entry(".pipelines", f"{check_pool_name(pool)}.json")  # a dot: never a pool name


def _alive(lease: Lease, now: float) -> bool:
    if now - lease.heartbeat > LEASE_TTL_S:
        return False
    if lease.host != socket.gethostname():
        return True
    try:
        os.kill(lease.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pipeline_feeding(pool: str) -> Lease | None:
    """The live pipeline that feeds `pool`, if any."""
    try:
        lease = Lease(**json.loads(lake_store.read_text(_lease_file(pool)) or ""))
    except (OSError, ValueError, TypeError):
        return None
    return lease if _alive(lease, time.time()) else None


class PipelineLeases:
    """Held by a running pipeline from `hold()` to `release()`; a thread beats meanwhile
    (a pass over a large backlog can outlast the TTL many times)."""

    def __init__(self, pools: Iterable[str], specs: list[str]) -> None:
        self.pools = sorted(set(pools))
        self.specs = specs
        self._last_beat = 0.0
        self._released = threading.Event()

    def hold(self) -> None:
        self.beat()
        threading.Thread(
            target=carried(self._beat_until_released), name="lease", daemon=True
        ).start()

    def _beat_until_released(self) -> None:
        while not self._released.wait(BEAT_EVERY_S):
            self.beat()

    def beat(self) -> None:
        now = time.time()
        if now - self._last_beat < BEAT_EVERY_S:
            return
        lease = Lease(os.getpid(), socket.gethostname(), self.specs, now)
        for pool in self.pools:  # readers see the old beat or the new, never half
            lake_store.write_text(_lease_file(pool), json.dumps(asdict(lease)))
        self._last_beat = now

    def others(self) -> list[tuple[str, Lease]]:
        """Pools another live pipeline feeds already."""
        found = [(pool, pipeline_feeding(pool)) for pool in self.pools]
        return [(pool, lease) for pool, lease in found if lease and lease.pid != os.getpid()]

    def release(self) -> None:
        self._released.set()
        for pool in self.pools:
            lease = pipeline_feeding(pool)
            if lease is not None and lease.pid == os.getpid():
                lake_store.delete_file(_lease_file(pool))
