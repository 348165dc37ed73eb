"""Continuous mode for `from-kafka` and `to-kafka`: pass after pass, stopping cleanly."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

R = TypeVar("R")


def follow(
    run_once: Callable[[], Sequence[R]],
    report: Callable[[R], None],
    did_work: Callable[[R], bool],
    interval: float,
    idle_timeout: float | None,
    stop_requested: Callable[[], bool],
) -> int:
    """Run passes until told to stop; each pass commits whole units or nothing.

    A pass that did work is followed at once by the next; an idle one waits out
    `interval`. Stops after a pass when `stop_requested()` says so, or when no pass
    did work for `idle_timeout` seconds (None: never). Returns the results that did work.
    """
    worked = 0
    last_work = time.monotonic()
    while True:
        started = time.monotonic()
        results = run_once()
        for result in results:
            report(result)
        busy = sum(1 for r in results if did_work(r))
        worked += busy
        if busy:
            last_work = time.monotonic()
        if stop_requested():
            return worked
        if idle_timeout is not None and time.monotonic() - last_work >= idle_timeout:
            return worked
        pause = 0.0 if busy else max(0.0, interval - (time.monotonic() - started))
        deadline = time.monotonic() + pause
        while time.monotonic() < deadline and not stop_requested():
            time.sleep(min(0.2, deadline - time.monotonic()))
