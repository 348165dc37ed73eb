"""Where the sinks of zync's output topics stand: the hop after to-kafka.

zync's own figures end where its records reach their topics; a warehouse is only as
current as the sink connector that reads them. So status asks Kafka Connect for each
sink connector's state and its tasks' (a FAILED task reads nothing: every table it
serves stops), counts the records of its dead-letter topic (what its converter could not
read: `errors.tolerance: all`, docs/debezium.md), and takes its lag from Kafka: the high
watermarks of its topics − the offsets its consumer group (`connect-<name>`) committed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from zync_assets.core.errors import ZyncError
from zync_assets.core.settings import KafkaSettings, SinkSettings
from zync_assets.kafka import clients
from zync_assets.kafka.connect_api import ConnectApi
from zync_assets.kafka.offsets import group_offsets, watermarks

MISSING = "MISSING"  # a named sink the worker does not hold
STATUS_TIMEOUT_S = 5.0  # status answers within seconds, even when the worker does not


@dataclass(frozen=True)
class SinkTask:
    id: int
    state: str  # RUNNING, FAILED, PAUSED, UNASSIGNED…
    reason: str | None  # a failed task's: its trace's first line and last cause


@dataclass(frozen=True)
class SinkStatus:
    name: str
    state: str
    tasks: tuple[SinkTask, ...]
    topics: tuple[str, ...]
    lag: int  # records on its topics its consumer group has not committed
    dead_letter_topic: str | None
    dead_letters: int

    @property
    def stopped(self) -> bool:
        """Whether it reads none (or only some) of its topics: a connector not RUNNING, a
        task FAILED, no task at all."""
        return (
            self.state != "RUNNING"
            or not self.tasks
            or any(t.state == "FAILED" for t in self.tasks)
        )

    def problems(self, connect_url: str) -> list[str]:
        """One line per thing that stops records reaching the warehouse, with what to do."""
        if self.state == MISSING:
            return [f"sink {self.name}: Kafka Connect at {connect_url} has no such connector"]
        lines = [
            f"sink {self.name}: task {t.id} {t.state}: {t.reason or 'no reason given'}; "
            f"fix the cause, then restart it: curl -X POST "
            f"{connect_url}/connectors/{self.name}/tasks/{t.id}/restart"
            for t in self.tasks
            if t.state == "FAILED"
        ]
        if self.state not in ("RUNNING", "FAILED") or (self.state == "FAILED" and not lines):
            lines.append(f"sink {self.name}: the connector is {self.state}, not RUNNING")
        if not self.tasks and self.state == "RUNNING":
            lines.append(f"sink {self.name}: the connector runs no task")
        if self.dead_letters:
            lines.append(
                f"sink {self.name}: {self.dead_letters} records it could not take are in "
                f"{self.dead_letter_topic} (their headers __connect.errors.* say why)"
            )
        return lines


def sink_statuses(settings: SinkSettings, kafka: KafkaSettings) -> list[SinkStatus]:
    """The status of each sink `settings` names, or of every sink connector the worker
    holds when it names none ([] when no worker answers then: nothing to report)."""
    try:
        described = ConnectApi(settings.connect_url, timeout=STATUS_TIMEOUT_S).described()
    except ZyncError:
        if settings.names:
            raise
        return []
    names = settings.names or tuple(
        sorted(n for n, d in described.items() if d["info"].get("type") == "sink")
    )
    topic_names = clients.topic_names(kafka)
    found = {n: _Sink.of(n, described[n], topic_names) for n in names if n in described}
    wanted = sorted({t for s in found.values() for t in (*s.topics, *s.dead_letter_topics)})
    marks = watermarks(kafka, wanted, missing_ok=True)
    return [
        found[n].status(kafka, marks) if n in found else SinkStatus(n, MISSING, (), (), 0, None, 0)
        for n in names
    ]


@dataclass(frozen=True)
class _Sink:
    name: str
    state: str
    tasks: tuple[SinkTask, ...]
    topics: tuple[str, ...]
    dead_letter_topics: tuple[str, ...]  # () or its one

    @classmethod
    def of(cls, name: str, described: dict[str, Any], topic_names: list[str]) -> _Sink:
        config = described["info"].get("config", {})
        status = described["status"]
        if config.get("topics"):
            topics = [t.strip() for t in config["topics"].split(",") if t.strip()]
        else:
            pattern = re.compile(config.get("topics.regex") or "(?!)")
            topics = [t for t in topic_names if pattern.fullmatch(t)]
        dead = config.get("errors.deadletterqueue.topic.name")
        tasks = tuple(
            SinkTask(int(t["id"]), t["state"], task_reason(t.get("trace")))
            for t in status.get("tasks", [])
        )
        return cls(
            name, status["connector"]["state"], tasks, tuple(topics), (dead,) if dead else ()
        )

    def status(self, kafka: KafkaSettings, marks: dict) -> SinkStatus:
        committed = group_offsets(kafka, f"connect-{self.name}")
        lag = sum(
            max(0, p.high - committed.get((topic, p.partition), p.low))
            for topic in self.topics
            for p in marks.get(topic, [])
        )
        dead = self.dead_letter_topics[0] if self.dead_letter_topics else None
        letters = sum(p.high - p.low for p in marks.get(dead, [])) if dead else 0
        return SinkStatus(self.name, self.state, self.tasks, self.topics, lag, dead, letters)


def task_reason(trace: str | None) -> str | None:
    """A failed task's trace in one line: its first (Connect's own words) and, when there
    is one, its last `Caused by:` (the sink's, which names the record's problem)."""
    if not trace:
        return None
    lines = [line.strip() for line in trace.strip().splitlines()]
    causes = [line.removeprefix("Caused by: ") for line in lines if line.startswith("Caused by:")]
    return lines[0] if not causes else f"{lines[0]} (caused by {causes[-1]})"
