"""What a bad record costs the warehouse, and what `zync status` says of it.

A record the sink's converter cannot read costs that record: the sink `zync stack
connector sink` registers sends it to its dead-letter topic, with headers that say why,
and every other record and table keeps arriving. A record Debezium's JDBC sink cannot
*write* (a column type it cannot make) is not reported to Connect's dead-letter handling
(3.6's `JdbcSinkConnectorTask.put` keeps the error and fails the task on its next call),
so it stops the task: status says so in one line, with the sink's reason and what to do.
(zync's own outputs avoid the classic case: a mirror sends a json column as Debezium's
Json, test_user_schema_chain.py.)"""

from __future__ import annotations

import json
import time
from pathlib import Path

import psycopg
import pytest
import yaml

from zync_assets.kafka.connect_api import ConnectApi
from zync_assets.stack import postgres
from zync_assets.stack.register import sink_dead_letters
from zync_assets.stack.services import CdcPorts
from zync_assets_tests.conftest import Stack, produce_bytes, produce_json, read_topic, run_zync

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ERROR_MESSAGE = "__connect.errors.exception.message"


def warehouse_rows(ports: CdcPorts, table: str) -> list[tuple]:
    with psycopg.connect(postgres.dsn(ports.warehouse_db, postgres.WAREHOUSE.database)) as conn:
        try:
            return [tuple(r) for r in conn.execute(f'SELECT id, name FROM "{table}" ORDER BY id')]
        except psycopg.errors.UndefinedTable:
            return []


def test_a_record_the_sink_refuses_goes_to_its_dead_letters_and_the_rest_keep_flowing(
    stack: Stack, cdc_ports: CdcPorts, topic: str, tmp_path: Path
) -> None:
    good, bad, sink = f"{topic}_good", f"{topic}_bad", f"refusing-{topic[-6:]}"
    registry_port = stack.registry_settings.url.split(":")[2].split("/")[0]
    done = run_zync(
        "stack", "connector", "sink", sink, "--topics", f"{bad},{good}",
        "--warehouse-db-port", str(cdc_ports.warehouse_db), "--connect-port",
        str(cdc_ports.connect), "--registry-port", registry_port,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # Framed as Avro, but with a schema id the registry does not have: no converter reads it.
    garbage = b"\x00\x7f\xff\xff\xf0not avro"
    produce_bytes(stack, bad, [(garbage, garbage)])
    produce_json(stack, good, [({"id": 1}, {"id": 1, "name": "first"})])
    produce_bytes(stack, bad, [(garbage, garbage)])
    produce_json(stack, good, [({"id": 2}, {"id": 2, "name": "after the refusals"})])

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(warehouse_rows(cdc_ports, good)) < 2:
        time.sleep(1)
    state, tasks = ConnectApi(f"http://127.0.0.1:{cdc_ports.connect}").state(sink)
    assert warehouse_rows(cdc_ports, good) == [(1, "first"), (2, "after the refusals")], tasks
    assert (state, tasks) == ("RUNNING", ["RUNNING"])

    letters = read_topic(stack, sink_dead_letters(sink), decode=False)
    assert [r.headers["__connect.errors.topic"].decode() for r in letters] == [bad, bad]
    assert [(r.key, r.value) for r in letters] == [(garbage, garbage)] * 2  # the bytes, kept
    assert all(r.headers[ERROR_MESSAGE] for r in letters)  # the converter's reason

    # `zync status` names the sink's dead letters; its lag is 0 once it committed.
    report = sink_report(stack, cdc_ports, tmp_path, good, sink)
    (status,) = report["sinks"]
    assert (status["sink"], status["state"], status["dead_letters"]) == (sink, "RUNNING", 2)
    assert status["dead_letter_topic"] == sink_dead_letters(sink)
    (line,) = [f["message"] for f in report["failing"] if f["what"] == "sink"]
    assert line.startswith(f"sink {sink}: 2 records it could not take are in"), line


def test_status_says_in_one_line_when_a_sink_task_has_stopped_and_why(
    stack: Stack, cdc_ports: CdcPorts, topic: str, tmp_path: Path
) -> None:
    sink = f"stopping-{topic[-6:]}"
    connect = ConnectApi(f"http://127.0.0.1:{cdc_ports.connect}")
    registry_port = stack.registry_settings.url.split(":")[2].split("/")[0]
    done = run_zync(
        "stack", "connector", "sink", sink, "--topics", topic,
        "--warehouse-db-port", str(cdc_ports.warehouse_db), "--connect-port",
        str(cdc_ports.connect), "--registry-port", registry_port,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # A nested record: the sink has no column type for it ("Failed to resolve column type").
    produce_json(stack, topic, [({"id": 1}, {"id": 1, "doc": {"a": 1}})])

    def task_states() -> list[str]:
        return [t.split(":")[0] for t in connect.state(sink)[1]]

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and task_states() != ["FAILED"]:
        time.sleep(1)
    assert task_states() == ["FAILED"]  # the fault landed

    report = sink_report(stack, cdc_ports, tmp_path, topic, sink)
    (status,) = report["sinks"]
    assert [t["state"] for t in status["tasks"]] == ["FAILED"]
    assert status["lag"] == 1  # the record it stopped on
    (line,) = [f["message"] for f in report["failing"] if f["what"] == "sink"]
    assert line.startswith(f"sink {sink}: task 0 FAILED: "), line
    assert "Failed to resolve column type" in line and "\n" not in line, line
    assert f"/connectors/{sink}/tasks/0/restart" in line, line
    table = run_zync("status", str(spec_of(tmp_path, topic)), "--sink", sink, "--format", "table",
                     env=stack.env(ZYNC_CONNECT_URL=f"http://127.0.0.1:{cdc_ports.connect}"))  # fmt: skip
    assert f"FAILING: sink {sink}: task 0 FAILED" in table.stdout, table.stdout + table.stderr


def spec_of(folder: Path, topic: str) -> Path:
    path = folder / "sinks.yaml"
    path.write_text(yaml.safe_dump({"inputs": [{"topic": topic, "pool": "SinkRaw"}]}))
    return path


def sink_report(stack: Stack, ports: CdcPorts, folder: Path, topic: str, sink: str) -> dict:
    done = run_zync(
        "status", str(spec_of(folder, topic)), "--sink", sink, "--format", "json",
        env=stack.env(ZYNC_CONNECT_URL=f"http://127.0.0.1:{ports.connect}"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
