"""Where the sinks of zync's output topics stand: the hop after to-kafka.

zync's own figures end where its records reach their topics; a warehouse is only as
current as the sink connector that reads them. So status asks Kafka Connect for each
sink connector's state and its tasks' (a FAILED task reads nothing: every table it
serves stops), counts the records of its dead-letter topic (what its converter could not
read or the warehouse refused: `errors.tolerance: all`, docs/debezium.md) and reads the
newest one's headers (which record, and why), and takes its lag from Kafka: the high
watermarks of its topics − the offsets its consumer group (`connect-<name>`) committed.

A task can read RUNNING and take nothing (a thread parked on a service that never
answers): so the oldest record a sink has not committed is read too, and a RUNNING sink
whose oldest waiting record is older than the stall bound has stalled.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from zync_assets.core.errors import ZyncError
from zync_assets.core.settings import DEFAULT_SINK_STALL_AFTER_S, KafkaSettings, SinkSettings
from zync_assets.kafka import clients
from zync_assets.kafka.connect_api import ConnectApi
from zync_assets.kafka.offsets import group_offsets, watermarks
from zync_assets.kafka.records_at import RecordAt, first_records_from

MISSING = "MISSING"  # a named sink the worker does not hold
STATUS_TIMEOUT_S = 5.0  # status answers within seconds, even when the worker does not
# Connect's dead-letter headers (errors.deadletterqueue.context.headers.enable).
_HEADER = "__connect.errors."


@dataclass(frozen=True)
class SinkTask:
    id: int
    state: str  # RUNNING, FAILED, PAUSED, UNASSIGNED…
    reason: str | None  # a failed task's: its trace's first line and last cause


@dataclass(frozen=True)
class DeadLetter:
    """The newest record a sink could not take: where it came from, and why."""

    topic: str
    partition: str
    offset: str
    reason: str

    @classmethod
    def of(cls, record: RecordAt) -> DeadLetter:
        def header(name: str) -> str:
            raw = record.headers.get(_HEADER + name)
            return "?" if raw is None else raw.decode("utf-8", "replace")

        reason = " ".join(header("exception.message").split())
        return cls(header("topic"), header("partition"), header("offset"), reason)


@dataclass(frozen=True)
class Waiting:
    """The oldest record a sink has not committed, and how long it has waited."""

    topic: str
    partition: int
    offset: int
    age_s: float


@dataclass(frozen=True)
class SinkStatus:
    name: str
    state: str
    tasks: tuple[SinkTask, ...]
    topics: tuple[str, ...]
    lag: int  # records on its topics its consumer group has not committed
    dead_letter_topic: str | None
    dead_letters: int
    newest_dead_letter: DeadLetter | None = None
    oldest_waiting: Waiting | None = None
    stall_after_s: float = DEFAULT_SINK_STALL_AFTER_S

    @property
    def stalled(self) -> bool:
        """Whether it reads RUNNING while a record has waited longer than the bound."""
        waiting = self.oldest_waiting
        return not self.stopped and waiting is not None and waiting.age_s >= self.stall_after_s

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
        stall = self.stall_line(connect_url)
        if stall is not None:
            lines.append(stall)
        if self.dead_letters:
            lines.append(self._dead_letters_line())
        return lines

    def stall_line(self, connect_url: str) -> str | None:
        """What `stalled` says, in one line with what to do; None when it has not."""
        waiting = self.oldest_waiting
        if not self.stalled or waiting is None:
            return None
        restarts = "; ".join(
            f"curl -X POST {connect_url}/connectors/{self.name}/tasks/{t.id}/restart"
            for t in self.tasks
        )
        return (
            f"sink {self.name} has not committed for {_minutes(waiting.age_s)} with "
            f"{self.lag:,} record{'' if self.lag == 1 else 's'} waiting (the oldest: "
            f"{waiting.topic} partition "
            f"{waiting.partition} offset {waiting.offset}) while its tasks read RUNNING, "
            f"longer than the {_minutes(self.stall_after_s)} bound: it has stalled "
            f"(a thread waiting on a service?); restart its task: {restarts} "
            "(`zync run --follow` does so itself)"
        )

    def _dead_letters_line(self) -> str:
        line = (
            f"sink {self.name}: {self.dead_letters} records it could not take are in "
            f"{self.dead_letter_topic}"
        )
        newest = self.newest_dead_letter
        if newest is None:
            return line + " (their headers __connect.errors.* say why)"
        return (
            f"{line}; the newest, {newest.topic} partition {newest.partition} offset "
            f"{newest.offset}: {newest.reason or 'no reason given'}; fix the cause, then "
            f"produce the record again from {self.dead_letter_topic} to {newest.topic} "
            "(the sink upserts: a replay is safe)"
        )


def _minutes(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    return f"{seconds // 60:.0f} min {seconds % 60:.0f} s"


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
    stall = settings.stall_after_s
    return [
        found[n].status(kafka, marks, stall)
        if n in found
        else SinkStatus(n, MISSING, (), (), 0, None, 0, stall_after_s=stall)
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

    def status(self, kafka: KafkaSettings, marks: dict, stall_after_s: float) -> SinkStatus:
        committed = group_offsets(kafka, f"connect-{self.name}")
        behind = [  # (topic, partition, its first uncommitted offset) where records wait
            (topic, p.partition, max(p.low, committed.get((topic, p.partition), p.low)))
            for topic in self.topics
            for p in marks.get(topic, [])
            if p.high > committed.get((topic, p.partition), p.low)
        ]
        lag = sum(
            p.high - at
            for topic, partition, at in behind
            for p in marks[topic]
            if p.partition == partition
        )
        dead = self.dead_letter_topics[0] if self.dead_letter_topics else None
        dead_marks = [p for p in marks.get(dead, []) if p.high > p.low] if dead else []
        letters = sum(p.high - p.low for p in dead_marks)
        # One bounded read: each waiting partition's first record, and the newest dead letter
        # of each dead-letter partition.
        newest = [(dead, p.partition, p.high - 1) for p in dead_marks] if dead else []
        records = first_records_from(kafka, [*behind, *newest])
        letter = max(
            (records[pos] for pos in newest if pos in records),
            key=lambda r: r.timestamp_ms or 0,
            default=None,
        )
        return SinkStatus(
            self.name, self.state, self.tasks, self.topics, lag, dead, letters,
            newest_dead_letter=DeadLetter.of(letter) if letter is not None else None,
            oldest_waiting=_oldest([records[pos] for pos in behind if pos in records]),
            stall_after_s=stall_after_s,
        )  # fmt: skip


def _oldest(records: list[RecordAt]) -> Waiting | None:
    stamped = [r for r in records if r.timestamp_ms is not None]
    if not stamped:
        return None
    first = min(stamped, key=lambda r: r.timestamp_ms or 0)
    age = max(0.0, time.time() - (first.timestamp_ms or 0) / 1000)
    return Waiting(first.topic, first.partition, first.offset, age)


def task_reason(trace: str | None) -> str | None:
    """A failed task's trace in one line: its first (Connect's own words) and, when there
    is one, its last `Caused by:` (the sink's, which names the record's problem)."""
    if not trace:
        return None
    lines = [line.strip() for line in trace.strip().splitlines()]
    causes = [line.removeprefix("Caused by: ") for line in lines if line.startswith("Caused by:")]
    return lines[0] if not causes else f"{lines[0]} (caused by {causes[-1]})"
