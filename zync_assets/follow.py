"""Continuous mode for `from-kafka` and `to-kafka`: pass after pass, stopping cleanly."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from zync_assets.errors import Unavailable
from zync_assets.settings import outage_retry_seconds

R = TypeVar("R")

RETRY_PAUSE_S = 5.0


def _warn(message: str) -> None:
    print(f"zync: {message}", file=sys.stderr, flush=True)


def follow(
    run_once: Callable[[], Sequence[R]],
    report: Callable[[R], None],
    did_work: Callable[[R], bool],
    interval: float,
    idle_timeout: float | None,
    stop_requested: Callable[[], bool],
    warn: Callable[[str], None] = _warn,
) -> int:
    """Run passes until told to stop; each pass commits whole units or nothing.

    A pass that did work is followed at once by the next; an idle one waits out
    `interval`. Stops after a pass when `stop_requested()` says so, or when no pass
    did work for `idle_timeout` seconds (None: never). Returns the results that did work.

    When Kafka or the registry is unavailable, a continuous run (idle_timeout not 0) says
    so and runs the pass again every few seconds, for up to `outage_retry_seconds()`;
    a single pass fails at once. Either way the failed pass committed nothing.
    """
    worked = 0
    last_work = time.monotonic()
    outage = _Outage(outage_retry_seconds() if idle_timeout != 0.0 else 0.0, warn)
    while True:
        started = time.monotonic()
        try:
            results = run_once()
        except Unavailable as exc:
            outage.retry_or_raise(exc)
            _sleep(RETRY_PAUSE_S, stop_requested)
            if stop_requested():
                return worked
            continue
        outage.over()
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
        _sleep(pause, stop_requested)


def _sleep(seconds: float, stop_requested: Callable[[], bool]) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not stop_requested():
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))


class _Outage:
    """Since when a service has been unavailable, and whether to go on retrying."""

    def __init__(self, budget: float, warn: Callable[[str], None]) -> None:
        self.budget = budget
        self.warn = warn
        self.since: float | None = None

    def retry_or_raise(self, exc: Unavailable) -> None:
        now = time.monotonic()
        self.since = self.since if self.since is not None else now
        left = self.budget - (now - self.since)
        if left <= 0:
            if self.budget > 0:
                self.warn(f"gave up after {now - self.since:.0f}s of retrying")
            raise exc
        self.warn(f"{exc} — retrying in {RETRY_PAUSE_S:g}s (for up to {left:.0f}s more)")

    def over(self) -> None:
        if self.since is not None:
            self.warn(f"back after {time.monotonic() - self.since:.0f}s; continuing")
            self.since = None
