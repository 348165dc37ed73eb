"""`zync status` and the figures behind it, on a real pool and topic."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from zync_assets.core.errors import ZyncError
from zync_assets.core.settings import sink_settings
from zync_assets.demo.via_dagster import covers
from zync_assets.pipeline.sink_status import (
    MISSING,
    DeadLetter,
    SinkStatus,
    SinkTask,
    Waiting,
    task_reason,
)
from zync_assets.pipeline.status import (
    OutputStatus,
    PartitionLag,
    raw_status,
    staging_status,
    table_status,
)
from zync_assets_tests.conftest import Stack, free_port, produce_bytes, produce_json, run_zync
from zync_assets_tests.support.imports import modules_of

pytestmark = pytest.mark.integration

NO_SPARK = f"sc://127.0.0.1:{free_port()}"  # a Spark Connect URL no server answers at


def column_text(shown: str, header: str, table: int = 1) -> str:
    """The cells of one column of the `table`-th table `zync status` drew, joined: what a
    reader sees in it, however the terminal's width folded them."""
    tables = shown.split("┏")[1:]
    head, body = tables[table - 1].split("┡", 1)
    header_row = next(line for line in head.splitlines() if header in line)
    index = [cell.strip() for cell in header_row.split("┃")].index(header)
    rows = [line for line in body.split("└", 1)[0].splitlines() if line.startswith("│")]
    return "".join(row.split("│")[index].strip() for row in rows)


def test_lag_never_goes_negative_and_coverage_needs_every_partition() -> None:
    assert PartitionLag("t", 0, end=10, cursor=4).lag == 6
    assert PartitionLag("t", 0, end=3, cursor=4).lag == 0  # records deleted by retention
    assert OutputStatus("o", staged=5, sent=2).lag == 3
    assert covers({"a": {0: 3, 1: 2}}, {"a": {0: 3, 1: 2}})
    assert not covers({"a": {0: 3}}, {"a": {0: 3, 1: 1}})


def test_status_shows_lag_pending_dead_letters_and_unsent_records(
    spark, stack: Stack, registry, topic: str, tmp_path: Path, lake: Path
) -> None:
    from zync_assets.etl.run import run_etl
    from zync_assets.ingest.ingest import ingest
    from zync_assets.specs.model import load_spec
    from zync_assets.tables.together import run_tables

    spec_path = tmp_path / "status.yaml"
    spec_path.write_text(
        f"""
inputs:
  - {{topic: {topic}, pool: StatusRaw}}
outputs:
  - {{topic: {topic}_out, pool: StatusStaging}}
transforms:
  - {{type: stateless, in: {topic}, out: {topic}_out, sql: "in.key AS key, in.value AS value"}}
tables:
  - {{name: status_current, source: {topic}_out, keys: [id]}}
"""
    )
    produce_json(stack, topic, [({"id": i}, {"id": i, "n": i}) for i in range(3)])
    produce_bytes(stack, topic, [(None, b"not avro")])
    ingest(spark, "StatusRaw", [topic], stack.kafka, registry)
    run_etl(spark, load_spec(spec_path))
    spec = load_spec(spec_path)
    (behind,) = [table_status(spec, t) for t in spec.tables]
    assert (behind.exists, behind.lag) == (False, 3)  # the 3 output records to apply
    run_tables(spark, spec, registry)
    (applied,) = [table_status(spec, t) for t in spec.tables]
    assert (applied.exists, applied.lag) == (True, 0)
    produce_json(stack, topic, [({"id": 9}, {"id": 9, "n": 9})])  # not ingested yet

    raw = raw_status(lambda: spark, stack.kafka, "StatusRaw", [topic])
    assert (raw.lag, raw.dead_letters) == (1, 1)
    (staging,) = [staging_status(lambda: spark, stack.kafka, load_spec(spec_path), "StatusStaging")]
    assert (staging.lag, staging.pending, staging.expired) == (0, 0, 0)
    assert staging.outputs == [OutputStatus(f"{topic}_out", staged=3, sent=0)]

    # Every figure is in a commit the passes made: status answers with no Spark (its
    # master here is a Connect server no one listens at).
    env = stack.env(ZYNC_LAKE=str(lake), ZYNC_SPARK_MASTER=NO_SPARK)
    shown = run_zync("status", str(spec_path), env=env, timeout=300)  # piped: JSON
    assert shown.returncode == 0, shown.stderr
    # Nor PySpark's imports (1.5-3 s of start-up): the CLI loads them for Spark work only.
    code, modules = modules_of(["status", str(spec_path)], env, tmp_path)
    assert code == 0 and "zync_assets" in modules and "pyspark" not in modules
    document = json.loads(shown.stdout)
    assert document["lake"] == str(lake.resolve())
    (raw_pool,) = document["raw_pools"]
    assert (raw_pool["pool"], raw_pool["exists"], raw_pool["dead_letters"]) == (
        "StatusRaw",
        True,
        1,
    )
    assert raw_pool["partitions"] == [
        {"topic": topic, "partition": 0, "end": 5, "cursor": 4, "lag": 1}
    ]
    (staging_pool,) = document["staging_pools"]
    assert staging_pool["outputs"] == [
        {"topic": f"{topic}_out", "staged": 3, "sent": 0, "unsent": 3}
    ]

    # In an 80-column terminal the tables wrap their cells instead of cutting names short.
    narrow = run_zync("status", "--format", "table", str(spec_path), env={**env, "COLUMNS": "80"})
    assert narrow.returncode == 0, narrow.stderr
    assert "…" not in narrow.stdout
    table_lines = [line for line in narrow.stdout.splitlines() if line[:1] in "┏┃┡│└"]
    assert table_lines and max(len(line) for line in table_lines) <= 80
    assert f"lake   {lake.resolve()}" in narrow.stdout
    assert column_text(narrow.stdout, "topic[partition]") == f"{topic}[0]"  # whole, if folded
    assert column_text(narrow.stdout, "pool", table=2) == "StatusStaging"
    assert column_text(narrow.stdout, "table", table=4) == "status_current"
    assert [(t["table"], t["lag"]) for t in document["tables"]] == [("status_current", 0)]


def test_pending_events_come_from_the_last_pass_and_say_so_once_new_events_came_in(
    spark, stack: Stack, registry, topic: str, tmp_path: Path, lake: Path
) -> None:
    """A pass records the events it held back; status reads that record with no Spark job,
    marked as the last pass's once an event came in after it; a recount counts again."""
    from zync_assets.etl.report import pending_view
    from zync_assets.etl.run import run_etl
    from zync_assets.ingest.ingest import ingest
    from zync_assets.specs.model import load_spec

    left, right = f"{topic}_l", f"{topic}_r"
    spec_path = tmp_path / "pending.yaml"
    spec_path.write_text(
        f"""
inputs:
  - {{topic: {left}, pool: PendRaw}}
  - {{topic: {right}, pool: PendRaw}}
outputs:
  - {{topic: {topic}_out, pool: PendStaging}}
transforms:
  - type: denorm
    left: {left}
    right: {right}
    join-on: left.after:id::bigint = right.after:id::bigint
    out: {topic}_out
    sql: "left.key AS key, named_struct('id', left.after:id::bigint) AS value"
"""
    )
    spec = load_spec(spec_path)

    def envelope(i: int) -> dict:
        return {"op": "c", "after": {"id": i}}

    produce_json(stack, left, [({"id": i}, envelope(i)) for i in (1, 2)])
    produce_json(stack, right, [({"id": 1}, envelope(1))])
    ingest(spark, "PendRaw", [left, right], stack.kafka, registry)
    run_etl(spark, spec)
    started: list[bool] = []

    def starter():
        started.append(True)
        return spark

    recorded = staging_status(starter, stack.kafka, spec, "PendStaging")
    assert not started, "status started Spark though the last pass recorded its figures"
    (waiting,) = pending_view(spark, spec, "PendStaging").events  # left 2: no right yet
    assert (recorded.pending, recorded.oldest_pending) == (1, waiting.timestamp)
    assert (recorded.open_transactions, recorded.expired) == (0, 0)
    assert not recorded.as_of_last_pass  # nothing came in since: the figures are current

    produce_json(stack, right, [({"id": 2}, envelope(2))])
    ingest(spark, "PendRaw", [left, right], stack.kafka, registry)  # no ETL pass yet
    as_of_pass = staging_status(starter, stack.kafka, spec, "PendStaging")
    assert not started, "status started Spark without --recount"
    assert (as_of_pass.pending, as_of_pass.as_of_last_pass) == (1, True)
    assert as_of_pass.lag == recorded.lag + 1  # the event that came in since
    counted = staging_status(starter, stack.kafka, spec, "PendStaging", recount=True)
    assert started, "a recount trusted a record older than the raw pool"
    assert (counted.pending, counted.oldest_pending) == (0, None)  # left 2 pairs now
    assert not counted.as_of_last_pass


def test_status_names_the_lake_it_read_and_the_pools_missing_there(
    stack: Stack, topic: str, tmp_path: Path
) -> None:
    """Run where no pool exists yet: it must say so, not report a cursor of 0, and answer
    without Spark (its master here is a Connect server no one listens at)."""
    spec_path = tmp_path / "elsewhere.yaml"
    spec_path.write_text(
        f"""
inputs:
  - {{topic: {topic}, pool: NeverIngested}}
outputs:
  - {{topic: {topic}_out, pool: NeverStaged}}
transforms:
  - {{type: stateless, in: {topic}, out: {topic}_out, sql: "in.key AS key, in.value AS value"}}
tables:
  - {{name: never_applied, source: {topic}_out, keys: [id]}}
"""
    )
    produce_json(stack, topic, [({"id": 1}, {"id": 1}), ({"id": 2}, {"id": 2})])
    empty_lake = tmp_path / "empty-lake"
    env = stack.env(ZYNC_LAKE=str(empty_lake), ZYNC_SPARK_MASTER=NO_SPARK, COLUMNS="200")
    shown = run_zync("status", str(spec_path), "--format", "table", env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"lake   {empty_lake.resolve()}" in shown.stdout
    assert f"specs  {spec_path.resolve()}" in shown.stdout
    assert "NeverIngested (missing)" in shown.stdout
    assert "NeverStaged (missing)" in shown.stdout
    assert "MISSING: no pool NeverIngested, NeverStaged in" in " ".join(shown.stdout.split())

    document = json.loads(run_zync("status", str(spec_path), env=env, cwd=tmp_path).stdout)
    (raw_pool,) = document["raw_pools"]
    assert raw_pool["exists"] is False
    assert raw_pool["partitions"] == [
        {"topic": topic, "partition": 0, "end": 2, "cursor": None, "lag": 2}
    ]
    assert [s["exists"] for s in document["staging_pools"]] == [False]
    assert [(t["table"], t["version"]) for t in document["tables"]] == [("never_applied", None)]
    assert "never_applied (not yet)" in shown.stdout


def test_status_without_specs_says_which_folder_it_searched(tmp_path: Path) -> None:
    shown = run_zync("status", cwd=tmp_path, env={**os.environ, "ZYNC_SPECS": str(tmp_path)})
    assert shown.returncode == 1
    assert shown.stderr.strip() == (
        f"zync: error: no spec files in {tmp_path.resolve()}: name them, or set ZYNC_SPECS"
    )


def test_status_outside_a_project_says_so_before_asking_any_service(tmp_path: Path) -> None:
    """No SPECS, no ./etl_specs, no ZYNC_SPECS: one line at once, not a Kafka time-out
    for the demo's specs (nothing listens at the bootstrap address given)."""
    env = {k: v for k, v in os.environ.items() if k != "ZYNC_SPECS"}
    env["ZYNC_KAFKA_BOOTSTRAP"] = f"127.0.0.1:{free_port()}"
    shown = run_zync("status", cwd=tmp_path, env=env)
    assert shown.returncode == 1
    assert shown.stderr.strip().splitlines() == [
        f"zync: error: no zync project in {tmp_path}: no SPECS named, no ./etl_specs and "
        "ZYNC_SPECS is not set; run this in your project's folder, name its spec files, or "
        "set ZYNC_SPECS"
    ]


TRACE = """org.apache.kafka.connect.errors.ConnectException: Exiting WorkerSinkTask due to unrecoverable exception.
\tat org.apache.kafka.connect.runtime.WorkerSinkTask.deliverMessages(WorkerSinkTask.java:636)
Caused by: org.apache.kafka.connect.errors.ConnectException: JDBC sink connector failure
\tat io.debezium.connector.jdbc.JdbcSinkConnectorTask.put(JdbcSinkConnectorTask.java:121)
Caused by: org.apache.kafka.connect.errors.ConnectException: Failed to resolve column type for schema: STRUCT (x)
\tat io.debezium.connector.jdbc.dialect.GeneralDatabaseDialect.getSchemaType(GeneralDatabaseDialect.java:1)
"""


def test_a_sinks_problems_are_one_line_each_with_connects_reason_and_what_to_do() -> None:
    url = "http://127.0.0.1:8083"
    failed = SinkStatus(
        "k", "RUNNING", (SinkTask(0, "FAILED", task_reason(TRACE)),), ("t",), 3, "dl", 0
    )
    (line,) = failed.problems(url)
    assert line == (
        "sink k: task 0 FAILED: org.apache.kafka.connect.errors.ConnectException: Exiting "
        "WorkerSinkTask due to unrecoverable exception. (caused by org.apache.kafka.connect."
        "errors.ConnectException: Failed to resolve column type for schema: STRUCT (x)); fix "
        f"the cause, then restart it: curl -X POST {url}/connectors/k/tasks/0/restart"
    )
    fine = SinkStatus("k", "RUNNING", (SinkTask(0, "RUNNING", None),), ("t",), 0, "dl", 0)
    assert fine.problems(url) == []
    assert dataclasses.replace(fine, dead_letters=2).problems(url) == [
        "sink k: 2 records it could not take are in dl (their headers __connect.errors.* say why)"
    ]
    assert dataclasses.replace(fine, state="PAUSED").problems(url) == [
        "sink k: the connector is PAUSED, not RUNNING"
    ]
    assert SinkStatus("gone", MISSING, (), (), 0, None, 0).problems(url) == [
        f"sink gone: Kafka Connect at {url} has no such connector"
    ]
    assert task_reason(None) is None and task_reason("one line") == "one line"


def test_a_sinks_stall_and_its_newest_dead_letter_are_one_line_each() -> None:
    url = "http://127.0.0.1:8083"
    running = SinkStatus(
        "k", "RUNNING", (SinkTask(0, "RUNNING", None),), ("t",), 4027, "dl", 0,
        oldest_waiting=Waiting("t", 0, 311, 299.0), stall_after_s=300.0,
    )  # fmt: skip
    assert not running.stalled and running.problems(url) == []  # within the bound
    stalled = dataclasses.replace(running, oldest_waiting=Waiting("t", 0, 311, 312.4))
    assert stalled.stalled
    assert stalled.problems(url) == [
        "sink k has not committed for 5 min 12 s with 4,027 records waiting (the oldest: t "
        "partition 0 offset 311) while its tasks read RUNNING, longer than the 5 min 0 s "
        "bound: it has stalled (a thread waiting on a service?); restart its task: curl -X "
        f"POST {url}/connectors/k/tasks/0/restart (`zync run --follow` does so itself)"
    ]
    failed = dataclasses.replace(stalled, tasks=(SinkTask(0, "FAILED", "why"),))
    assert not failed.stalled  # a FAILED task says so itself
    letter = DeadLetter("t", "0", "41", "the warehouse refused the record: ERROR: no")
    lettered = dataclasses.replace(running, dead_letters=2, newest_dead_letter=letter)
    assert lettered.problems(url) == [
        "sink k: 2 records it could not take are in dl; the newest, t partition 0 offset 41: "
        "the warehouse refused the record: ERROR: no; fix the cause, then produce the record "
        "again from dl to t (the sink upserts: a replay is safe)"
    ]


def test_the_sink_stall_bound_is_a_duration_above_a_second() -> None:
    assert sink_settings({}).stall_after_s == 300.0
    assert sink_settings({"ZYNC_SINK_STALL_AFTER": "90s"}).stall_after_s == 90.0
    with pytest.raises(ZyncError, match="ZYNC_SINK_STALL_AFTER"):
        sink_settings({"ZYNC_SINK_STALL_AFTER": "soon"})
    with pytest.raises(ZyncError, match="ZYNC_SINK_STALL_AFTER is '0s': give at least 1s"):
        sink_settings({"ZYNC_SINK_STALL_AFTER": "0s"})


def test_status_names_a_sink_whose_connect_does_not_answer_and_still_reports_the_pools(
    stack: Stack, tmp_path: Path
) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("inputs:\n  - {topic: nothing_here, pool: P}\n")
    url = f"http://127.0.0.1:{free_port()}"
    done = run_zync("status", str(spec), "--sink", "k", "--format", "json",
                    env=stack.env(ZYNC_CONNECT_URL=url))  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["raw_pools"][0]["pool"] == "P"
    (line,) = [f["message"] for f in report["failing"] if f["what"] == "sink"]
    assert line.startswith(f"sinks k: Kafka Connect does not answer at {url} ("), line
    quiet = run_zync("status", str(spec), "--format", "json", env=stack.env(ZYNC_CONNECT_URL=url))
    assert json.loads(quiet.stdout)["sinks"] == []  # none asked for, none there: nothing said
