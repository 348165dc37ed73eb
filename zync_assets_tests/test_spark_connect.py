"""Every stage through the stack's Spark Connect server (`ZYNC_SPARK_MASTER=sc://…`):
the real `zync` commands in subprocesses, the server started from PySpark's distribution
by the stack, exactly as `zync stack up` runs it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from zync_assets.kafka.registry import Registry
from zync_assets.lake.pools import pool_exists
from zync_assets.stack.spark_server import launch_spark_server, spark_service, spark_url
from zync_assets_tests.conftest import (
    DEMO_TABLES,
    ZYNC,
    Stack,
    assert_each_offset_once,
    free_port,
    pool_offsets,
    produce_bytes,
    produce_json,
    produce_many,
    read_topic,
    rebuild_table,
    run_zync,
    zync_ok,
)
from zync_assets_tests.support.kafka_log import assert_sent_together
from zync_assets_tests.support.kills import writing

pytestmark = pytest.mark.integration

INVOICES = Path(__file__).parent.parent / "etl_specs" / "invoices.yaml"


TABLES = """
tables:
  - {name: statuses, source: InvoiceStatus, keys: [ID], sequence-by: "source:lsn::bigint"}
  - name: status_history
    source: InvoiceStatus
    keys: [ID]
    sequence-by: source:lsn::bigint
    stored-as: scd2
"""


def test_the_invoice_demo_goes_through_the_connect_server(
    stack: Stack, spark_server: str, lake: Path, tmp_path: Path
) -> None:
    """Ingest (zync's Avro decoder on the server), ETL, to-kafka (librdkafka: no local
    JVM), lake tables, status, query and pool maintenance, batch after batch, with zync's
    exact result in the output topic."""
    from zync_assets.demo.invoices import produce_batch, reset

    spec = tmp_path / "invoices.yaml"
    spec.write_text(INVOICES.read_text() + TABLES)
    reset(stack.kafka)
    env = stack.env(ZYNC_LAKE=str(lake), ZYNC_SPARK_MASTER=spark_server)
    registry = Registry(stack.registry_settings)
    produce_batch(1, stack.kafka, registry)
    ran = zync_ok("run", str(spec), env=env)
    assert "pool Raw run 1: 4 rows" in ran and "wrote 2 to NewInvoices" in ran, ran
    assert demo_table(stack) == DEMO_TABLES[1]
    # Then the other three batches in one pass: each batch's own step is test_etl.py's
    # subject (locally); here, that a later pass picks up where the first left off. The
    # stage commands through the server: test_quiet.py (etl, to-kafka) and the tests
    # below (from-kafka).
    for batch in range(2, 5):
        produce_batch(batch, stack.kafka, registry)
    zync_ok("run", str(spec), env=env)
    assert demo_table(stack) == DEMO_TABLES[4]
    zync_ok("run", str(spec), env=env)  # nothing new: nothing sent again
    assert len(read_topic(stack, "NewInvoices")) == 8
    status = json.loads(zync_ok("status", str(spec), env=env))  # piped: JSON
    raw_lags = {
        (p["topic"], p["partition"]): p["lag"] for p in status["raw_pools"][0]["partitions"]
    }
    assert raw_lags[("InvoiceStatus", 0)] == 0
    (staging,) = status["staging_pools"]
    assert staging["outputs"] == [{"topic": "NewInvoices", "staged": 8, "sent": 8, "unsent": 0}]
    done = zync_ok("query", "SELECT count(*) AS n FROM Staging WHERE kind = 'done'", env=env)
    assert done.strip() == '{"n": 12}'
    statuses = zync_ok("query", "SELECT ID, status FROM statuses ORDER BY ID", env=env)
    assert statuses.splitlines() == [
        '{"ID": 32, "status": "closed"}', '{"ID": 77, "status": "paid"}',
        '{"ID": 80, "status": "paid"}', '{"ID": 192, "status": "collections"}',
    ]  # fmt: skip
    history = zync_ok(
        "query", "SELECT count(*) AS n, count(__END_AT) AS ended FROM status_history", env=env
    )
    assert history.strip() == '{"n": 8, "ended": 4}'  # pending, then each one's new status
    maintained = zync_ok("pool", "maintain", "Raw", "Staging", env=env)
    assert "pool Staging: compacted" in maintained and "carried" in maintained


def demo_table(stack: Stack) -> dict:
    table = rebuild_table(read_topic(stack, "NewInvoices"), "ID")
    return {k: (v["customer"], v["item"], v["invoice_status"]) for k, v in table.items()}


def test_a_shaper_and_dead_letters_through_the_connect_server(
    spark, stack: Stack, spark_server: str, topic: str, lake: Path, tmp_path: Path
) -> None:
    produce_json(stack, topic, [({"id": i}, {"op": "c", "after": {"id": i}}) for i in range(3)])
    produce_bytes(stack, topic, [(None, b"not avro")])
    shaper = tmp_path / "after.sql"
    shaper.write_text("key, value:after AS value\n")
    env = stack.env(ZYNC_LAKE=str(lake), ZYNC_SPARK_MASTER=spark_server)
    out = zync_ok("from-kafka", "-t", topic, "-p", "Shaped", "--shaper", str(shaper), "--once",
                  env=env)  # fmt: skip
    assert "3 rows, 1 dead letters" in out
    rows = spark.read.format("delta").load(str(lake / "Shaped")).where("dead_letter IS NULL")
    assert sorted(r[0] for r in rows.selectExpr("cast(value as string)").collect()) == [
        f'{{"id":{i}}}' for i in range(3)
    ]
    assert pool_offsets(spark, lake, "Shaped") == [0, 1, 2, 3]
    exploding = tmp_path / "explode.sql"
    exploding.write_text("key, explode(array(value, value)) AS value\n")
    refused = run_zync("from-kafka", "-t", topic, "-p", "Other", "--shaper", str(exploding),
                       "--once", env=env, timeout=300)  # fmt: skip
    assert refused.returncode == 1
    assert "changes the number of rows" in refused.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("args", [("status", "{spec}"), ("query", "SELECT 1")])
def test_a_server_that_is_down_is_one_line_naming_its_url(
    spark, stack: Stack, lake: Path, tmp_path: Path, args: tuple[str, ...]
) -> None:
    # status needs Spark only for a pool that holds events: give it one.
    spark.range(1).write.format("delta").save(str(lake / "DownRaw"))
    spec = tmp_path / "down.yaml"
    spec.write_text("inputs:\n  - {topic: down, pool: DownRaw}\noutputs:\n  - {topic: down_out, "
                    "pool: DownStaging}\ntransforms:\n  - {type: stateless, in: down, out: "
                    "down_out, sql: \"in.key AS key\"}\n")  # fmt: skip
    args = tuple(a.format(spec=spec) for a in args)
    url = f"sc://127.0.0.1:{free_port()}"
    started = time.monotonic()
    done = run_zync(*args, env=stack.env(ZYNC_LAKE=str(lake), ZYNC_SPARK_MASTER=url))
    assert time.monotonic() - started < 20
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"zync: error: no Spark Connect server answers at {url}: start it with "
        "`zync stack up`, or unset ZYNC_SPARK_MASTER to run Spark locally"
    ]


def test_a_lost_server_is_waited_for_once_and_then_not_again() -> None:
    """The retries of a session's calls: the first call that loses the server waits
    through all of them (a restart goes unnoticed); once one call has spent them, a later
    failing call (a clean-up in a `finally`, PySpark's own at exit) is not retried, so the
    error comes after one wait, not one per call."""
    from pyspark.sql.connect.client.retries import RetryPolicyState

    from zync_assets.spark.connect import _RETRIES, _retries_until_lost

    policy = _retries_until_lost()
    first: RetryPolicyState = policy.to_state()
    waits = [first.next_attempt() for _ in range(_RETRIES)]
    assert all(w is not None and w > 0 for w in waits), waits
    assert first.next_attempt() is None  # spent: the server is lost
    assert policy.to_state().next_attempt() is None  # the next call fails at once
    fresh: RetryPolicyState = _retries_until_lost().to_state()  # another session's calls
    assert fresh.next_attempt() is not None


@pytest.mark.slow
def test_a_server_killed_mid_ingest_leaves_no_half_commit(
    spark, stack: Stack, topic: str, lake: Path, tmp_path: Path
) -> None:
    """kill -9 of the server while an ingest writes: the command fails with the one-line
    error, the pool holds no part of that commit, and a run by the error's second way out
    (ZYNC_SPARK_MASTER unset: local Spark) ingests every message exactly once."""
    count = 50_000
    produce_many(stack, topic, count)
    state, port = tmp_path / ".zync", free_port()
    url = spark_url(port)
    launch_spark_server(state, port)()
    env = stack.env(ZYNC_LAKE=str(lake), ZYNC_SPARK_MASTER=url)
    command = [ZYNC, "from-kafka", "-t", topic, "-p", "Killed", "--once"]
    ingest = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    mid_write, deadline = writing(lake / "Killed"), time.monotonic() + 300
    while not mid_write("") and ingest.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)  # until the server has written data files and not committed them
    running = spark_service(state).running()
    assert running is not None and ingest.poll() is None, "ingest finished before the kill"
    assert mid_write(""), "the server wrote no data file before the deadline"
    os.killpg(running.pid, signal.SIGKILL)
    _, stderr = ingest.communicate(timeout=120)
    assert ingest.returncode == 1, stderr
    assert stderr.strip().splitlines()[-1] == (
        f"zync: error: no Spark Connect server answers at {url}: start it with "
        "`zync stack up`, or unset ZYNC_SPARK_MASTER to run Spark locally"
    )
    assert not pool_exists(str(lake / "Killed")) or pool_offsets(spark, lake, "Killed") == []
    spark_service(state).stop()  # its PID file, after the kill
    local = {k: v for k, v in env.items() if k != "ZYNC_SPARK_MASTER"}
    zync_ok("from-kafka", "-t", topic, "-p", "Killed", "--once", env=local)
    assert_each_offset_once(spark, lake, "Killed", count)


def test_a_pools_topics_go_together_through_the_connect_server(
    stack: Stack, spark_server: str, lake: Path, tmp_path: Path
) -> None:
    """A `txn` rule with two outs, through librdkafka's sender: `zync run` sends both
    topics; `to-kafka --topic` on that pool syncs both (nothing new: nothing sent)."""
    import uuid

    from zync_assets.kafka.clients import ensure_topic

    p = f"cx{uuid.uuid4().hex[:6]}"
    ensure_topic(stack.kafka, f"{p}.order", 1)
    spec = tmp_path / "two.yaml"
    spec.write_text(
        f"inputs:\n  - {{topic: {p}.order, pool: {p}Raw}}\n"
        f"outputs:\n  - {{topic: {p}_a, pool: {p}Staging}}\n  - {{topic: {p}_b, pool: {p}Staging}}\n"
        f"transforms:\n  - {{type: txn, inputs: [{p}.order], group-by: 'value:txn::bigint', "
        f"complete-when: 'bool_or(value:done::boolean)', out: [{p}_a, {p}_b], "
        'sql: \'SELECT txn, topic, NULL AS key, named_struct("txn", txn, "n", count(*)) AS '
        f'value FROM events CROSS JOIN (SELECT explode(array("{p}_a", "{p}_b")) AS topic) '
        "GROUP BY txn, topic'}\n"
    )
    produce_json(stack, f"{p}.order", [(None, {"txn": 1, "done": False}),
                                       (None, {"txn": 1, "done": True}),
                                       (None, {"txn": 2, "done": True})])  # fmt: skip
    env = stack.env(ZYNC_LAKE=str(lake), ZYNC_SPARK_MASTER=spark_server)
    zync_ok("run", str(spec), env=env)
    for topic in (f"{p}_a", f"{p}_b"):
        values = sorted((r.value["txn"], r.value["n"]) for r in read_topic(stack, topic))
        assert values == [(1, 2), (2, 1)], topic
    assert_sent_together(stack, [f"{p}_a", f"{p}_b"])
    again = zync_ok("to-kafka", "--pool", f"{p}Staging", "--topic", f"{p}_a", env=env)
    assert f"{p}_a: up to date at staging offset 2" in again
    assert f"{p}_b: up to date at staging offset 2" in again
