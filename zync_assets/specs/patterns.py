"""Inputs named by pattern: every topic whose name matches, now and later, feeds one pool.

    inputs:
      - {topics: 'shop\\.public\\..*', exclude: ['shop\\.public\\.audit_.*'], pool: Shop}

A pattern matches a topic's whole name (Python's `re.fullmatch`), as Kafka Connect's
`topics.regex` does. Some topics never match one, whatever it says: Kafka's and the
registry's own (a leading `_`: `__consumer_offsets`, `_schemas`, Debezium's
`__debezium-heartbeat.<prefix>`), Kafka Connect's (`<group>-configs`, `-offsets`,
`-status`), Debezium's transaction topics (`<prefix>.transaction`) and the topics any
spec writes (zync's outputs): a pattern like `.*` takes a database's tables, not the
plumbing around them. Name one of those as an input topic of its own to read it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from zync_assets.codec.formats import AVRO, WireFormat

# Topics no pattern takes: Kafka's, the registry's and Debezium's heartbeats (a leading
# `_`), Kafka Connect's own, Debezium's transaction metadata.
_PLUMBING = re.compile(r"_.*|[^.]*-(configs|offsets|status)|[^.]+\.transaction")


@dataclass(frozen=True)
class TopicPattern:
    """Topics by regular expression, into raw pool `pool`."""

    pattern: str
    pool: str
    format: WireFormat = AVRO
    exclude: tuple[str, ...] = field(default=())

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None and not any(
            re.fullmatch(excluded, topic) for excluded in self.exclude
        )


def is_plumbing(topic: str) -> bool:
    """A topic of Kafka's, the registry's, Connect's or Debezium's own, not a table's."""
    return _PLUMBING.fullmatch(topic) is not None


def matching_topics(
    patterns: Iterable[TopicPattern], available: Iterable[str], written: Iterable[str] = ()
) -> list[str]:
    """The topics of `available` that one of `patterns` takes, sorted; never plumbing or
    a topic zync writes (`written`)."""
    given = list(patterns)
    never = set(written)
    return sorted(
        topic for topic in set(available)
        if topic not in never and not is_plumbing(topic) and any(p.matches(topic) for p in given)
    )  # fmt: skip


def check_pattern(text: object) -> str | None:
    """Why `text` is not a usable pattern (None when it is)."""
    if not isinstance(text, str) or not text:
        return "expected a regular expression, e.g. 'shop\\.public\\..*'"
    try:
        re.compile(text)
    except re.error as exc:
        return f"not a regular expression ({exc})"
    return None


def pattern_problem(item: dict) -> tuple[str, str] | None:
    """The first mistake in a spec entry's `topics` (a regular expression) and `exclude`
    (one, or a list of them), as (field, problem); None when there is none."""
    excluded = item.get("exclude", [])
    excluded = [excluded] if isinstance(excluded, str) else excluded
    if not isinstance(excluded, list):
        return "exclude", "expected a list of regular expressions"
    for field_name, text in [("topics", item.get("topics")), *(("exclude", e) for e in excluded)]:
        if (problem := check_pattern(text)) is not None:
            return field_name, problem
    return None


def excluded_of(item: dict) -> tuple[str, ...]:
    """An entry's `exclude`, checked by pattern_problem, as a tuple."""
    excluded = item.get("exclude", [])
    return (excluded,) if isinstance(excluded, str) else tuple(excluded)
