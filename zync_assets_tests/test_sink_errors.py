"""What a bad record costs the warehouse, and what `zync status` says of it.

A record the sink's converter cannot read, or the warehouse refuses (a CHECK constraint, a
nested record no column type fits), costs that record: the sink `zync stack connector
sink` registers (zync's IsolatingJdbcSinkConnector around Debezium's JDBC sink,
jvm/connect) sends it to its dead-letter topic, with headers that say which record and
why, and every other record of that table and every other table keeps arriving. `zync
status` names the newest one in one line, and Dagster's `sink_reads_it` check on each
output topic the sink reads warns with that line. A task that fails anyway (here: a
warehouse database that does not exist) is one line with the sink's reason and the call
that restarts it, and an ERROR on the check."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import psycopg
import pytest
import yaml
from dagster import AssetCheckKey, AssetCheckSeverity, AssetKey, DagsterInstance

from zync_assets.core.config import ZyncConfig
from zync_assets.core.errors import ZyncError
from zync_assets.core.settings import SinkSettings
from zync_assets.kafka.connect_api import ConnectApi
from zync_assets.orchestration.definitions import build_zync_definitions
from zync_assets.orchestration.sinks import SINK_CHECK
from zync_assets.specs.model import load_spec
from zync_assets.stack import postgres
from zync_assets.stack.register import StackAddresses, register_sink, sink_dead_letters
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
    # Dagster: a warning on the output topic whose sink holds them, none on one it skips.
    checks = sink_checks_of(tmp_path, cdc_ports, sink, {good: True, f"{topic}_unread": False})
    assert (checks[good].passed, checks[good].severity) == (False, AssetCheckSeverity.WARN)
    assert checks[good].description == line
    assert checks[f"{topic}_unread"].passed
    assert checks[f"{topic}_unread"].metadata["sinks"].text == "no sink connector reads it"


def test_a_record_the_warehouse_refuses_costs_that_record_and_the_rest_keep_flowing(
    stack: Stack, cdc_ports: CdcPorts, topic: str, tmp_path: Path
) -> None:
    checked, other, sink = f"{topic}_checked", f"{topic}_other", f"refused-{topic[-6:]}"
    with psycopg.connect(postgres.dsn(cdc_ports.warehouse_db, postgres.WAREHOUSE.database)) as conn:
        conn.execute(f'CREATE TABLE "{checked}" (id bigint PRIMARY KEY, name text'
                     " CHECK (name <> 'refused'))")  # fmt: skip
    registry_port = stack.registry_settings.url.split(":")[2].split("/")[0]
    done = run_zync(
        "stack", "connector", "sink", sink, "--topics", f"{checked},{other}",
        "--warehouse-db-port", str(cdc_ports.warehouse_db), "--connect-port",
        str(cdc_ports.connect), "--registry-port", registry_port,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    produce_json(stack, checked, [
        ({"id": 1}, {"id": 1, "name": "first"}),
        ({"id": 2}, {"id": 2, "name": "refused"}),  # the CHECK constraint refuses it
        ({"id": 3}, {"id": 3, "name": "after it"}),
    ])  # fmt: skip
    produce_json(stack, other, [({"id": 1}, {"id": 1, "name": "elsewhere"})])
    # A nested record: no column type fits it ("Failed to resolve column type").
    produce_json(stack, other, [({"id": 2}, {"id": 2, "name": "nested", "doc": {"a": 1}})])
    produce_json(stack, other, [({"id": 3}, {"id": 3, "name": "after the nested one"})])

    want = {checked: [(1, "first"), (3, "after it")],
            other: [(1, "elsewhere"), (3, "after the nested one")]}  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and any(
        warehouse_rows(cdc_ports, t) != rows for t, rows in want.items()
    ):
        time.sleep(1)
    state, tasks = ConnectApi(f"http://127.0.0.1:{cdc_ports.connect}").state(sink)
    assert {t: warehouse_rows(cdc_ports, t) for t in want} == want, tasks
    assert (state, tasks) == ("RUNNING", ["RUNNING"])

    letters = read_topic(stack, sink_dead_letters(sink), decode=False)
    where = [
        (r.headers["__connect.errors.topic"].decode(), r.headers["__connect.errors.offset"].decode())
        for r in letters
    ]  # fmt: skip
    assert sorted(where) == sorted([(checked, "1"), (other, "1")])
    sent = {t: read_topic(stack, t, decode=False)[1] for t in (checked, other)}
    for letter, (source, _) in zip(letters, where, strict=True):  # the record's own bytes
        assert (letter.key, letter.value) == (sent[source].key, sent[source].value)
    reasons = {
        t: letter.headers[ERROR_MESSAGE].decode()
        for letter, (t, _) in zip(letters, where, strict=True)
    }
    assert "violates check constraint" in reasons[checked], reasons
    assert reasons[other].startswith("the warehouse refused the record: "), reasons

    # `zync status` names the newest dead letter: its topic, offset and reason.
    report = sink_report(stack, cdc_ports, tmp_path, checked, sink)
    (status,) = report["sinks"]
    assert (status["sink"], status["state"], status["dead_letters"]) == (sink, "RUNNING", 2)
    newest = letters[-1].headers
    (line,) = [f["message"] for f in report["failing"] if f["what"] == "sink"]
    assert line.startswith(
        f"sink {sink}: 2 records it could not take are in {sink_dead_letters(sink)}; the newest, "
        f"{newest['__connect.errors.topic'].decode()} partition 0 offset 1: the warehouse refused"
    ), line
    assert "\n" not in line and "produce the record again" in line, line
    # Dagster: a warning on an output topic the sink reads.
    checks = sink_checks_of(tmp_path, cdc_ports, sink, {checked: True})
    assert (checks[checked].passed, checks[checked].severity) == (False, AssetCheckSeverity.WARN)
    assert checks[checked].description == line


def test_status_says_in_one_line_when_a_sink_task_has_stopped_and_why(
    stack: Stack, cdc_ports: CdcPorts, topic: str, tmp_path: Path
) -> None:
    sink = f"stopping-{topic[-6:]}"
    connect = ConnectApi(f"http://127.0.0.1:{cdc_ports.connect}")
    registry_port = stack.registry_settings.url.split(":")[2].split("/")[0]
    at = StackAddresses(
        source_port=cdc_ports.source_db, warehouse_port=cdc_ports.warehouse_db,
        connect_url=connect.url,
        registry_v2=f"http://127.0.0.1:{registry_port}/apis/registry/v2",
    )  # fmt: skip
    # A warehouse database that does not exist: the task cannot start its writer (not an
    # outage, which it would wait out), so it fails, and every table it serves stops.
    with pytest.raises(ZyncError, match="FAILED"):
        register_sink(at, sink, [topic], "avro", database="no_such_warehouse")
    produce_json(stack, topic, [({"id": 1}, {"id": 1, "name": "waits"})])

    def task_states() -> list[str]:
        return [t.split(":")[0] for t in connect.state(sink)[1]]

    assert task_states() == ["FAILED"]  # the fault landed

    report = sink_report(stack, cdc_ports, tmp_path, topic, sink)
    (status,) = report["sinks"]
    assert [t["state"] for t in status["tasks"]] == ["FAILED"]
    assert status["lag"] == 1  # the record it cannot take
    (line,) = [f["message"] for f in report["failing"] if f["what"] == "sink"]
    assert line.startswith(f"sink {sink}: task 0 FAILED: "), line
    assert "no_such_warehouse" in line and "\n" not in line, line
    assert f"/connectors/{sink}/tasks/0/restart" in line, line
    table = run_zync("status", str(spec_of(tmp_path, topic)), "--sink", sink, "--format", "table",
                     env=stack.env(ZYNC_CONNECT_URL=f"http://127.0.0.1:{cdc_ports.connect}"))  # fmt: skip
    assert f"FAILING: sink {sink}: task 0 FAILED" in table.stdout, table.stdout + table.stderr
    # Dagster: the output topic's check fails, an ERROR, with the same line.
    check = sink_checks_of(tmp_path, cdc_ports, sink, {topic: True})[topic]
    assert (check.passed, check.severity) == (False, AssetCheckSeverity.ERROR)
    assert check.description == line


def sink_checks_of(folder: Path, ports: CdcPorts, sink: str, outputs: dict[str, bool]) -> dict:
    """Dagster's `sink_reads_it` evaluations of a spec whose outputs are `outputs`' topics
    (the value: whether the sink reads it), run as the UI's "Execute check" runs them."""
    spec = folder / "outputs.yaml"
    spec.write_text(yaml.safe_dump({
        "inputs": [{"topic": f"{sink}-in", "pool": "CheckRaw"}],
        "outputs": [{"topic": t, "pool": "CheckStaging"} for t in outputs],
        "transforms": [
            {"type": "stateless", "in": f"{sink}-in", "out": t, "sql": "key AS key, value AS value"}
            for t in outputs
        ],
    }))  # fmt: skip
    sinks = SinkSettings(f"http://127.0.0.1:{ports.connect}", (sink,))
    config = dataclasses.replace(ZyncConfig.from_env(), sinks=sinks)
    job = build_zync_definitions(
        [load_spec(spec)], config=config
    ).resolve_implicit_global_asset_job_def()
    keys = {AssetCheckKey(AssetKey(["kafka", t]), SINK_CHECK) for t in outputs}
    run = job.get_subset(asset_check_selection=keys, asset_selection=set()).execute_in_process(
        instance=DagsterInstance.ephemeral()
    )
    return {e.asset_key.path[-1]: e for e in run.get_asset_check_evaluations()}


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
