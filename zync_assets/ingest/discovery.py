"""Which topics each raw pool reads now: the ones its specs name, and those their patterns
take among the topics Kafka has (specs/patterns.py).

A pass reads a new topic from its first offset (the pool's progress has none for it), so a
table that Debezium starts to capture while zync runs arrives whole, once. A topic that
disappears is reported and left: the pool keeps what it ingested, and its progress keeps
the offsets it reached.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from zync_assets.codec.formats import WireFormat
from zync_assets.core.settings import KafkaSettings
from zync_assets.kafka.clients import topic_names
from zync_assets.specs.model import Spec, all_raw_pools
from zync_assets.specs.patterns import TopicPattern, matching_topics


def pool_patterns(specs: list[Spec]) -> dict[str, list[TopicPattern]]:
    """raw pool -> the patterns that feed it (pools named by topic alone: none)."""
    patterns: dict[str, list[TopicPattern]] = {}
    for spec in specs:
        for pattern in spec.patterns:
            patterns.setdefault(pattern.pool, []).append(pattern)
    return patterns


def never_matched(specs: list[Spec]) -> set[str]:
    """Topics no pattern takes: every spec's outputs (zync's own) and the input topics
    the specs name (each feeds the pool it is named for)."""
    return {r.topic for spec in specs for r in spec.outputs + spec.inputs}


@dataclass(frozen=True)
class PoolInputs:
    """What a raw pool reads: topics named in specs, and patterns (with the topics no
    pattern may take)."""

    named: tuple[str, ...]
    patterns: tuple[TopicPattern, ...] = ()
    never: frozenset[str] = frozenset()
    earlier: tuple[TopicPattern, ...] = ()  # other pools' patterns, which take a topic first

    def topics(self, available: list[str] | None) -> list[str]:
        """The named topics, then those the patterns take among `available` (a topic an
        earlier pool's pattern takes is that pool's: a topic feeds one pool)."""
        if not self.patterns or available is None:
            return list(self.named)
        taken = matching_topics(self.patterns, available, self.never)
        mine = [t for t in taken if not any(p.matches(t) for p in self.earlier)]
        return [*self.named, *(t for t in mine if t not in self.named)]

    def topics_now(self, kafka: KafkaSettings) -> list[str]:
        """The topics, asking Kafka which it has only when there are patterns."""
        return self.topics(topic_names(kafka) if self.patterns else None)

    def formats(self, topics: list[str], named: dict[str, WireFormat]) -> dict[str, WireFormat]:
        """`named` (the routes' formats), with each pattern-taken topic's pattern's."""
        formats = dict(named)
        for topic in topics:
            if topic not in formats:
                taken = next((p for p in self.patterns if p.matches(topic)), None)
                if taken is not None:
                    formats[topic] = taken.format
        return formats


def pool_inputs(specs: list[Spec]) -> dict[str, PoolInputs]:
    """Every raw pool of the specs, with what it reads. Pools are in spec and file order:
    a topic the patterns of two pools take feeds the first."""
    patterns, never = pool_patterns(specs), frozenset(never_matched(specs))
    inputs: dict[str, PoolInputs] = {}
    earlier: list[TopicPattern] = []
    for pool, named in all_raw_pools(specs).items():
        mine = tuple(patterns.get(pool, ()))
        inputs[pool] = PoolInputs(tuple(named), mine, never, tuple(earlier))
        earlier += mine
    return inputs


def raw_pool_topics(specs: list[Spec], available: list[str] | None) -> dict[str, list[str]]:
    """raw pool -> its topics: the named ones, then the ones its patterns take among
    `available` (None: Kafka was not asked, as no spec has a pattern)."""
    return {pool: inputs.topics(available) for pool, inputs in pool_inputs(specs).items()}


def topics_now(specs: list[Spec], kafka: KafkaSettings) -> dict[str, list[str]]:
    """raw pool -> its topics, asking Kafka for its topics only when a spec has a pattern."""
    wanted = any(spec.patterns for spec in specs)
    return raw_pool_topics(specs, topic_names(kafka) if wanted else None)


def passed_over(specs: list[Spec]) -> list[str]:
    """A line for each pattern that matches topics another spec names for another pool.
    A topic feeds one pool, so the pattern's pool never reads them, and the rules and
    lake tables of the pattern's spec never see them: with a whole-database spec, the
    tables a view spec names for a pool of its own would be missing from the lake and the
    warehouse without a word."""
    lines = []
    for spec in specs:
        for pattern in spec.patterns:
            taken = {(r.topic, r.pool, other.path.name) for other in specs if other is not spec
                     for r in other.inputs if r.pool != pattern.pool and pattern.matches(r.topic)}  # fmt: skip
            for pool, names in _by_pool(taken).items():
                topics, where = ", ".join(sorted(t for t, _ in names)), names[0][1]
                lines.append(
                    f"pool {pattern.pool}: {spec.path.name}'s pattern '{pattern.pattern}' "
                    f"leaves {topics} to pool {pool}, where {where} names them (a topic "
                    f"feeds one pool): {spec.path.name}'s rules and lake tables skip them; "
                    f"name them for pool {pattern.pool} in {where} to have both"
                )
    return lines


def _by_pool(taken: set[tuple[str, str, str]]) -> dict[str, list[tuple[str, str]]]:
    grouped: dict[str, list[tuple[str, str]]] = {}
    for topic, pool, spec_name in sorted(taken):
        grouped.setdefault(pool, []).append((topic, spec_name))
    return grouped


@dataclass
class Changes:
    """What one discovery found that the one before did not, and what it no longer found;
    the first discovery also says which topics patterns pass over (passed_over)."""

    appeared: dict[str, list[str]] = field(default_factory=dict)  # pool -> topics
    gone: dict[str, list[str]] = field(default_factory=dict)
    passed_over: list[str] = field(default_factory=list)  # passed_over's lines

    def __bool__(self) -> bool:
        return bool(self.appeared or self.gone or self.passed_over)

    def lines(self) -> list[str]:
        """One line per pool and change, for a person."""
        return [
            *self.passed_over,
            *(f"pool {pool}: new topics {', '.join(ts)} (read from their first offset)"
              for pool, ts in sorted(self.appeared.items())),
            *(f"pool {pool}: topics {', '.join(ts)} are gone from Kafka; the pool keeps "
              "what it ingested of them" for pool, ts in sorted(self.gone.items())),
        ]  # fmt: skip


class Discovery:
    """A long-running pipeline's view of each pool's topics: Kafka is asked again once
    `interval_s` has passed since it was last asked (the discovery interval)."""

    def __init__(
        self, specs: list[Spec], kafka: KafkaSettings, interval_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self.specs, self.kafka, self.interval_s, self.clock = specs, kafka, interval_s, clock
        self._pools: dict[str, list[str]] | None = None
        self._asked_at = 0.0

    def pools(self) -> tuple[dict[str, list[str]], Changes]:
        """raw pool -> its topics now, and what changed since the last time Kafka was asked."""
        now = self.clock()
        if self._pools is not None and now - self._asked_at < self.interval_s:
            return self._pools, Changes()
        found = topics_now(self.specs, self.kafka)
        changes = _changes(self._pools, found)
        if self._pools is None:
            changes.passed_over = passed_over(self.specs)
        self._pools, self._asked_at = found, now
        return found, changes


def _changes(before: dict[str, list[str]] | None, after: dict[str, list[str]]) -> Changes:
    changes = Changes()
    if before is None:
        return changes
    for pool, topics in after.items():
        earlier = set(before.get(pool, []))
        if new := [t for t in topics if t not in earlier]:
            changes.appeared[pool] = new
        if lost := sorted(earlier - set(topics)):
            changes.gone[pool] = lost
    return changes
