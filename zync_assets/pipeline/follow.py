"""Continuous mode: pass after pass, stopping cleanly; and a second loop beside the first."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Generic, TypeVar

from zync_assets.core.config import carried, current
from zync_assets.core.errors import Unavailable

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
    so and runs the pass again every few seconds, for up to the configuration's `outage_retry_s`;
    a single pass fails at once. Either way the failed pass committed nothing.
    """
    worked = 0
    last_work = time.monotonic()
    outage = _Outage(current().outage_retry_s if idle_timeout != 0.0 else 0.0, warn)
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


class Lane(Generic[R]):
    """A loop of passes (`follow`) in a thread of its own, beside the caller's loop.

    `finish()` asks for a catch-up: the lane stops after a pass that began after the call
    and found nothing new, so it has taken everything the caller's loop committed.
    `stop_requested()` (a signal) stops it after its current pass. A failure of the lane
    is kept in `error`; the caller's loop should stop on it (see `failed`) and raise it
    after `join()`."""

    def __init__(
        self,
        name: str,
        run_once: Callable[[], Sequence[R]],
        report: Callable[[R], None],
        did_work: Callable[[R], bool],
        interval: float,
        stop_requested: Callable[[], bool],
        started: Callable[[], None] = lambda: None,  # in the lane's thread, first
        yield_to: Turns | None = None,  # each pass waits for the other loop's (Turns)
    ) -> None:
        self.error: BaseException | None = None
        self._run_once = run_once
        self._did_work = did_work
        self._finishing = threading.Event()
        self._caught_up = False
        self._started = started
        self._yield_to = yield_to
        self._stop_requested = stop_requested
        self._thread = threading.Thread(
            target=carried(self._loop), args=(report, interval), name=name, daemon=True
        )

    def start(self) -> Lane[R]:
        self._thread.start()
        return self

    @property
    def failed(self) -> bool:
        return self.error is not None

    def finish(self) -> None:
        self._finishing.set()

    def join(self) -> None:
        """Wait for the lane's end (after `finish()` or a stop); raise its failure."""
        self._thread.join()
        if self.error is not None:
            raise self.error

    def _loop(self, report: Callable[[R], None], interval: float) -> None:
        try:
            self._started()
            follow(self._pass, report, self._did_work, interval, None, self._done)
        except BaseException as exc:  # raised in the caller's thread by join()
            self.error = exc

    def _pass(self) -> Sequence[R]:
        after_finish = self._finishing.is_set()
        if self._yield_to is not None:
            self._yield_to.wait()
        results = self._run_once()
        self._caught_up = after_finish and not any(self._did_work(r) for r in results)
        return results

    def _done(self) -> bool:
        return self._stop_requested() or self._caught_up


class Turns:
    """The passes of a loop that another loop yields to (the warehouse path, which the
    lake tables loop must not slow down: on 2 cores, a MERGE beside an ETL pass made
    both slower, and the change on its way to the warehouse waited as long as before).

    The loop runs each pass in `taking()`; the other calls `wait()` before each of its
    passes: it returns once no pass is under way, or once the pass under way at the call
    has ended, so that under a steady stream (pass after pass) it still gets its turn."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._running = False
        self._ended = 0

    @contextmanager
    def taking(self) -> Iterator[None]:
        with self._changed:
            self._running = True
        try:
            yield
        finally:
            with self._changed:
                self._running = False
                self._ended += 1
                self._changed.notify_all()

    def wait(self) -> None:
        with self._changed:
            ended = self._ended
            self._changed.wait_for(lambda: not self._running or self._ended > ended)
