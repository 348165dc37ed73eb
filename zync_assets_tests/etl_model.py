"""A small in-memory model of the ETL semantics (DESIGN §6), to check the real ETL against.

It knows nothing of Spark, cursors or Delta: each pass looks at every ingested event
that has no done record yet and applies the rules as the design states them:

- routing: the first rule whose topic and `where` match takes an event; none: unmatched
- denorm: among a rule's pending events, the n-th left and the n-th right of each join
  key (in source order) pair; an unpaired event waits, or expires after `expire-after`
  offsets of its partition
- stateless: one event, one output
- per-key waiting: an event behind a pending event of its own Kafka key (same topic and
  partition) waits too; a pair with a waiting side waits whole
- order: outputs are numbered per output topic by source position (Kafka timestamp,
  topic, partition, offset; a pair takes its left event's), except that an output never
  precedes the output of an earlier event of one of its keys in the same pass

The model is written to be read, not to be fast: plain loops over lists.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Coords = tuple[str, int, int]  # topic, partition, offset


@dataclass(frozen=True)
class Event:
    topic: str
    partition: int
    offset: int
    timestamp: dt.datetime
    key: Any
    value: Any

    @property
    def coords(self) -> Coords:
        return (self.topic, self.partition, self.offset)

    @property
    def position(self) -> tuple:
        return (self.timestamp, self.topic, self.partition, self.offset)

    @property
    def chain(self) -> tuple | None:
        if self.key is None:
            return None
        return (self.topic, self.partition, json.dumps(self.key, sort_keys=True))

    @property
    def op(self) -> str | None:
        return self.value.get("op") if isinstance(self.value, dict) else None

    @property
    def after(self) -> dict:
        return (self.value or {}).get("after") or {}


@dataclass(frozen=True)
class Rule:
    number: int
    type: str  # denorm | stateless
    out: str
    where: Callable[[Event], bool]
    make: Callable[..., tuple[Any, Any]]  # (event) or (left, right) -> (key, value)
    input: str | None = None
    left: str | None = None
    right: str | None = None
    left_key: Callable[[Event], Any] | None = None
    right_key: Callable[[Event], Any] | None = None
    expire_offsets: int | None = None

    @property
    def topics(self) -> tuple[str | None, ...]:
        return (self.left, self.right) if self.type == "denorm" else (self.input,)


@dataclass(frozen=True)
class Output:
    topic: str
    offset: int
    key: Any
    value: Any
    source: Coords
    run: int
    partner: Coords | None = None  # a pair's right event


@dataclass(frozen=True)
class Pending:
    coords: Coords
    why: str  # waiting | key | partner


@dataclass
class PassResult:
    run: int | None
    done: int = 0
    expired: int = 0
    unmatched: int = 0
    pending: int = 0
    outputs: dict[str, int] = field(default_factory=dict)


@dataclass
class Model:
    rules: list[Rule]
    ingested: list[Event] = field(default_factory=list)
    done: dict[Coords, tuple[str, int]] = field(default_factory=dict)  # -> (status, run)
    outputs: list[Output] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)
    run: int = 0
    next_offset: dict[str, int] = field(default_factory=dict)

    def ingest(self, events: list[Event]) -> None:
        self.ingested.extend(events)

    def raw_end(self) -> dict[tuple[str, int], int]:
        end: dict[tuple[str, int], int] = {}
        for e in self.ingested:
            end[(e.topic, e.partition)] = max(end.get((e.topic, e.partition), 0), e.offset + 1)
        return end

    def cursors(self, topics: dict[str, int]) -> dict[str, dict[int, int]]:
        """Per topic-partition: the lowest pending offset, else the end of the raw data."""
        end = self.raw_end()
        cursors = {t: {p: end.get((t, p), 0) for p in range(n)} for t, n in topics.items()}
        for item in self.pending:
            topic, partition, offset = item.coords
            cursors[topic][partition] = min(cursors[topic][partition], offset)
        return cursors

    def etl(self) -> PassResult:
        todo = sorted(
            (e for e in self.ingested if e.coords not in self.done), key=lambda e: e.position
        )
        rule_of = {e.coords: self._route(e) for e in todo}
        status: dict[Coords, str] = {}
        partner: dict[Coords, Coords] = {}
        for rule in self.rules:
            if rule.type == "denorm":
                for left, right in self._pairs(
                    rule, [e for e in todo if rule_of[e.coords] is rule]
                ):
                    partner[left.coords], partner[right.coords] = right.coords, left.coords
        end = self.raw_end()
        for e in todo:
            routed = rule_of[e.coords]
            if routed is None:
                status[e.coords] = "unmatched"
            elif routed.type == "stateless":
                status[e.coords] = "released"
            elif e.coords in partner:
                status[e.coords] = "paired"
            elif routed.expire_offsets is not None and (
                end[(e.topic, e.partition)] - e.offset - 1 > routed.expire_offsets
            ):
                status[e.coords] = "expired"
            else:
                status[e.coords] = "waiting"
        held = self._hold_back(todo, status, partner)
        return self._commit(todo, rule_of, status, partner, held)

    def _route(self, event: Event) -> Rule | None:
        for rule in self.rules:
            if event.topic in rule.topics and rule.where(event):
                return rule
        return None

    @staticmethod
    def _pairs(rule: Rule, events: list[Event]) -> list[tuple[Event, Event]]:
        lefts: dict[str, list[Event]] = {}
        rights: dict[str, list[Event]] = {}
        assert rule.left_key is not None and rule.right_key is not None  # a denorm rule's
        for e in events:  # already in source order
            if e.topic == rule.left and rule.left_key(e) is not None:
                lefts.setdefault(str(rule.left_key(e)), []).append(e)
            elif e.topic == rule.right and rule.right_key(e) is not None:
                rights.setdefault(str(rule.right_key(e)), []).append(e)
        return [
            pair
            for join_key, ls in lefts.items()
            for pair in zip(ls, rights.get(join_key, []), strict=False)
        ]

    @staticmethod
    def _hold_back(
        todo: list[Event], status: dict[Coords, str], partner: dict[Coords, Coords]
    ) -> dict[Coords, str]:
        """Until nothing changes: an event behind a pending event of its chain waits, and
        so does the partner of a paired event that waits."""
        chains: dict[tuple, list[Event]] = {}
        for e in todo:
            if e.chain is not None:
                chains.setdefault(e.chain, []).append(e)
        held: dict[Coords, str] = {}
        changed = True
        while changed:
            changed = False
            for events in chains.values():
                blocked = False
                for e in sorted(events, key=lambda e: e.offset):
                    if blocked and status[e.coords] in ("released", "paired"):
                        status[e.coords], held[e.coords] = "blocked", "key"
                        changed = True
                    blocked = blocked or status[e.coords] in ("waiting", "blocked")
            for coords, other in partner.items():
                if status[coords] == "paired" and status[other] == "blocked":
                    status[coords], held[coords] = "blocked", "partner"
                    changed = True
        return held

    def _commit(self, todo, rule_of, status, partner, held) -> PassResult:
        consumed = [
            e for e in todo if status[e.coords] in ("paired", "released", "unmatched", "expired")
        ]
        self.pending = [
            Pending(e.coords, held.get(e.coords, "waiting"))
            for e in todo
            if status[e.coords] in ("waiting", "blocked")
        ]
        result = PassResult(None, pending=len(self.pending))
        if not consumed:
            return result
        self.run += 1
        by_coords = {e.coords: e for e in todo}
        made = []  # (output source event, the events it stands for, topic, key, value)
        for e in todo:
            rule = rule_of[e.coords]
            if status[e.coords] == "released":
                made.append((e, [e], rule.out, *rule.make(e)))
            elif status[e.coords] == "paired" and e.topic == rule.left:
                right = by_coords[partner[e.coords]]
                made.append((e, [e, right], rule.out, *rule.make(e, right)))
        for item, _ in sorted(zip(made, _effective(made), strict=True), key=lambda p: p[1]):
            source, events, topic, key, value = item
            offset = self.next_offset.get(topic, 0)
            self.next_offset[topic] = offset + 1
            partner = events[1].coords if len(events) > 1 else None
            self.outputs.append(Output(topic, offset, key, value, source.coords, self.run, partner))
            result.outputs[topic] = result.outputs.get(topic, 0) + 1
        for e in consumed:
            label = {"paired": "done", "released": "done"}.get(status[e.coords], status[e.coords])
            self.done[e.coords] = (label, self.run)
        result.run = self.run
        result.done = len(consumed)
        result.expired = sum(status[e.coords] == "expired" for e in consumed)
        result.unmatched = sum(status[e.coords] == "unmatched" for e in consumed)
        return result


def _effective(made: list) -> list[tuple]:
    """Sort keys of the pass's outputs: (effective position, steps, own position).

    An output's effective position is the largest of its own and, one step later, the
    effective positions of the outputs of earlier events (by offset) of each chain it
    belongs to."""
    by_chain: dict[tuple, list[tuple[int, int]]] = {}  # chain -> [(offset, output index)]
    for index, (_source, events, *_rest) in enumerate(made):
        for e in events:
            if e.chain is not None:
                by_chain.setdefault(e.chain, []).append((e.offset, index))
    memo: dict[int, tuple] = {}

    def key(index: int, visiting: frozenset) -> tuple:
        if index in memo:
            return memo[index]
        if index in visiting:
            raise AssertionError("the generated stream has crossing pairs: no order exists")
        source, events = made[index][0], made[index][1]
        best = (source.position, 0)
        for e in events:
            for offset, other in by_chain.get(e.chain, []) if e.chain is not None else []:
                if offset < e.offset and other != index:
                    pos, steps = key(other, visiting | {index})
                    best = max(best, (pos, steps + 1))
        memo[index] = best
        return best

    return [(*key(i, frozenset()), made[i][0].position) for i in range(len(made))]


def sink_table(records: list[tuple[Any, Any]]) -> dict[str, dict]:
    """What an upserting JDBC sink keeps: per key, columns merged in order; a tombstone
    deletes the row."""
    table: dict[str, dict] = {}
    for key, value in records:
        name = json.dumps(key, sort_keys=True)
        if value is None:
            table.pop(name, None)
        else:
            table[name] = {**table.get(name, {}), **value}
    return table
