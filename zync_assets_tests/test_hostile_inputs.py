"""Hostile `zync produce` lines and spec files: one clear error each, nothing written.

The named cases are the ways such files break in practice; hypothesis adds random and
mutated ones (`ZYNC_FUZZ_INPUTS`, default 300 each): whatever the bytes, the reader
either accepts them or raises ZyncError — never another exception, never a hang.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zync_assets.core.errors import ZyncError
from zync_assets.kafka.clients import topic_names
from zync_assets.kafka.produce import Line, parse_lines
from zync_assets.specs.model import load_spec
from zync_assets_tests.conftest import Stack, run_zync

FUZZ = int(os.environ.get("ZYNC_FUZZ_INPUTS", "300"))
GOOD_SPEC = """inputs:
  - {topic: T, pool: P}
outputs:
  - {topic: O, pool: S}
transforms:
  - {type: stateless, in: T, out: O, sql: "in.key AS key"}
"""


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (b"not json", "line 1: not valid JSON"),
        (b'{"a": "\xff\xfe"}', "line 1: not UTF-8 (byte 0xff at column 8)"),
        (b'{"a": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", "line 1: nested too deeply"),
        (b'{"a": 1, "a": 2}', "line 1: key 'a' is given twice"),
        (b'{"a": 1' + b"0" * 5000 + b"}", "line 1: Exceeds the limit (4300 digits)"),
    ],
    ids=["not-json", "not-utf8", "deep", "duplicate-key", "huge-integer"],
)
def test_a_hostile_produce_line_is_one_clear_error(line: bytes, error: str) -> None:
    with pytest.raises(ZyncError) as raised:
        parse_lines([b'{"a": 1}\n', b"\n", line])
    assert str(raised.value).replace("line 3", "line 1").startswith(error), raised.value


@settings(max_examples=FUZZ, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.binary(max_size=200) | st.text(max_size=200).map(str.encode), max_size=5))
def test_random_produce_lines_parse_or_fail_clearly(lines: list[bytes]) -> None:
    """Against the standard library's reading of each line: the records it gives, or one
    one-line error naming the first line it cannot read."""
    expected, first_bad = expected_records(lines)
    if first_bad is None:
        assert parse_lines(lines) == expected
        return
    with pytest.raises(ZyncError) as raised:
        parse_lines(lines)
    message = str(raised.value)
    assert message.startswith(f"line {first_bad}: ") and "\n" not in message, message


def expected_records(lines: list[bytes]) -> tuple[list[Line], int | None]:
    """What `zync produce` must make of the lines, read with json alone: the records, or
    the number of the first line that is not UTF-8 JSON (or repeats a key)."""

    def unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
        if len({k for k, _ in pairs}) != len(pairs):
            raise ValueError("a key given twice")
        return dict(pairs)

    records = []
    for number, raw in enumerate(lines, start=1):
        try:
            text = raw.decode("utf-8")
            if not text.strip():
                continue
            data = json.loads(text, object_pairs_hook=unique)
        except (ValueError, RecursionError):
            return [], number
        if isinstance(data, dict) and data and set(data) <= {"key", "value"}:
            records.append(Line(number, data.get("key"), data.get("value")))
        else:
            records.append(Line(number, None, data))
    return records, None


@pytest.mark.integration
def test_an_oversized_line_among_good_ones_writes_nothing(stack: Stack, topic: str) -> None:
    lines = '{"a": "short"}\n' * 10 + '{"a": "' + "x" * 1_100_000 + '"}\n'
    done = run_zync("produce", "-t", topic, env=stack.env(), stdin=lines)
    assert done.returncode == 1 and "line 11: its message is" in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert topic not in topic_names(stack.kafka)  # not even created


SPEC_CASES = {
    "path-like pool": (GOOD_SPEC.replace("pool: P", "pool: ../../etc"), "invalid pool name"),
    "SQL-breaking topic": (
        GOOD_SPEC.replace("topic: T", "topic: \"T'; DROP TABLE x; --\"")
        .replace("in: T", "in: \"T'; DROP TABLE x; --\""),
        "invalid topic name",
    ),
    "duplicate section": (GOOD_SPEC + "inputs:\n  - {topic: U, pool: Q}\n", "given twice"),
    "duplicate key": (GOOD_SPEC.replace("pool: P}", "pool: P, pool: Q}"), "given twice"),
    "alias bomb": (
        "a: &a [l, l, l, l, l, l, l, l, l]\n"
        + "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))
        + "inputs: *i\n",
        "anchors",
    ),
    "deep nesting": ("inputs: " + "[" * 10_000 + "]" * 10_000 + "\n", "nested deeper than"),
    "huge file": (GOOD_SPEC + "# " + "x" * (2 << 20) + "\n", "too large for a spec"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(SPEC_CASES))
def test_a_hostile_spec_file_is_one_clear_error(case: str, tmp_path: Path) -> None:
    text, error = SPEC_CASES[case]
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(ZyncError, match=error) as raised:
        load_spec(path)
    assert "\n" not in str(raised.value) and str(path) in str(raised.value)


def test_a_spec_file_not_in_utf8_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(GOOD_SPEC.encode().replace(b"pool: P", b"pool: P\xff"))
    with pytest.raises(ZyncError, match=r"line 2: not UTF-8 \(byte 0xff\)"):
        load_spec(path)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (GOOD_SPEC + "~: x\n", "unknown section(s) None"),  # the fuzzer's find: a null key
        (GOOD_SPEC + "7: x\n", "unknown section(s) 7"),
        (GOOD_SPEC.replace('sql: "in.key AS key"', 'sql: "in.key AS key", ~: 1'),
         "None: not a field of a stateless rule"),
        (GOOD_SPEC + "tables:\n  - {name: t, source: T, keys: [id], ~: 1}\n",
         "None: not a field of a table"),
    ],
    ids=["null-section", "number-section", "null-rule-field", "null-table-field"],
)  # fmt: skip
def test_a_spec_key_that_is_not_a_string_is_one_clear_error(
    tmp_path: Path, text: str, error: str
) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(ZyncError) as refused:
        load_spec(path)
    assert error in str(refused.value) and "\n" not in str(refused.value), refused.value


@settings(max_examples=FUZZ, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_and_mutated_spec_files_load_or_fail_clearly(data, tmp_path_factory) -> None:
    good = GOOD_SPEC.encode()
    mutated = bytearray(good)
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(0, len(mutated) - 1))
        mutated[at] = data.draw(st.integers(0, 255))
    text = data.draw(st.sampled_from([bytes(mutated), data.draw(st.binary(max_size=400))]))
    path = tmp_path_factory.mktemp("spec") / "spec.yaml"
    path.write_bytes(text)
    try:
        spec = load_spec(path)
    except ZyncError as refused:  # one line that names the file
        assert "\n" not in str(refused) and str(path) in str(refused), refused
        return
    # Accepted (a mutation inside a name, the SQL or a comment): the spec is what the text says:
    # every input and output names a topic and a pool the text holds.
    source = text.decode("utf-8")
    for item in (*spec.inputs, *spec.outputs):
        assert item.topic in source and item.pool in source, (item, source)
