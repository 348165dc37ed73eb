"""Structural validation of a spec's `transforms` (the SQL is checked against Spark later).

Every error names the file, the rule number and the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zync_assets.errors import ZyncError


@dataclass(frozen=True)
class Rule:
    """One entry of a spec's `transforms`."""

    number: int  # 1-based position in `transforms`
    type: str
    out: str
    sql: str
    where: str | None = None
    input: str | None = None  # stateless: `in`
    left: str | None = None
    right: str | None = None
    join_on: tuple[str, str] | None = None
    expire_after: str | None = None
    gate: str | None = None  # "transaction": its events wait for their source transaction
    transaction_topic: str | None = None  # with a gate: Debezium's `<prefix>.transaction`

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(t for t in (self.left, self.right, self.input) if t)


RULE_FIELDS = {
    "denorm": {"type", "where", "left", "right", "join-on", "out", "sql", "expire-after", "gate"},
    "stateless": {"type", "where", "in", "out", "sql", "expire-after", "gate"},
}
GATES = ("transaction",)
TRANSACTION_TOPIC_SUFFIX = ".transaction"  # Debezium's `<topic.prefix>.transaction`
# A lone `=` (not part of ==, <=, >=, !=, <=>): the join-on separator.
_EQUALS = re.compile(r"(?<![=<>!])=(?![=>])")


def _fail(path: Path, number: int, field: str, problem: str) -> ZyncError:
    return ZyncError(f"{path}: transforms[{number}] {field}: {problem}")


def split_join_on(text: str) -> tuple[str, str] | None:
    """`<left expr> = <right expr>` → the two expressions, or None if not exactly one `=`."""
    outside_quotes = re.sub(r"'[^']*'", lambda m: "_" * len(m.group()), text)
    positions = [m.start() for m in _EQUALS.finditer(outside_quotes)]
    if len(positions) != 1:
        return None
    left, right = text[: positions[0]].strip(), text[positions[0] + 1 :].strip()
    return (left, right) if left and right else None


def parse_rules(path: Path, items: Any, inputs: list, outputs: list) -> list[Rule]:
    if not isinstance(items, list) or not items:
        raise ZyncError(f"{path}: transforms: expected a non-empty list of rules")
    input_topics = {r.topic for r in inputs}
    output_topics = {r.topic for r in outputs}
    rules = []
    for number, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise _fail(path, number, "", "expected a mapping")
        kind = item.get("type")
        if kind not in RULE_FIELDS:
            raise _fail(path, number, "type", f"unknown type {kind!r} (denorm or stateless)")
        if kind == "denorm" and "in" in item:
            raise _fail(path, number, "in", "a denorm rule takes left and right, not in")
        if kind == "stateless" and ("left" in item or "right" in item):
            raise _fail(path, number, "left/right", "a stateless rule takes in, not left/right")
        unknown = set(item) - RULE_FIELDS[kind]
        if unknown:
            raise _fail(path, number, sorted(unknown)[0], f"not a field of a {kind} rule")
        needed = ["left", "right", "join-on"] if kind == "denorm" else ["in"]
        for name in [*needed, "out", "sql"]:
            if not isinstance(item.get(name), str) or not item[name].strip():
                raise _fail(path, number, name, "missing or empty")
        for name in ("left", "right", "in"):
            if name in item and item[name] not in input_topics:
                raise _fail(path, number, name, f"topic {item[name]!r} is not among the inputs")
        if item["out"] not in output_topics:
            raise _fail(path, number, "out", f"topic {item['out']!r} is not among the outputs")
        join_on = None
        if kind == "denorm":
            join_on = split_join_on(item["join-on"])
            if join_on is None:
                raise _fail(
                    path, number, "join-on",
                    f"expected `<left expression> = <right expression>`, got {item['join-on']!r}",
                )  # fmt: skip
        where = item.get("where")
        if where is not None and (not isinstance(where, str) or not where.strip()):
            raise _fail(path, number, "where", "must be a non-empty Spark SQL condition")
        gate = item.get("gate")
        if gate is not None and gate not in GATES:
            raise _fail(path, number, "gate", f"unknown gate {gate!r} (transaction)")
        expire = item.get("expire-after")
        if expire is not None:
            expire = str(expire)
            _check_expiry(path, number, expire, gated=gate is not None)
            if kind == "stateless" and gate is None:
                raise _fail(
                    path, number, "expire-after",
                    "a stateless rule's events never wait, unless it has `gate: transaction`",
                )  # fmt: skip
        rules.append(
            Rule(
                number=number,
                type=kind,
                out=item["out"],
                sql=item["sql"].strip().rstrip(","),
                where=where,
                input=item.get("in"),
                left=item.get("left"),
                right=item.get("right"),
                join_on=join_on,
                expire_after=expire,
                gate=gate,
                transaction_topic=_transaction_topic(path, number, item, input_topics),
            )
        )
    _check_output_pools(path, rules, outputs)
    _check_gates(path, rules, outputs)
    return rules


def _check_expiry(path: Path, number: int, text: str, gated: bool) -> None:
    from zync_assets.etl.expiry import parse_expiry

    try:
        expiry = parse_expiry(text)
    except ZyncError as exc:
        raise _fail(path, number, "expire-after", str(exc)) from exc
    if gated and expiry.seconds is None:
        raise _fail(
            path, number, "expire-after",
            "a gated rule's transactions expire after a time (e.g. 10m), not a count of offsets",
        )  # fmt: skip


def _transaction_topic(path: Path, number: int, item: dict, inputs: set[str]) -> str | None:
    """A gated rule's transaction topic: the input `<prefix>.transaction` whose prefix its
    topics start with (the longest, if several do)."""
    if item.get("gate") is None:
        return None
    topics = [item[n] for n in ("left", "right", "in") if n in item]
    candidates = [
        t for t in inputs
        if t.endswith(TRANSACTION_TOPIC_SUFFIX)
        and all(topic.startswith(t.removesuffix("transaction")) for topic in topics)
    ]  # fmt: skip
    if not candidates:
        raise _fail(
            path, number, "gate",
            f"the spec reads no Debezium transaction topic for {', '.join(topics)}: add "
            "`<topic.prefix>.transaction` to its inputs (the connector needs "
            "provide.transaction.metadata=true)",
        )  # fmt: skip
    return max(candidates, key=len)


def _check_gates(path: Path, rules: list[Rule], outputs: list) -> None:
    """A gated topic is gated by every rule that reads it (an ungated rule would consume
    part of a transaction early), and a transaction topic feeds one staging pool."""
    gated = {t: r for r in rules if r.gate for t in r.topics}
    for rule in rules:
        if rule.gate is None:
            for topic in rule.topics:
                if topic in gated:
                    raise _fail(
                        path, rule.number, "gate",
                        f"topic {topic!r} is gated by rule {gated[topic].number}: every rule "
                        "that reads it needs `gate: transaction` too",
                    )  # fmt: skip
    pool_of = {r.topic: r.pool for r in outputs}
    pools: dict[str, set[str]] = {}
    for rule in rules:
        if rule.transaction_topic:
            pools.setdefault(rule.transaction_topic, set()).add(pool_of[rule.out])
    for topic, found in pools.items():
        if len(found) > 1:
            raise ZyncError(
                f"{path}: transaction topic {topic!r} gates outputs in several staging pools "
                f"({', '.join(sorted(found))}); its records are done in one pool"
            )
    for topic in pools:
        if topic in gated or any(topic in r.topics for r in rules):
            raise ZyncError(f"{path}: transaction topic {topic!r} is read by a rule; no rule may")


def _check_output_pools(path: Path, rules: list, outputs: list) -> None:
    """All outputs fed by one input topic must live in one staging pool (its done records)."""
    pool_of = {r.topic: r.pool for r in outputs}
    pools_by_input: dict[str, set[str]] = {}
    for rule in rules:
        for topic in filter(None, (rule.input, rule.left, rule.right)):
            pools_by_input.setdefault(topic, set()).add(pool_of[rule.out])
    for topic, pools in pools_by_input.items():
        if len(pools) > 1:
            raise ZyncError(
                f"{path}: input topic {topic!r} feeds outputs in several staging pools "
                f"({', '.join(sorted(pools))}); its done records must live in one pool"
            )
