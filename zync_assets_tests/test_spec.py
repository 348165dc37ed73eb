"""Spec validation: every mistake is named with its file, rule number and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from zync_assets.core.errors import ZyncError
from zync_assets.specs.model import find_specs, load_spec
from zync_assets.specs.rules import split_join_on

HEAD = """
inputs:
  - {topic: A, pool: Raw}
  - {topic: B, pool: Raw}
outputs:
  - {topic: Out, pool: Staging}
transforms:
"""
DENORM = """
  - type: denorm
    where: op = 'c'
    left: A
    right: B
    join-on: left.after:id::bigint = right.after:a_id::bigint
    out: Out
    sql: left.key AS key, left.after AS value
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def test_the_shipped_invoice_spec_is_valid() -> None:
    spec = load_spec(Path(__file__).parent.parent / "etl_specs" / "invoices.yaml")
    assert [r.type for r in spec.transforms] == ["denorm", "stateless", "stateless", "stateless"]
    assert spec.raw_pools() == {"Raw": ["Invoices", "InvoiceStatus"]}
    assert spec.transforms[0].join_on == (
        "left.after:ID::bigint", "right.after:InvoiceID::bigint",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("  - {type: merge, in: A, out: Out, sql: x}", r"transforms\[1\] type: unknown type 'merge'"),
        ("  - {type: denorm, in: A, left: A, right: B, join-on: 'a = b', out: Out, sql: x}",
         r"transforms\[1\] in: a denorm rule takes left and right"),
        ("  - {type: denorm, left: A, join-on: 'a = b', out: Out, sql: x}",
         r"transforms\[1\] right: missing or empty"),
        ("  - {type: stateless, out: Out, sql: x}", r"transforms\[1\] in: missing or empty"),
        ("  - {type: stateless, in: A, left: B, out: Out, sql: x}",
         r"transforms\[1\] left/right: a stateless rule takes in"),
        ("  - {type: stateless, in: Nope, out: Out, sql: x}",
         r"transforms\[1\] in: topic 'Nope' is not among the inputs"),
        ("  - {type: stateless, in: A, out: Elsewhere, sql: x}",
         r"transforms\[1\] out: topic 'Elsewhere' is not among the outputs"),
        ("  - {type: stateless, in: A, out: Out, sql: '  '}", r"transforms\[1\] sql: missing or empty"),
        ("  - {type: denorm, left: A, right: B, join-on: 'a == b', out: Out, sql: x}",
         r"transforms\[1\] join-on: expected `<left expression> = <right expression>`"),
        ("  - {type: denorm, left: A, right: B, out: Out, sql: x}",
         r"transforms\[1\] join-on: missing or empty"),
        ("  - {type: denorm, left: A, right: B, join-on: 'a = b', out: Out, sql: x, expire-after: soon}",
         r"transforms\[1\] expire-after: 'soon' is neither"),
    ],
)  # fmt: skip
def test_rule_mistakes_are_named(tmp_path: Path, rule: str, message: str) -> None:
    with pytest.raises(ZyncError, match=message) as caught:
        load_spec(write(tmp_path, HEAD + rule + "\n"))
    assert str(caught.value).startswith(str(tmp_path / "spec.yaml"))


def test_a_topic_routed_to_two_pools_is_refused(tmp_path: Path) -> None:
    text = HEAD.replace("  - {topic: B, pool: Raw}", "  - {topic: A, pool: Other}") + DENORM
    with pytest.raises(ZyncError, match="topic 'A' is routed to two pools"):
        load_spec(write(tmp_path, text))


def test_outputs_of_one_input_must_share_a_staging_pool(tmp_path: Path) -> None:
    text = HEAD.replace("outputs:\n", "outputs:\n  - {topic: Out2, pool: Staging2}\n") + (
        "  - {type: stateless, where: op = 'c', in: A, out: Out, sql: x}\n"
        "  - {type: stateless, in: A, out: Out2, sql: x}\n"
    )
    with pytest.raises(ZyncError, match="input topic 'A' feeds outputs in several staging pools"):
        load_spec(write(tmp_path, text))


def test_yaml_and_section_mistakes(tmp_path: Path) -> None:
    with pytest.raises(ZyncError, match="not valid YAML"):
        load_spec(write(tmp_path, "inputs: [\n"))
    with pytest.raises(ZyncError, match="inputs: missing"):
        load_spec(write(tmp_path, "outputs: []\n"))
    with pytest.raises(ZyncError, match=r"inputs\[1\]: invalid pool name '\.\./x'"):
        load_spec(write(tmp_path, "inputs:\n  - {topic: A, pool: ../x}\n"))
    with pytest.raises(ZyncError, match="unknown section"):
        load_spec(write(tmp_path, HEAD + DENORM + "extra: 1\n"))
    with pytest.raises(ZyncError, match="cannot read spec"):
        load_spec(tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a = b", ("a", "b")),
        ("left.after:ID::bigint = right.after:InvoiceID::bigint",
         ("left.after:ID::bigint", "right.after:InvoiceID::bigint")),
        ("coalesce(a, 'x=y') = b", ("coalesce(a, 'x=y')", "b")),
        ("a == b", None), ("a <= b", None), ("a = b = c", None), (" = b", None),
    ],
)  # fmt: skip
def test_join_on_splits_on_one_lone_equals(text: str, expected) -> None:
    assert split_join_on(text) == expected


def test_find_specs(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_text("")
    (tmp_path / "a.yml").write_text("")
    (tmp_path / "notes.txt").write_text("")
    assert [p.name for p in find_specs(tmp_path)] == ["b.yaml", "a.yml"]


GATED = """
inputs:
  - {topic: shop.public.a, pool: Raw}
  - {topic: shop.public.b, pool: Raw}
  - {topic: shop.transaction, pool: Raw}
outputs:
  - {topic: Out, pool: Staging}
  - {topic: Other, pool: Elsewhere}
transforms:
"""
GATED_RULE = "  - {{type: stateless, gate: transaction, in: shop.public.{t}, out: {o}, sql: 'in.key AS key, in.after AS value'{x}}}\n"


def gated_rule(table: str, out: str = "Out", extra: str = "") -> str:
    return GATED_RULE.format(t=table, o=out, x=extra)


def test_a_gated_rule_finds_its_transaction_topic(tmp_path: Path) -> None:
    spec = load_spec(
        write(tmp_path, GATED + gated_rule("a") + gated_rule("b", extra=", expire-after: 10m"))
    )
    assert [r.transaction_topic for r in spec.transforms] == ["shop.transaction"] * 2
    assert spec.transforms[1].expire_after == "10m"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (HEAD + "  - {type: stateless, gate: txn, in: A, out: Out, sql: 'in.key AS key, in.after AS value'}\n",
         "transforms[1] gate: unknown gate 'txn' (transaction)"),
        (HEAD + "  - {type: stateless, gate: transaction, in: A, out: Out, sql: 'in.key AS key, in.after AS value'}\n",
         "transforms[1] gate: the spec reads no Debezium transaction topic for A: add "
         "`<topic.prefix>.transaction` to its inputs"),
        (GATED + gated_rule("a") + "  - {type: stateless, in: shop.public.a, out: Out, sql: 'in.key AS key, in.after AS value'}\n",
         "transforms[2] gate: topic 'shop.public.a' is gated by rule 1: every rule that reads it needs `gate: transaction` too"),
        (GATED + gated_rule("a") + gated_rule("b", out="Other"),
         "transaction topic 'shop.transaction' gates outputs in several staging pools"),
        (GATED + gated_rule("a", extra=", expire-after: 100 offsets"),
         "transforms[1] expire-after: a transaction (or group) expires after a time"),
        (HEAD + "  - {type: stateless, in: A, out: Out, expire-after: 1h, sql: 'in.key AS key, in.after AS value'}\n",
         "transforms[1] expire-after: a stateless rule's events never wait, unless it has `gate: transaction`"),
        (GATED + "  - {type: stateless, in: shop.transaction, out: Out, sql: 'in.key AS key, in.after AS value'}\n" + gated_rule("a"),
         "transaction topic 'shop.transaction' is read by a rule"),
    ],
)  # fmt: skip
def test_gate_mistakes_are_named(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ZyncError, match=None) as caught:
        load_spec(write(tmp_path, text))
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


TXN_HEAD = """
inputs:
  - {topic: order, pool: Raw}
  - {topic: menu, pool: Raw}
outputs:
  - {topic: Totals, pool: Staging}
  - {topic: Lines, pool: Staging}
  - {topic: Other, pool: Elsewhere}
transforms:
"""
TXN_SQL = "sql: 'SELECT txn, key, value FROM events'"


def test_a_txn_rule_reads_its_inputs_groups_and_outputs(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, TXN_HEAD + (
        "  - {type: txn, inputs: [order, menu], group-by: 'value:txn::bigint', "
        "complete-when: 'bool_or(value:done::boolean)', out: [Totals, Lines], expire-after: 1h, "
        f"{TXN_SQL}}}\n"
    )))  # fmt: skip
    [rule] = spec.transforms
    assert rule.topics == ("order", "menu")
    assert rule.output_topics == ("Totals", "Lines") and rule.out == "Totals"
    assert (rule.group_by, rule.complete_when, rule.gate) == (
        "value:txn::bigint", "bool_or(value:done::boolean)", None
    )  # fmt: skip
    assert rule.sql == "SELECT txn, key, value FROM events"


def test_a_debezium_txn_rule_is_gated_by_its_transaction_topic(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, GATED + (
        "  - {type: txn, inputs: [shop.public.a, shop.public.b], "
        f"complete-when: debezium-transaction, out: Out, {TXN_SQL}}}\n"
    )))  # fmt: skip
    [rule] = spec.transforms
    assert (rule.gate, rule.transaction_topic, rule.group_by) == (
        "transaction", "shop.transaction", None
    )  # fmt: skip


TXN_RULE = "  - {{type: txn, inputs: {i}, {g}complete-when: {c}, out: {o}, {s}{x}}}\n"


def txn_rule(i="[order, menu]", g="group-by: 'value:txn', ", c="'bool_or(value:done::boolean)'",
             o="Totals", s=TXN_SQL, x="") -> str:  # fmt: skip
    return TXN_RULE.format(i=i, g=g, c=c, o=o, s=s, x=x)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (TXN_HEAD + txn_rule(i="[order, nope]"),
         "transforms[1] inputs: topic 'nope' is not among the inputs"),
        (TXN_HEAD + txn_rule(i="[order, order]"), "transforms[1] inputs: a topic is listed twice"),
        (TXN_HEAD + "  - {type: [txn], inputs: [order], out: Totals, sql: x}\n",
         "transforms[1] type: unknown type ['txn'] (denorm, stateless, txn, view or mirror)"),
        (TXN_HEAD + txn_rule(i="[]"),
         "transforms[1] inputs: expected a topic or a non-empty list of topics"),
        (TXN_HEAD + txn_rule(g=""), "transforms[1] group-by: missing or empty"),
        (TXN_HEAD + txn_rule(c="''"), "transforms[1] complete-when: missing or empty"),
        (TXN_HEAD + txn_rule(o="[Totals, Other]"),
         "transforms[1] out: its topics live in several staging pools"),
        (TXN_HEAD + txn_rule(o="Nope"), "transforms[1] out: topic 'Nope' is not among the outputs"),
        (TXN_HEAD + txn_rule(x=", expire-after: 10 offsets"),
         "transforms[1] expire-after: a transaction (or group) expires after a time"),
        (TXN_HEAD + txn_rule(x=", in: order"), "transforms[1] in: a txn rule takes inputs, not in"),
        (TXN_HEAD + txn_rule(x=", join-on: 'a = b'"),
         "transforms[1] join-on: not a field of a txn rule"),
        (TXN_HEAD + txn_rule(c="debezium-transaction"),
         "transforms[1] group-by: with `complete-when: debezium-transaction` the groups are "
         "Debezium's source transactions"),
        (TXN_HEAD + txn_rule(g="", c="debezium-transaction"),
         "transforms[1] gate: the spec reads no Debezium transaction topic for order, menu"),
        (GATED + gated_rule("a") + txn_rule(i="[shop.public.a]", o="Out"),
         "transforms[2] gate: topic 'shop.public.a' is gated by rule 1"),
    ],
)  # fmt: skip
def test_txn_rule_mistakes_are_named(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ZyncError) as caught:
        load_spec(write(tmp_path, text))
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_freshness_is_a_duration_or_fail_and_warn(tmp_path: Path) -> None:
    short = load_spec(write(tmp_path, HEAD + DENORM + "freshness: 10m\n")).freshness
    assert short is not None and (short.fail_s, short.warn_s) == (600, None)
    both = load_spec(write(tmp_path, HEAD + DENORM + "freshness: {fail: 1h, warn: 15m}\n"))
    assert both.freshness is not None and (both.freshness.fail_s, both.freshness.warn_s) == (
        3600, 900
    )  # fmt: skip
    assert load_spec(write(tmp_path, HEAD + DENORM)).freshness is None


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("freshness: {warn: 5m}", "freshness: expected a duration (10m) or {fail: 10m, warn: 5m}"),
        ("freshness: {fail: 5m, late: 1m}", "freshness: expected a duration"),
        ("freshness: soon", "freshness.fail: bad duration 'soon'"),
        ("freshness: 0s", "freshness.fail: give a duration longer than 0"),
        ("freshness: {fail: 5m, warn: 10m}", "freshness.warn: must be shorter than freshness.fail"),
    ],
)
def test_a_bad_freshness_is_one_line_naming_the_field(
    tmp_path: Path, section: str, message: str
) -> None:
    with pytest.raises(ZyncError) as caught:
        load_spec(write(tmp_path, HEAD + DENORM + section + "\n"))
    assert message in str(caught.value) and "\n" not in str(caught.value)
