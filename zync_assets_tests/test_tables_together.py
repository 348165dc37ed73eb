"""The lake tables of one pool read together (tables/together.py): one scan and one count for
many tables, each table still its own commit. A kill -9 between two tables' commits costs
the others a rerun, never a row; tables of one topic at other cursors are read alone.
Real Spark and Delta (the pool is written as ingest writes it; no Kafka is asked)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from zync_assets.lake.pools import table_path
from zync_assets.specs.model import load_spec
from zync_assets.tables import together
from zync_assets.tables.apply import compile_tables, table_state
from zync_assets.tables.state import read_table_state, source_ends
from zync_assets.tables.together import run_tables
from zync_assets_tests.conftest import ZYNC, Stack, run_zync
from zync_assets_tests.support.kills import kill_when
from zync_assets_tests.support.pool_data import DEAD, KAFKA, commit_raw

pytestmark = pytest.mark.integration

TABLES = 6
ROWS = 2_000
SPEC = """inputs:
  - {topics: 'db\\.public\\..*', pool: Raw, format: json}
tables:
  - {topics: 'db\\.public\\..*', name: '{table}'}
"""


def topic(i: int) -> str:
    return f"db.public.t{i}"


def events(spark: SparkSession, name: str, first: int, op: str, tag: str) -> DataFrame:
    """ROWS events of `name` from offset `first`: row `id` gets the name `tag-id`."""
    template = '{"op": "OP", "after": {"id": %d, "name": "TAG-%d"}, "source": {"lsn": %d}}'
    value = F.format_string(
        template.replace("OP", op).replace("TAG", tag), "id", "id", F.col("id") + first
    )
    return spark.range(ROWS).select(
        F.struct(
            F.lit(name).alias("topic"), F.lit(0).alias("partition"),
            (F.col("id") + first).alias("offset"), F.current_timestamp().alias("timestamp"),
        ).cast(KAFKA).alias("kafka"),
        F.parse_json(F.format_string('{"id": %d}', "id")).alias("key"),
        F.parse_json(value).alias("value"),
        F.lit(None).cast(DEAD).alias("dead_letter"),
    )  # fmt: skip


def commit_round(spark: SparkSession, run: int, op: str, tag: str) -> None:
    """ROWS events for each table's topic in ingest run `run` of pool Raw."""
    first = (run - 1) * ROWS
    frames = [events(spark, topic(i), first, op, tag) for i in range(TABLES)]
    rows = frames[0]
    for more in frames[1:]:
        rows = rows.unionByName(more)
    commit_raw(spark, "Raw", run, rows, {topic(i): run * ROWS for i in range(TABLES)})


def names(spark: SparkSession, table: str) -> list[str]:
    frame = spark.read.format("delta").load(table_path(table)).orderBy("id")
    return [r.name for r in frame.select("name").collect()]


def commits(lake: Path, table: str) -> int:
    return len(list((lake / "_tables" / table / "_delta_log").glob("*.json")))


def test_a_kill_between_two_tables_commits_costs_the_others_a_rerun_not_a_row(
    spark, stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = tmp_path / "lake"
    monkeypatch.setenv("ZYNC_LAKE", str(lake))
    spec_path = tmp_path / "whole.yaml"
    spec_path.write_text(SPEC)
    spec = load_spec(spec_path)
    commit_round(spark, 1, "c", "first")
    assert [r.run for r in run_tables(spark, spec)] == [1] * TABLES
    made = {f"t{i}": commits(lake, f"t{i}") for i in range(TABLES)}
    commit_round(spark, 2, "u", "second")
    # The second pass reads every table's events together: the kill lands once a table has
    # committed them and another has not.
    grouped = together._groups([
        together._Waiting(c, table_state(c.table.name), source_ends(spec, c.table) or {})
        for c in compile_tables(spark, spec)
    ])  # fmt: skip
    assert [len(g) for g in grouped] == [TABLES], grouped

    def some_committed(_stdout: str) -> bool:
        done = sum(1 for t, n in made.items() if commits(lake, t) > n)
        return 0 < done < TABLES

    env = stack.env(ZYNC_LAKE=str(lake))
    killed = kill_when([ZYNC, "table", "apply", str(spec_path)], env, some_committed)
    assert killed.landed, f"the pass ended before a table committed: {killed.stderr}"
    after_kill = {t: commits(lake, t) > n for t, n in made.items()}
    assert 0 < sum(after_kill.values()) < TABLES, after_kill

    done = run_zync("table", "apply", str(spec_path), env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = {line.split(":")[0].split()[1]: line for line in done.stdout.splitlines()}
    for t, committed in after_kill.items():
        # A table the killed pass committed has nothing new; the others apply round 2 once.
        assert ("nothing new" in lines[t]) == committed, lines[t]
        assert names(spark, t) == [f"second-{i}" for i in range(ROWS)], t
        state = read_table_state(table_path(t), t)
        assert state.cursors == {topic(int(t[1:])): {0: 2 * ROWS}}, (t, state.cursors)


def test_tables_of_one_topic_at_other_cursors_are_read_alone(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two tables of one topic, one of them a pass behind (a failed pass, or a table added
    later): the grouped count would give it the other's events, so it is read alone; each
    ends with every row."""
    monkeypatch.setenv("ZYNC_LAKE", str(tmp_path / "lake"))
    spec_path = tmp_path / "two.yaml"
    spec_path.write_text(
        "inputs:\n  - {topic: db.public.t0, pool: Raw, format: json}\n"
        "  - {topic: db.public.t1, pool: Raw, format: json}\n"
        "tables:\n  - {name: a, source: db.public.t0, keys: [id]}\n"
        "  - {name: b, source: db.public.t0, keys: [id]}\n"
        "  - {name: c, source: db.public.t1, keys: [id]}\n"
        "  - {name: d, source: db.public.t1, keys: [id]}\n"
    )
    spec = load_spec(spec_path)
    one = [events(spark, topic(0), 0, "c", "first"), events(spark, topic(1), 0, "c", "first")]
    commit_raw(spark, "Raw", 1, one[0].unionByName(one[1]), {topic(0): ROWS, topic(1): ROWS})
    assert [r.run for r in run_tables(spark, spec, only="a")] == [1]  # b is a pass behind
    two = [events(spark, topic(0), ROWS, "u", "second"), events(spark, topic(1), ROWS, "u", "x")]
    commit_raw(
        spark, "Raw", 2, two[0].unionByName(two[1]), {topic(0): 2 * ROWS, topic(1): 2 * ROWS}
    )
    grouped = together._groups([
        together._Waiting(c, table_state(c.table.name), source_ends(spec, c.table) or {})
        for c in compile_tables(spark, spec)
    ])  # fmt: skip
    assert sorted(sorted(m.compiled.table.name for m in g) for g in grouped) == [
        ["a"], ["b"], ["c", "d"],
    ]  # fmt: skip
    results = {r.table: r for r in run_tables(spark, spec, now=dt.datetime.now(dt.UTC))}
    assert {t: (r.run, r.read) for t, r in results.items()} == {
        "a": (2, ROWS), "b": (1, 2 * ROWS), "c": (1, 2 * ROWS), "d": (1, 2 * ROWS),
    }  # fmt: skip
    for t, tag in (("a", "second"), ("b", "second"), ("c", "x"), ("d", "x")):
        assert names(spark, t) == [f"{tag}-{i}" for i in range(ROWS)], t
    assert results["a"].cursors == results["b"].cursors == {topic(0): {0: 2 * ROWS}}
