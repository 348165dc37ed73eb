"""Spec validation: every mistake is named with its file, rule number and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from zync_assets.errors import ZyncError
from zync_assets.etl.rules import split_join_on
from zync_assets.spec import find_specs, load_spec

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
