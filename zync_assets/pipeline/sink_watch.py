"""A continuous run's watch over the sinks that read its output topics.

A sink's task can read RUNNING and take nothing: its thread parked on a call that never
returns (once, a schema registry request with no timeout), while Connect, status and
Dagster all said RUNNING. The watch looks every so often; a sink that has stalled
(`SinkStatus.stalled`: its oldest waiting record older than the stall bound) and has not
moved since the watch's last look gets its tasks restarted through Connect's REST API, at
most once per stall bound, and the run says so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from zync_assets.core.config import carried
from zync_assets.core.errors import ZyncError
from zync_assets.core.settings import KafkaSettings, SinkSettings
from zync_assets.kafka.connect_api import ConnectApi
from zync_assets.pipeline.sink_status import STATUS_TIMEOUT_S, SinkStatus, Waiting, sink_statuses
from zync_assets.specs.ingested import mirrored
from zync_assets.specs.model import Spec

CHECK_EVERY_S = 30.0
# Connect answers a task's restart once the old task stopped or its graceful shutdown
# timed out (task.shutdown.graceful.timeout.ms, 5 s by default) and the new one started.
RESTART_TIMEOUT_S = 60.0


class SinkWatch:
    """Looks at the sinks of `topics` every `every_s` seconds; restarts a stalled one."""

    def __init__(
        self, settings: SinkSettings, kafka: KafkaSettings, topics: Callable[[], Iterable[str]],
        warn: Callable[[str], None], every_s: float = CHECK_EVERY_S,
    ) -> None:  # fmt: skip
        self._settings = settings
        self._kafka = kafka
        self._topics = topics
        self._warn = warn
        self._every_s = every_s
        self._last_seen: dict[str, Waiting | None] = {}
        self._restarted_at: dict[str, float] = {}
        self._unanswered = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=carried(self._loop), name="sink-watch", daemon=True)

    def start(self) -> SinkWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=STATUS_TIMEOUT_S * 3)

    def _loop(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                self.look()
            except Exception as exc:  # the watch must outlive one bad look
                self._warn(f"the sinks' watch could not look at them this time: {exc}")

    def look(self) -> list[str]:
        """One look: the sinks it restarted (by name)."""
        try:
            statuses = sink_statuses(self._settings, self._kafka)
        except ZyncError as exc:
            if not self._unanswered:  # said once per outage, not every look
                self._warn(f"cannot look at the sinks: {exc}")
            self._unanswered = True
            return []
        self._unanswered = False
        mine = set(self._topics())
        restarted = []
        for status in statuses:
            if set(status.topics) & mine and self._should_restart(status):
                self._restart(status)
                restarted.append(status.name)
        return restarted

    def _should_restart(self, status: SinkStatus) -> bool:
        before = self._last_seen.get(status.name)
        self._last_seen[status.name] = status.oldest_waiting
        if not status.stalled or status.oldest_waiting is None or before is None:
            return False
        moved = (before.topic, before.partition, before.offset) != (
            status.oldest_waiting.topic, status.oldest_waiting.partition,
            status.oldest_waiting.offset,
        )  # fmt: skip
        since = time.monotonic() - self._restarted_at.get(status.name, float("-inf"))
        return not moved and since >= status.stall_after_s

    def _restart(self, status: SinkStatus) -> None:
        connect = ConnectApi(self._settings.connect_url, timeout=RESTART_TIMEOUT_S)
        line = status.stall_line(self._settings.connect_url) or f"sink {status.name} stalled"
        self._restarted_at[status.name] = time.monotonic()
        try:
            for task in status.tasks:
                connect.restart_task(status.name, task.id)
        except (ZyncError, LookupError) as exc:
            self._warn(f"{line} — restarting its tasks failed: {exc}")
            return
        self._warn(
            f"{line} — restarted its tasks "
            f"(at most once per {status.stall_after_s:g} s while it stays stalled)"
        )


def output_topics(specs: list[Spec]) -> set[str]:
    """The topics `specs` send to: their outputs, and their mirrors' for the tables ingested
    so far (a read of the raw pools' commit files, no Spark)."""
    return {
        topic
        for spec in specs
        for topic in (
            *(route.topic for route in spec.outputs),
            *(t for rule in mirrored(spec).transforms for t in rule.output_topics),
        )
    }
