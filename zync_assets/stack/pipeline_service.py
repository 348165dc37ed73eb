"""`zync run SPEC... --follow` as a stack service: the continuous pipeline, started with
the stack (`zync stack up --follow SPEC`) and stopped with it, after its current commit."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from zync_assets.core.settings import RegistrySettings, registry_env
from zync_assets.lake.lease import pipeline_feeding
from zync_assets.lake.store import is_object_store
from zync_assets.stack.process import Running, Service

# Spark's start, then the first pass over whatever the topics already hold.
PIPELINE_START_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 120.0  # the current commit may be a big one


def pipeline_service(state: Path) -> Service:
    return Service("pipeline", state / "run", stop_group=False, stop_timeout=STOP_TIMEOUT_S)


def launch_pipeline(
    state: Path, specs: list[Path], kafka: str, registry: RegistrySettings, pools: list[str]
) -> Callable[[], Running]:
    """Start `zync run SPECS --follow` (unless running); returns a call that waits until it
    holds its pools' leases (it took them before starting Spark: from then on, Dagster's
    sensors leave its pools to it)."""
    service = pipeline_service(state)
    if (running := service.running()) is not None:
        return lambda: running
    env = {
        **os.environ,
        "ZYNC_KAFKA_BOOTSTRAP": kafka,
        **registry_env(registry),
        "ZYNC_HOME": str(state),  # `zync run` reports to the stack's Dagster, if it has one
    }
    if env.get("ZYNC_LAKE") and not is_object_store(env["ZYNC_LAKE"]):
        env["ZYNC_LAKE"] = str(Path(env["ZYNC_LAKE"]).resolve())
    zync = str(Path(sys.executable).parent / "zync")
    command = [zync, "run", *(str(p.resolve()) for p in specs), "--follow"]
    proc = service.launch(command, 0, env=env)

    def holds_leases() -> bool:
        lease = pipeline_feeding(pools[0])
        return lease is not None and lease.pid == proc.pid

    return lambda: service.wait_ready(proc, 0, holds_leases, PIPELINE_START_TIMEOUT_S)
