"""Continuous ingest (`zync from-kafka`): commit every interval or max-records, stop cleanly."""

from __future__ import annotations

import time
from collections.abc import Callable

from zync_assets.ingest.ingest import IngestResult


def follow(
    run_once: Callable[[], list[IngestResult]],
    report: Callable[[IngestResult], None],
    interval: float,
    idle_timeout: float | None,
    stop_requested: Callable[[], bool],
) -> int:
    """Ingest repeatedly; each pass commits or writes nothing. Returns the runs committed.

    Stops after a pass when `stop_requested()` says so, or when nothing new arrived
    for `idle_timeout` seconds (None: never).
    """
    committed = 0
    last_data = time.monotonic()
    while True:
        started = time.monotonic()
        results = run_once()
        for result in results:
            report(result)
            if result.run is not None:
                committed += 1
                last_data = time.monotonic()
        if stop_requested():
            return committed
        if idle_timeout is not None and time.monotonic() - last_data >= idle_timeout:
            return committed
        busy = any(r.run is not None for r in results)
        pause = 0.0 if busy else max(0.0, interval - (time.monotonic() - started))
        deadline = time.monotonic() + pause
        while time.monotonic() < deadline and not stop_requested():
            time.sleep(min(0.2, deadline - time.monotonic()))
