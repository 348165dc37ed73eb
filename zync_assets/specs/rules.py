"""Structural validation of a spec's `transforms` (the SQL is checked against Spark later).

Every error names the file, the rule number and the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zync_assets.codec.formats import WireFormat, wire_format
from zync_assets.core.errors import ZyncError
from zync_assets.core.names import POOL_NAME
from zync_assets.specs.patterns import TopicPattern, excluded_of, pattern_problem


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
    inputs: tuple[str, ...] = ()  # txn: the topics whose events it groups
    group_by: str | None = None  # txn: the group of an event (None: Debezium's transaction)
    complete_when: str | None = None  # txn: an aggregate, or DEBEZIUM_TRANSACTION
    outs: tuple[str, ...] = ()  # txn: every topic its SQL may yield (`out` is the first)
    relations: tuple[tuple[str, str], ...] = ()  # view: (name in its SQL, input topic)
    key: tuple[str, ...] = ()  # view: the output columns that key its rows
    # mirror: the topics it takes (`out` is then a name template), its staging pool and
    # output format; and, once expanded (specs/mirror.py), each topic → its output topic
    pattern: TopicPattern | None = None
    pool: str | None = None
    format: WireFormat | None = None
    mirrored: tuple[tuple[str, str], ...] = ()

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(t for t in (self.left, self.right, self.input, *self.inputs) if t)

    @property
    def transactional(self) -> bool:
        """Its outputs come whole per source transaction or group (a `txn` column); a
        view's per pass (the view as of the pass's end)."""
        return self.gate is not None or self.type in ("txn", "view")

    @property
    def output_topics(self) -> tuple[str, ...]:
        if self.type == "mirror":
            return tuple(out for _, out in self.mirrored)
        return self.outs or (self.out,)

    def pool_of(self, pools: dict[str, str]) -> str:
        """Its staging pool, given the pool of each output route."""
        return self.pool or pools[self.out]


RULE_FIELDS = {
    "denorm": {"type", "where", "left", "right", "join-on", "out", "sql", "expire-after", "gate"},
    "stateless": {"type", "where", "in", "out", "sql", "expire-after", "gate"},
    "txn": {"type", "where", "inputs", "group-by", "complete-when", "out", "sql", "expire-after"},
    "view": {"type", "inputs", "key", "out", "sql", "gate"},
    "mirror": {
        "type", "topics", "exclude", "out", "pool", "format", "sql", "where", "gate",
        "expire-after",
    },
}  # fmt: skip
MIRROR_SQL = "in.key AS key, in.after AS value"  # a delete's `after` is null: a tombstone
# A mirror forwards row changes: not Debezium's tombstones (the delete before one already
# made its tombstone), truncates or messages, which a row-by-row sink has no record for.
MIRROR_WHERE = "op IN ('c', 'r', 'u', 'd')"
MIRROR_PLACEHOLDERS = ("table", "schema", "prefix", "topic")
GATES = ("transaction",)
DEBEZIUM_TRANSACTION = "debezium-transaction"  # complete-when: Debezium's END and counts
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
    topics = ({r.topic for r in inputs}, {r.topic for r in outputs})
    rules = [_parse_rule(path, n, item, *topics) for n, item in enumerate(items, start=1)]
    _check_output_pools(path, rules, outputs)
    _check_gates(path, rules, outputs)
    _check_views(path, rules)
    return rules


def _parse_rule(
    path: Path, number: int, item: Any, input_topics: set[str], output_topics: set[str]
) -> Rule:
    if not isinstance(item, dict):
        raise _fail(path, number, "", "expected a mapping")
    kind = item.get("type")
    if not isinstance(kind, str) or kind not in RULE_FIELDS:
        raise _fail(
            path, number, "type", f"unknown type {kind!r} (denorm, stateless, txn, view or mirror)"
        )
    takes = {
        "denorm": "left and right", "stateless": "in", "txn": "inputs", "view": "inputs",
        "mirror": "topics",
    }[kind]  # fmt: skip
    if kind != "denorm" and ("left" in item or "right" in item):
        raise _fail(path, number, "left/right", f"a {kind} rule takes {takes}, not left/right")
    if kind != "stateless" and "in" in item:
        raise _fail(path, number, "in", f"a {kind} rule takes {takes}, not in")
    unknown = set(item) - RULE_FIELDS[kind]
    if unknown:
        first = sorted(str(name) for name in unknown)[0]  # YAML keys may be null or numbers
        raise _fail(path, number, first, f"not a field of a {kind} rule")
    if kind == "txn":
        return _parse_txn(path, number, item, input_topics, output_topics)
    if kind == "view":
        return _parse_view(path, number, item, input_topics, output_topics)
    if kind == "mirror":
        return _parse_mirror(path, number, item, input_topics)
    needed = ["left", "right", "join-on"] if kind == "denorm" else ["in"]
    for name in [*needed, "out", "sql"]:
        _text(path, number, item, name)
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
    gate = item.get("gate")
    if gate is not None and gate not in GATES:
        raise _fail(path, number, "gate", f"unknown gate {gate!r} (transaction)")
    expire = _expiry(path, number, item, gated=gate is not None)
    if expire is not None and kind == "stateless" and gate is None:
        raise _fail(
            path, number, "expire-after",
            "a stateless rule's events never wait, unless it has `gate: transaction`",
        )  # fmt: skip
    topics = [item[n] for n in ("left", "right", "in") if n in item]
    return Rule(
        number=number,
        type=kind,
        out=item["out"],
        sql=item["sql"].strip().rstrip(","),
        where=_where(path, number, item),
        input=item.get("in"),
        left=item.get("left"),
        right=item.get("right"),
        join_on=join_on,
        expire_after=expire,
        gate=gate,
        transaction_topic=_transaction_topic(path, number, topics, input_topics) if gate else None,
    )


def _parse_mirror(path: Path, number: int, item: dict, input_topics: set[str]) -> Rule:
    """A `mirror` rule: every topic its pattern takes (of the spec's inputs, and read by no
    other rule) to an output topic of its own, named by the template `out`."""
    if (found := pattern_problem(item)) is not None:
        raise _fail(path, number, *found)
    out = _text(path, number, item, "out")
    if not any(f"{{{p}}}" in out for p in MIRROR_PLACEHOLDERS):
        raise _fail(path, number, "out", f"{out!r}: name each table's topic with {{table}}, "
                    "{schema}, {prefix} or {topic}, e.g. 'warehouse.{table}'")  # fmt: skip
    try:
        out.format_map(dict.fromkeys(MIRROR_PLACEHOLDERS, "x"))
    except (KeyError, ValueError, IndexError) as exc:
        raise _fail(path, number, "out", f"{out!r}: the placeholders are {{table}}, "
                    f"{{schema}}, {{prefix}} and {{topic}} ({type(exc).__name__}: {exc})") from exc  # fmt: skip
    pool = item.get("pool")
    if not isinstance(pool, str) or not POOL_NAME.match(pool):
        raise _fail(path, number, "pool", f"{pool!r}: name the staging pool its outputs go to")
    try:
        formats = wire_format(item.get("format"), None)
    except ZyncError as exc:
        raise _fail(path, number, "format", str(exc)) from exc
    gate = item.get("gate")
    if gate is not None and gate not in GATES:
        raise _fail(path, number, "gate", f"unknown gate {gate!r} (transaction)")
    pattern = TopicPattern(item["topics"], pool, formats, excluded_of(item))
    sql = item.get("sql", MIRROR_SQL)
    if not isinstance(sql, str) or not sql.strip():
        raise _fail(path, number, "sql", "missing or empty")
    return Rule(
        number=number, type="mirror", out=out, sql=sql.strip().rstrip(","),
        where=_where(path, number, item) or MIRROR_WHERE, gate=gate,
        expire_after=_expiry(path, number, item, gated=gate is not None),
        transaction_topic=_mirror_transaction_topic(path, number, pattern, input_topics)
        if gate else None,
        pattern=pattern, pool=pool, format=formats,
    )  # fmt: skip


def _mirror_transaction_topic(
    path: Path, number: int, pattern: TopicPattern, inputs: set[str]
) -> str:
    """A gated mirror's transaction topic: the input `<prefix>.transaction` whose prefix
    its pattern starts with."""
    for topic in sorted(inputs, key=len, reverse=True):
        prefix = topic.removesuffix("transaction")
        if topic.endswith(TRANSACTION_TOPIC_SUFFIX) and pattern.pattern.startswith(
            (prefix, re.escape(prefix))
        ):
            return topic
    raise _fail(
        path, number, "gate",
        f"the spec reads no Debezium transaction topic for {pattern.pattern}: add "
        "`<topic.prefix>.transaction` to its inputs (the connector needs "
        "provide.transaction.metadata=true)",
    )  # fmt: skip


def _parse_txn(
    path: Path, number: int, item: dict, input_topics: set[str], output_topics: set[str]
) -> Rule:
    """A `txn` rule: its events wait in groups until the group is complete, then its SQL
    runs once over the group (etl/groups.py)."""
    topics = _topic_list(path, number, item, "inputs")
    for topic in topics:
        if topic not in input_topics:
            raise _fail(path, number, "inputs", f"topic {topic!r} is not among the inputs")
    outs = _topic_list(path, number, item, "out")
    for topic in outs:
        if topic not in output_topics:
            raise _fail(path, number, "out", f"topic {topic!r} is not among the outputs")
    complete_when = _text(path, number, item, "complete-when")
    debezium = complete_when == DEBEZIUM_TRANSACTION
    if debezium and "group-by" in item:
        raise _fail(
            path, number, "group-by",
            f"with `complete-when: {DEBEZIUM_TRANSACTION}` the groups are Debezium's source "
            "transactions (`transaction.id`): leave group-by out",
        )  # fmt: skip
    group_by = None if debezium else _text(path, number, item, "group-by")
    return Rule(
        number=number,
        type="txn",
        out=outs[0],
        outs=tuple(outs),
        sql=_text(path, number, item, "sql").rstrip(";").strip(),
        where=_where(path, number, item),
        inputs=tuple(topics),
        group_by=group_by,
        complete_when=complete_when,
        expire_after=_expiry(path, number, item, gated=True),
        gate="transaction" if debezium else None,
        transaction_topic=_transaction_topic(path, number, topics, input_topics)
        if debezium
        else None,
    )


_SQL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _parse_view(
    path: Path, number: int, item: dict, input_topics: set[str], output_topics: set[str]
) -> Rule:
    """A `view` rule: its SQL reads each input as a table of its current rows (etl/views.py);
    its output is an upsert stream keyed by `key`."""
    named = item.get("inputs")
    if not isinstance(named, dict) or not named:
        raise _fail(
            path, number, "inputs",
            "expected a mapping of the names its SQL uses to input topics "
            "(e.g. {accounts: shop.public.accounts, customers: shop.public.customers})",
        )  # fmt: skip
    relations = []
    for name, topic in named.items():
        if not isinstance(name, str) or not _SQL_NAME.fullmatch(name):
            raise _fail(path, number, "inputs", f"{name!r} is not a SQL name (letters, digits, _)")
        if topic not in input_topics:
            raise _fail(path, number, "inputs", f"topic {topic!r} is not among the inputs")
        relations.append((name, topic))
    if len({t for _, t in relations}) != len(relations):
        raise _fail(path, number, "inputs", "a topic is listed twice")
    key = item.get("key")
    columns = [key] if isinstance(key, str) else key
    if (
        not isinstance(columns, list)
        or not columns
        or not all(isinstance(c, str) and _SQL_NAME.fullmatch(c) for c in columns)
    ):
        raise _fail(path, number, "key", "expected an output column or a list of them")
    out = _text(path, number, item, "out")
    if out not in output_topics:
        raise _fail(path, number, "out", f"topic {out!r} is not among the outputs")
    gate = item.get("gate")
    if gate is not None and gate not in GATES:
        raise _fail(path, number, "gate", f"unknown gate {gate!r} (transaction)")
    topics = [t for _, t in relations]
    return Rule(
        number=number,
        type="view",
        out=out,
        sql=_text(path, number, item, "sql").rstrip(";").strip(),
        inputs=tuple(topics),
        relations=tuple(relations),
        key=tuple(columns),
        gate=gate,
        transaction_topic=_transaction_topic(path, number, topics, input_topics) if gate else None,
    )


def _check_views(path: Path, rules: list[Rule]) -> None:
    """A view owns its output and shares its inputs with views only: it keeps every change
    of its inputs as rows, and its output is the difference from what it last sent, so no
    other kind of rule may take an event of its inputs (the first rule that matches an
    event takes it; views read what any view took) or write its topic."""
    for view in (r for r in rules if r.type == "view"):
        for other in rules:
            if other is view:
                continue
            shared = set(other.topics) & set(view.topics)
            if shared and other.type != "view":
                raise _fail(
                    path, other.number, "inputs",
                    f"topic {sorted(shared)[0]!r} is an input of view rule {view.number}: a "
                    "view takes every event of its inputs, so no other rule can read them",
                )  # fmt: skip
            if view.out in other.output_topics:
                raise _fail(
                    path, other.number, "out",
                    f"topic {view.out!r} is the output of view rule {view.number}: a view's "
                    "output is its own",
                )  # fmt: skip


def _text(path: Path, number: int, item: dict, name: str) -> str:
    if not isinstance(item.get(name), str) or not item[name].strip():
        raise _fail(path, number, name, "missing or empty")
    return item[name].strip()


def _topic_list(path: Path, number: int, item: dict, name: str) -> list[str]:
    """A topic or a list of topics, none twice."""
    value = item.get(name)
    topics = [value] if isinstance(value, str) else value
    if (
        not isinstance(topics, list)
        or not topics
        or not all(isinstance(t, str) and t.strip() for t in topics)
    ):
        raise _fail(path, number, name, "expected a topic or a non-empty list of topics")
    if len(set(topics)) != len(topics):
        raise _fail(path, number, name, "a topic is listed twice")
    return topics


def _where(path: Path, number: int, item: dict) -> str | None:
    where = item.get("where")
    if where is not None and (not isinstance(where, str) or not where.strip()):
        raise _fail(path, number, "where", "must be a non-empty Spark SQL condition")
    return where


def _expiry(path: Path, number: int, item: dict, gated: bool) -> str | None:
    if item.get("expire-after") is None:
        return None
    expire = str(item["expire-after"])
    _check_expiry(path, number, expire, gated)
    return expire


def _check_expiry(path: Path, number: int, text: str, gated: bool) -> None:
    from zync_assets.specs.expiry import parse_expiry

    try:
        expiry = parse_expiry(text)
    except ZyncError as exc:
        raise _fail(path, number, "expire-after", str(exc)) from exc
    if gated and expiry.seconds is None:
        raise _fail(
            path, number, "expire-after",
            "a transaction (or group) expires after a time (e.g. 10m), not a count of offsets",
        )  # fmt: skip


def _transaction_topic(path: Path, number: int, topics: list[str], inputs: set[str]) -> str:
    """A gated rule's transaction topic: the input `<prefix>.transaction` whose prefix its
    topics start with (the longest, if several do)."""
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
                        "that reads it needs `gate: transaction` too (or is a txn rule with "
                        f"`complete-when: {DEBEZIUM_TRANSACTION}`)",
                    )  # fmt: skip
    pool_of = {r.topic: r.pool for r in outputs}
    pools: dict[str, set[str]] = {}
    for rule in rules:
        if rule.transaction_topic:
            pools.setdefault(rule.transaction_topic, set()).add(rule.pool_of(pool_of))
        if rule.type != "mirror" and len({pool_of[t] for t in rule.output_topics}) > 1:
            raise _fail(path, rule.number, "out", "its topics live in several staging pools; "
                        "one rule's outputs are committed to one")  # fmt: skip
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
        for topic in rule.topics:
            pools_by_input.setdefault(topic, set()).add(rule.pool_of(pool_of))
    for topic, pools in pools_by_input.items():
        if len(pools) > 1:
            raise ZyncError(
                f"{path}: input topic {topic!r} feeds outputs in several staging pools "
                f"({', '.join(sorted(pools))}); its done records must live in one pool"
            )
