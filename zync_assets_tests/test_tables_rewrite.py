"""Small lake tables written whole by one shared Spark job and committed from the driver
(tables/rewrite.py), against the per-table MERGE they replace: the same rows and the same
change feed, a job count that does not grow with the tables, each row once after a kill -9
during the write, and a rival writer's commit that wins while the late pass writes nothing.
Real Spark and Delta (the pool is written as ingest writes it; no Kafka is asked)."""

from __future__ import annotations

import datetime as dt
import json
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from zync_assets.core.errors import ConcurrentWriter, ZyncError
from zync_assets.lake.pools import table_changes_path, table_path
from zync_assets.specs.model import load_spec
from zync_assets.tables import apply
from zync_assets.tables.apply import Due, compile_tables, table_state
from zync_assets.tables.changes import change_events, new_rows
from zync_assets.tables.rewrite import rewrite_tables
from zync_assets.tables.state import read_table_state, source_ends
from zync_assets.tables.together import run_tables
from zync_assets_tests.conftest import ZYNC, Stack, run_zync
from zync_assets_tests.support.kills import kill_when
from zync_assets_tests.support.pool_data import DEAD, KAFKA, commit_raw
from zync_assets_tests.test_tables_together import SPEC, topic  # a whole database's spec

pytestmark = pytest.mark.integration

ROWS = 300


def events(
    spark: SparkSession, name: str, first: int, rows: list[tuple[int, str, str, int]]
) -> DataFrame:
    """Events of topic `name` from offset `first`: (id, op, name, sequence) each; op d
    deletes (its `before` holds the key)."""
    template = '{"op": "%s", "before": %s, "after": %s, "source": {"lsn": %d}}'
    records = []
    for n, (key, op, text, lsn) in enumerate(rows):
        image = f'{{"id": {key}, "name": "{text}"}}'
        before, after = (image, "null") if op == "d" else ("null", image)
        records.append((first + n, key, template % (op, before, after, lsn)))
    return raw_rows(spark, name, records)


def raw_rows(spark: SparkSession, name: str, records: list[tuple[int, int, str]]) -> DataFrame:
    """Raw pool rows of topic `name` from (offset, id, value JSON) records."""
    frame = spark.createDataFrame(records, "offset long, id long, value string")
    return frame.select(
        F.struct(
            F.lit(name).alias("topic"), F.lit(0).alias("partition"), F.col("offset"),
            F.current_timestamp().alias("timestamp"),
        ).cast(KAFKA).alias("kafka"),
        F.parse_json(F.format_string('{"id": %d}', "id")).alias("key"),
        F.parse_json("value").alias("value"),
        F.lit(None).cast(DEAD).alias("dead_letter"),
    )  # fmt: skip


ROUNDS = [
    # inserts
    [(k, "c", f"a{k}", 10 + k) for k in range(ROWS)],
    # updates of every other key, deletes of every fifth, new keys
    [(k, "u", f"b{k}", 1_000 + k) for k in range(0, ROWS, 2)]
    + [(k, "d", "", 2_000 + k) for k in range(0, ROWS, 5)]
    + [(k, "c", f"n{k}", 3_000 + k) for k in range(ROWS, ROWS + 20)],
    # late events (older than what the table holds: no effect), a deleted key back, updates
    [(k, "u", f"late{k}", 5) for k in range(0, 40)]
    + [(0, "c", "back0", 4_000)]
    + [(k, "u", f"c{k}", 5_000 + k) for k in range(1, ROWS, 7)],
]


def commit_round(spark: SparkSession, run: int, tables: int) -> None:
    rows = ROUNDS[run - 1]
    first = sum(len(r) for r in ROUNDS[: run - 1])
    frames = [events(spark, topic(i), first, rows) for i in range(tables)]
    union = frames[0]
    for more in frames[1:]:
        union = union.unionByName(more)
    commit_raw(spark, "Raw", run, union, {topic(i): first + len(rows) for i in range(tables)})


def expected(rounds: int) -> dict[int, str]:
    """What the events of the first `rounds` rounds say: per key, its newest event's row."""
    newest: dict[int, tuple[int, str, str]] = {}
    for key, op, text, lsn in (e for r in ROUNDS[:rounds] for e in r):
        if key not in newest or lsn > newest[key][0]:
            newest[key] = (lsn, op, text)
    return {k: text for k, (_, op, text) in newest.items() if op != "d"}


def content(spark: SparkSession, table: str) -> list[tuple]:
    frame = spark.read.format("delta").load(table_path(table))
    return sorted((r.id, r.name) for r in frame.select("id", "name").collect())


def change_feed(spark: SparkSession, table: str) -> Counter:
    frame = (
        spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 0)
        .load(table_path(table))
    )  # fmt: skip
    return Counter((r.id, r.name, r._change_type) for r in frame.collect())


def jobs_of(spark: SparkSession, work: Callable[[], object]) -> int:
    """How many Spark jobs `work()` launched."""
    tracker = spark.sparkContext.statusTracker()
    group = f"count-{dt.datetime.now().timestamp()}"
    spark.sparkContext.setJobGroup(group, "counted")
    try:
        work()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return len(tracker.getJobIdsForGroup(group))


def test_the_shared_job_ends_with_the_rows_and_change_feed_a_merge_gives(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three rounds (inserts; updates, deletes and new keys; late events and a deleted key
    back) applied to the same tables both ways: rows and change feeds equal, and equal
    to what the events say."""
    spec_path = tmp_path / "whole.yaml"
    spec_path.write_text(SPEC)
    spec = load_spec(spec_path)
    found: dict[str, tuple] = {}
    for way, below in (("merge", 0), ("rewrite", apply.REWRITE_BELOW_BYTES)):
        monkeypatch.setenv("ZYNC_LAKE", str(tmp_path / way))
        for run in range(1, len(ROUNDS) + 1):
            commit_round(spark, run, 2)
            results = run_tables(spark, spec, rewrite_below=below)
            assert [r.run for r in results] == [run, run], results
            if run == 1 and way == "rewrite":  # new tables, each key once: written in bulk
                assert not list(Path(table_path("t0")).glob("_change_data/*")), "folded"
        found[way] = (content(spark, "t0"), change_feed(spark, "t0"), content(spark, "t1"))
        operations = [
            r.operation for r in spark.sql(f"DESCRIBE HISTORY delta.`{table_path('t0')}`").collect()
        ]
        assert ("MERGE" in operations) == (way == "merge"), operations
        if way == "rewrite":  # checkpoints spread over passes, not every table's every tenth
            for path in (table_path("t0"), table_changes_path("t0")):
                properties = spark.sql(f"SHOW TBLPROPERTIES delta.`{path}`").collect()
                interval = int(
                    dict((r.key, r.value) for r in properties)["delta.checkpointInterval"]
                )
                assert 100 <= interval < 200, (path, interval)
    assert found["rewrite"] == found["merge"]
    rows = dict(found["rewrite"][0])
    assert rows[0] == "back0" and rows[2] == "b2" and rows[3] == "a3" and rows[8] == "c8"
    assert 5 not in rows and 10 not in rows and rows[ROWS + 3] == f"n{ROWS + 3}"
    assert rows == expected(len(ROUNDS))
    feed = found["rewrite"][1]
    assert feed[(2, "a2", "update_preimage")] == feed[(2, "b2", "update_postimage")] == 1
    assert feed[(5, "a5", "delete")] == 1 and feed[(0, "back0", "insert")] == 1
    assert not any(name.startswith("late") for _, name, _ in feed)


def test_a_pass_over_more_tables_launches_no_more_jobs(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same pass over 2 and over 8 tables (after a pass that made their change logs):
    as many Spark jobs (±1), where per-table MERGEs launch jobs for each table (shown over
    2 and 4: the count that tells them apart, at half the MERGEs)."""
    spec_path = tmp_path / "whole.yaml"
    spec_path.write_text(SPEC)
    spec = load_spec(spec_path)
    jobs: dict[tuple[str, int], int] = {}
    ways = {"merge": (2, 4), "rewrite": (2, 8)}
    for way, below in (("merge", 0), ("rewrite", apply.REWRITE_BELOW_BYTES)):
        for tables in ways[way]:
            monkeypatch.setenv("ZYNC_LAKE", str(tmp_path / f"{way}{tables}"))
            for run in (1, 2):
                commit_round(spark, run, tables)
                run_tables(spark, spec, rewrite_below=below)
            commit_round(spark, 3, tables)
            jobs[(way, tables)] = jobs_of(
                spark, partial(run_tables, spark, spec, rewrite_below=below)
            )
    assert abs(jobs[("rewrite", 8)] - jobs[("rewrite", 2)]) <= 1, jobs
    assert jobs[("merge", 4)] - jobs[("merge", 2)] >= 2 * 3, jobs


def amounts(spark: SparkSession, name: str, first: int, rows: list[tuple[int, str]]) -> DataFrame:
    """Upserts of topic `name` from offset `first`: (id, amount as JSON number text)."""
    template = '{"op": "c", "after": {"id": %d, "amount": %s}, "source": {"lsn": %d}}'
    records = [(first + n, key, template % (key, amount, first + n + 1))
               for n, (key, amount) in enumerate(rows)]  # fmt: skip
    return raw_rows(spark, name, records)


def labels(spark: SparkSession, name: str, first: int, rows: list[tuple[int, str]]) -> DataFrame:
    """Upserts of topic `name` from offset `first`: (id, labels as JSON: an array or null),
    a column the table holds as VARIANT that is not a JSON document (a text[])."""
    template = '{"op": "c", "after": {"id": %d, "labels": %s}, "source": {"lsn": %d}}'
    records = [(first + n, key, template % (key, value, first + n + 1))
               for n, (key, value) in enumerate(rows)]  # fmt: skip
    return raw_rows(spark, name, records)


def test_an_array_column_is_written_by_the_shared_job(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A VARIANT column that is not a JSON document (a text[]: its NULL is NULL) goes
    through the shared job like any other; its null check once made the job fail for every
    table beside it (each then MERGEd alone, a minute for a whole database)."""
    spec_path = tmp_path / "whole.yaml"
    spec_path.write_text(SPEC)
    spec = load_spec(spec_path)
    rounds = [[(1, '["a", "b"]'), (2, "null"), (3, '["c"]')], [(1, "null"), (2, '["d"]')]]
    found = {}
    caplog.set_level("WARNING", logger="zync_assets.tables.apply")
    for way, below in (("merge", 0), ("rewrite", apply.REWRITE_BELOW_BYTES)):
        monkeypatch.setenv("ZYNC_LAKE", str(tmp_path / way))
        first = 0
        for run, rows in enumerate(rounds, start=1):
            frames = labels(spark, topic(0), first, rows).unionByName(
                amounts(spark, topic(1), first, [(k, "1.5") for k, _ in rows]))  # fmt: skip
            first += len(rows)
            commit_raw(spark, "Raw", run, frames, {topic(0): first, topic(1): first})
            assert [r.run for r in run_tables(spark, spec, rewrite_below=below)] == [run, run]
        frame = spark.read.format("delta").load(table_path("t0"))
        assert dict(frame.dtypes)["labels"] == "variant"  # the column the null check reads
        found[way] = sorted(
            (r.id, r.labels) for r in frame.selectExpr("id", "to_json(labels) AS labels").collect()
        )
        history = spark.sql(f"DESCRIBE HISTORY delta.`{table_path('t0')}`").collect()
        assert ("MERGE" in [r.operation for r in history]) == (way == "merge")
    assert not [r.getMessage() for r in caplog.records if "shared write" in r.getMessage()]
    assert found["rewrite"] == found["merge"] == [(1, None), (2, '["d"]'), (3, '["c"]')]


def test_a_new_tables_first_pass_with_a_key_twice_keeps_its_newest_event(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot's events are written in bulk only where each key comes once: a key sent
    twice (Kafka Connect re-sends after a restart) or changed in the same pass is folded,
    its newest event kept; the table beside it, each key once, goes in bulk."""
    monkeypatch.setenv("ZYNC_LAKE", str(tmp_path / "lake"))
    spec_path = tmp_path / "whole.yaml"
    spec_path.write_text(SPEC)
    spec = load_spec(spec_path)
    twice = [(1, "c", "a1", 10), (2, "c", "a2", 11), (1, "c", "a1", 10), (2, "u", "b2", 12)]
    once = [(1, "c", "x1", 10), (2, "c", "x2", 11)]
    frames = events(spark, topic(0), 0, twice).unionByName(events(spark, topic(1), 0, once))
    commit_raw(spark, "Raw", 1, frames, {topic(0): 4, topic(1): 2})
    assert [r.run for r in run_tables(spark, spec)] == [1, 1]
    assert content(spark, "t0") == [(1, "a1"), (2, "b2")]
    assert content(spark, "t1") == [(1, "x1"), (2, "x2")]
    assert list(Path(table_path("t0")).glob("_change_data/*")), "t0 was not folded"
    assert not list(Path(table_path("t1")).glob("_change_data/*")), "t1 was not written in bulk"
    assert change_feed(spark, "t1") == Counter({(1, "x1", "insert"): 1, (2, "x2", "insert"): 1})


def test_a_value_one_table_cannot_hold_fails_that_table_and_not_the_others(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A pass whose shared job fails on one table's value (a decimal too large for the
    column's decimal(38,18)): each table of the pass is then merged alone, so the other
    table applies its events and the bad one stops with a one-line error naming the
    column; nothing of the bad table's run is written."""
    monkeypatch.setenv("ZYNC_LAKE", str(tmp_path / "lake"))
    spec_path = tmp_path / "whole.yaml"
    spec_path.write_text(SPEC)
    spec = load_spec(spec_path)
    small = [(k, "1.5") for k in range(5)]
    first = amounts(spark, topic(0), 0, small).unionByName(amounts(spark, topic(1), 0, small))
    commit_raw(spark, "Raw", 1, first, {topic(0): 5, topic(1): 5})
    assert [r.run for r in run_tables(spark, spec)] == [1, 1]
    good = amounts(spark, topic(0), 5, [(1, "2.25"), (7, "3.5")])
    huge = amounts(spark, topic(1), 5, [(1, "12345678901234567890123.5")])
    commit_raw(spark, "Raw", 2, good.unionByName(huge), {topic(0): 7, topic(1): 6})
    caplog.set_level("WARNING", logger="zync_assets.tables.apply")
    with pytest.raises(ZyncError) as stopped:
        run_tables(spark, spec)
    assert any("shared write of 2 tables failed" in r.getMessage() for r in caplog.records), (
        "the fault did not land in the shared job"
    )
    message = str(stopped.value)
    assert "\n" not in message and "table t1: column amount" in message, message
    assert read_table_state(table_path("t0"), "t0").run == 2
    assert read_table_state(table_path("t1"), "t1").run == 1
    rows = spark.read.format("delta").load(table_path("t0")).collect()
    assert sorted((r.id, float(r.amount)) for r in rows) == [
        (0, 1.5),
        (1, 2.25),
        (2, 1.5),
        (3, 1.5),
        (4, 1.5),
        (7, 3.5),
    ]
    left = [f for f in Path(table_path("t1")).rglob("zync-r2-*")]
    assert not left, f"the failed pass left files in t1: {left}"


def round_two_pending(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tables: int
) -> tuple[Path, Path]:
    """A lake (its path, and the whole-database spec's) whose `tables` tables applied round
    1, with round 2 in the pool for the next pass."""
    lake = tmp_path / "lake"
    monkeypatch.setenv("ZYNC_LAKE", str(lake))
    spec_path = tmp_path / "whole.yaml"
    spec_path.write_text(SPEC)
    commit_round(spark, 1, tables)
    run_tables(spark, load_spec(spec_path))
    commit_round(spark, 2, tables)
    return lake, spec_path


def test_a_kill_during_the_shared_write_leaves_each_row_once_and_no_orphan(
    spark, stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill -9 once the shared job has written files and no table has committed them: the
    tables stay where they were; the next pass applies the round once and deletes the
    killed attempt's files."""
    tables = 8
    lake, spec_path = round_two_pending(spark, tmp_path, monkeypatch, tables)
    roots = [Path(table_path(f"t{i}")) for i in range(tables)]
    logs = {root: len(list((root / "_delta_log").glob("*.json"))) for root in roots}

    def written_not_committed(_stdout: str) -> bool:
        written = any(next(root.glob("zync-r2-*.parquet"), None) for root in roots)
        return written and all(
            len(list((root / "_delta_log").glob("*.json"))) == logs[root] for root in roots
        )

    env = stack.env(ZYNC_LAKE=str(lake))
    killed = kill_when([ZYNC, "table", "apply", str(spec_path)], env, written_not_committed)
    assert killed.landed, f"the pass ended before its files were written: {killed.stderr}"
    orphans = {f.name for root in roots for f in root.rglob("zync-r2-*.parquet")}
    assert orphans, "the kill left no written file behind"
    assert all(read_table_state(str(r), r.name).run == 1 for r in roots)

    done = run_zync("table", "apply", str(spec_path), env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    for root in roots:
        assert read_table_state(str(root), root.name).run == 2
        rows = content(spark, root.name)
        assert len(rows) == len(dict(rows)) and dict(rows) == expected(2), root.name
        left = {f.name for f in root.rglob("zync-r2-*.parquet")}
        assert not left & orphans, f"{root.name} keeps the killed attempt's files"


def test_a_rival_writers_commit_wins_and_the_late_pass_writes_nothing(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass planned, then a rival pass of the same tables commits first: the late pass's
    commit is refused with a one-line ConcurrentWriter, its files are deleted, and the
    tables hold the rival's run once."""
    monkeypatch.setenv("ZYNC_LAKE", str(tmp_path / "lake"))
    spec_path = tmp_path / "whole.yaml"
    spec_path.write_text(SPEC)
    spec = load_spec(spec_path)
    commit_round(spark, 1, 2)
    run_tables(spark, spec)
    commit_round(spark, 2, 2)
    compiled = compile_tables(spark, spec)
    late = []
    for c in compiled:
        state = table_state(c.table.name)
        ends = source_ends(spec, c.table) or {}
        found = new_rows(spark, spec, c.table, state.cursors, ends)
        assert found is not None
        due = Due(c, state, change_events(found.rows, c).localCheckpoint(), found.ends)
        planned = apply._plan(spark, due, dt.datetime.now(dt.UTC), None, False)
        assert isinstance(planned, apply._Planned)
        late.append(apply._rewrite(spark, planned))
    assert [r.run for r in run_tables(spark, spec)] == [2, 2]  # the rival
    failed = rewrite_tables(spark, late, dt.datetime.now(dt.UTC))
    for item in late:
        error = failed[item.name]
        assert isinstance(error, ConcurrentWriter), error
        assert "\n" not in str(error) and "another writer" in str(error)
        root = Path(item.path)
        assert not list(root.rglob(f"{item.mine}*")), "the refused pass's files stay"
        assert read_table_state(item.path, item.name).run == 2
        rows = content(spark, item.name)
        assert len(rows) == len(dict(rows)) and dict(rows) == expected(2)


def data_files(name: str) -> dict[str, dict]:
    """Table `name`'s data files now, from its log: path -> its add action."""
    held: dict[str, dict] = {}
    for commit in sorted((Path(table_path(name)) / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in commit.read_text().splitlines()]
        for action in actions:
            if "remove" in action:
                held.pop(action["remove"]["path"], None)
        held |= {a["add"]["path"]: a["add"] for a in actions if "add" in a}
    return held


# A `zync table apply` that kills itself (kill -9 of its process group: the CLI and its
# Spark JVM) right after one table's change log committed run 2 and before that table's own
# commit: the middle of the table's commit, which no polling from outside can hit.
DIE_INSIDE_A_COMMIT = """
import os, signal, sys
from zync_assets.cli.main import main
from zync_assets.tables import rewrite

real = rewrite.java_class

class Dying:
    def __init__(self, found):
        self.found = found
    def commit(self, session, path, *rest):
        version = self.found.commit(session, path, *rest)
        if path.endswith(sys.argv[2] + ".changes"):
            os.killpg(os.getpgid(0), signal.SIGKILL)
        return version
    def __getattr__(self, name):
        return getattr(self.found, name)

def java_class(jvm, name):
    found = real(jvm, name)
    return Dying(found) if name == rewrite.COMMIT_CLASS else found

rewrite.java_class = java_class
main(["table", "apply", sys.argv[1]])
"""


def test_a_kill_inside_one_tables_commit_applies_its_run_once(
    spark, stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill -9 after table t1's change log committed the pass's deletes and before t1's own
    commit (t0 committed before it, the others not yet): the rerun commits t1's run without
    a second copy of its deletes in the change log, every table holds each row once, and
    no file of the killed attempt stays."""
    tables = 4
    lake, spec_path = round_two_pending(spark, tmp_path, monkeypatch, tables)
    script = tmp_path / "die.py"
    script.write_text(DIE_INSIDE_A_COMMIT)
    env = stack.env(ZYNC_LAKE=str(lake))
    died = subprocess.run(
        [sys.executable, str(script), str(spec_path), "t1"], env=env, capture_output=True,
        text=True, timeout=600, start_new_session=True,
    )  # fmt: skip
    assert died.returncode == -signal.SIGKILL, died.stderr[-2000:]
    runs = {f"t{i}": read_table_state(table_path(f"t{i}"), f"t{i}").run for i in range(tables)}
    assert runs["t1"] == 1 and list(runs.values()).count(2) <= 1, (
        runs
    )  # the kill landed inside t1's
    deletes = {k for k, op, _, _ in ROUNDS[1] if op == "d"}

    def logged(table: str) -> Counter:
        rows = spark.read.format("delta").load(table_changes_path(table)).collect()
        return Counter(r["__RUN"] for r in rows)

    assert logged("t1")[2] == len(deletes)  # its change log has run 2 already
    done = run_zync("table", "apply", str(spec_path), env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    for i in range(tables):
        name = f"t{i}"
        assert read_table_state(table_path(name), name).run == 2
        rows = content(spark, name)
        assert len(rows) == len(dict(rows)) and dict(rows) == expected(2), name
        assert logged(name)[2] == len(deletes), name  # once, not again
        root = Path(table_path(name))
        held = {p for p in data_files(name) if p.startswith("zync-r2-")}
        assert {f.name for f in root.glob("zync-r2-*.parquet")} == held, name  # no orphan
        attempts = {f.name.split("-")[2] for f in (root / "_change_data").glob("zync-r2-*")}
        assert len(attempts) == 1, (name, attempts)  # the committed attempt's change feed only
