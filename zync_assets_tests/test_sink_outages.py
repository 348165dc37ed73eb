"""The warehouse never waits without a bound, and an outage never costs a record.

Once, the stack's JDBC sink stopped taking records for good: its task's thread was parked
in Apicurio's converter, on a schema registry request that never came back (no timeout in
Apicurio's HTTP client), while Connect, `zync status` and Dagster all said RUNNING. Here:
- the sink's registry requests go through a proxy that, for a while, takes them and never
  answers: with zync's converter (jvm/connect, TimedAvroConverter) each request times out
  and is tried again, `zync status` names the stall while it lasts, and the warehouse
  catches up by itself once the proxy forwards again;
- the same with Apicurio's own converter: the sink stays stuck after the proxy heals (the
  fault, seen), and the watch of `zync run --follow` (SinkWatch) restarts its task;
- the registry paused (SIGSTOP) and resumed while the sink reads: the same as the first;
- the warehouse stopped and started while records flow: each arrives once, none is a
  dead letter (a lost connection is retried, never taken for a refused record).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from zync_assets.core.settings import SinkSettings
from zync_assets.kafka.connect_api import ConnectApi
from zync_assets.pipeline.sink_watch import SinkWatch
from zync_assets.stack import postgres
from zync_assets.stack.connectors import connector_config
from zync_assets.stack.register import StackAddresses, register_sink, sink_dead_letters
from zync_assets.stack.registry import registry_service
from zync_assets.stack.services import CdcPorts
from zync_assets_tests.conftest import Stack, produce_bytes, produce_json, read_topic, run_zync
from zync_assets_tests.support.tcp_proxy import BlackHoleProxy
from zync_assets_tests.test_sink_errors import warehouse_rows

pytestmark = [pytest.mark.integration, pytest.mark.slow]

STALL_AFTER = "10s"  # the stall bound these tests give status (the default is 5 min)


def registry_port(stack: Stack) -> int:
    return int(stack.registry_settings.url.split(":")[2].split("/")[0])


def addresses(cdc_ports: CdcPorts, registry: int) -> StackAddresses:
    return StackAddresses(
        source_port=cdc_ports.source_db, warehouse_port=cdc_ports.warehouse_db,
        connect_url=f"http://127.0.0.1:{cdc_ports.connect}",
        registry_v2=f"http://127.0.0.1:{registry}/apis/registry/v2",
    )  # fmt: skip


def wait_for_rows(ports: CdcPorts, table: str, want: list[tuple], timeout: float) -> list[tuple]:
    deadline = time.monotonic() + timeout
    got = warehouse_rows(ports, table)
    while got != want and time.monotonic() < deadline:
        time.sleep(1)
        got = warehouse_rows(ports, table)
    return got


def status_lines(stack: Stack, ports: CdcPorts, folder: Path, topic: str, sink: str) -> list[str]:
    spec = folder / "stall.yaml"
    spec.write_text(json.dumps({"inputs": [{"topic": topic, "pool": "StallRaw"}]}))
    done = run_zync(
        "status", str(spec), "--sink", sink, "--format", "json",
        env=stack.env(ZYNC_CONNECT_URL=f"http://127.0.0.1:{ports.connect}",
                      ZYNC_SINK_STALL_AFTER=STALL_AFTER),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [f["message"] for f in json.loads(done.stdout)["failing"] if f["what"] == "sink"]


def wait_for_stall_line(stack: Stack, ports: CdcPorts, folder: Path, topic: str, sink: str) -> str:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        stalled = [
            line for line in status_lines(stack, ports, folder, topic, sink)
            if "has not committed" in line
        ]  # fmt: skip
        if stalled:
            return stalled[0]
        time.sleep(2)
    raise AssertionError(f"status never named the stall of {sink}")


# The rows' schema again, but with `name` optional: a schema of its own (a new id) for the
# same table, which the sink writes as it is (no column to add).
OPTIONAL_NAME = {
    "type": "record", "name": "Staged", "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"], "default": None},
    ],
}  # fmt: skip


def staged_record(stack: Stack, topic: str, row: dict) -> tuple[bytes, bytes]:
    """A record of a schema the sink has not seen, encoded (and its schema registered)
    while the registry answers: sent later, the sink must ask the registry for it."""
    produce_json(stack, f"{topic}_staged", [({"id": row["id"]}, row)], value_schema=OPTIONAL_NAME)
    (record,) = read_topic(stack, f"{topic}_staged", decode=False)
    return record.key, record.value


def test_a_registry_that_takes_requests_and_never_answers_stalls_the_sink_visibly_and_briefly(
    stack: Stack, cdc_ports: CdcPorts, topic: str, tmp_path: Path
) -> None:
    proxy = BlackHoleProxy(registry_port(stack))
    sink = f"hole-{topic[-6:]}"
    try:
        register_sink(addresses(cdc_ports, proxy.port), sink, [topic], "avro")
        produce_json(stack, topic, [({"id": 1}, {"id": 1, "name": "before"})])
        assert wait_for_rows(cdc_ports, topic, [(1, "before")], 120) == [(1, "before")]
        key, value = staged_record(stack, topic, {"id": 2, "name": "during"})
        with proxy.swallowing():
            produce_bytes(stack, topic, [(key, value)])
            line = wait_for_stall_line(stack, cdc_ports, tmp_path, topic, sink)
            assert proxy.swallowed_bytes > 0  # the sink's registry request went into the hole
        assert line.startswith(f"sink {sink} has not committed for "), line
        assert "1 record waiting" in line and f"{topic} partition 0 offset 1" in line, line
        assert f"/connectors/{sink}/tasks/0/restart" in line, line
        # The proxy forwards again: the next try of the request gets its answer.
        want = [(1, "before"), (2, "during")]
        assert wait_for_rows(cdc_ports, topic, want, 120) == want
        connect = ConnectApi(f"http://127.0.0.1:{cdc_ports.connect}")
        assert connect.state(sink) == ("RUNNING", ["RUNNING"])
        assert read_topic(stack, sink_dead_letters(sink), decode=False) == []  # an outage
    finally:
        proxy.close()


def test_a_paused_registry_stalls_the_sink_until_it_resumes(
    stack: Stack, cdc_ports: CdcPorts, topic: str, tmp_path: Path
) -> None:
    sink = f"paused-{topic[-6:]}"
    register_sink(addresses(cdc_ports, registry_port(stack)), sink, [topic], "avro")
    produce_json(stack, topic, [({"id": 1}, {"id": 1, "name": "before"})])
    assert wait_for_rows(cdc_ports, topic, [(1, "before")], 120) == [(1, "before")]
    key, value = staged_record(stack, topic, {"id": 2, "name": "during"})
    running = registry_service(stack.home).running()
    assert running is not None
    os.kill(running.pid, signal.SIGSTOP)
    try:
        produce_bytes(stack, topic, [(key, value)])
        line = wait_for_stall_line(stack, cdc_ports, tmp_path, topic, sink)
        assert warehouse_rows(cdc_ports, topic) == [(1, "before")]  # the pause landed
    finally:
        os.kill(running.pid, signal.SIGCONT)
    assert f"{topic} partition 0 offset 1" in line, line
    want = [(1, "before"), (2, "during")]
    assert wait_for_rows(cdc_ports, topic, want, 120) == want
    assert read_topic(stack, sink_dead_letters(sink), decode=False) == []


def test_the_runs_watch_restarts_a_sink_stuck_on_a_request_that_never_returns(
    stack: Stack, cdc_ports: CdcPorts, topic: str
) -> None:
    """Apicurio's own converter (no timeout) parks the task for good; the watch of a
    continuous run restarts it."""
    proxy = BlackHoleProxy(registry_port(stack))
    sink = f"stuck-{topic[-6:]}"
    at = addresses(cdc_ports, proxy.port)
    config = connector_config(
        "jdbc-sink", "avro", topics=topic, warehouse_port=str(at.warehouse_port),
        database=postgres.WAREHOUSE.database, registry_v2=at.registry_v2,
        dead_letters=sink_dead_letters(sink),
    )  # fmt: skip
    # Apicurio's own converter; should zync's converter have set the plugin's HTTP client
    # provider already, a day-long timeout makes its clients as patient as Apicurio's.
    plain, day = "io.apicurio.registry.utils.converter.AvroConverter", str(86_400_000)
    config |= {"key.converter": plain, "value.converter": plain,
               "key.converter.zync.registry.request.timeout.ms": day,
               "value.converter.zync.registry.request.timeout.ms": day,
               # The restarted task gets its partitions once Kafka drops the stuck task's
               # consumer, which polls no more: after max.poll.interval.ms (5 min by
               # default, the default stall bound too); 15 s here.
               "consumer.override.max.poll.interval.ms": "15000"}  # fmt: skip
    connect = ConnectApi(at.connect_url)
    try:
        connect.put(sink, config)
        connect.wait_running(sink)
        produce_json(stack, topic, [({"id": 1}, {"id": 1, "name": "before"})])
        assert wait_for_rows(cdc_ports, topic, [(1, "before")], 120) == [(1, "before")]
        key, value = staged_record(stack, topic, {"id": 2, "name": "during"})
        with proxy.swallowing():
            produce_bytes(stack, topic, [(key, value)])
            deadline = time.monotonic() + 30
            while proxy.swallowed_bytes == 0 and time.monotonic() < deadline:
                time.sleep(0.5)
            assert proxy.swallowed_bytes > 0  # the request went into the hole
        time.sleep(20)  # the proxy forwards again, but that request is never answered
        assert warehouse_rows(cdc_ports, topic) == [(1, "before")]
        assert connect.state(sink) == ("RUNNING", ["RUNNING"])  # stuck, and says RUNNING

        said: list[str] = []
        settings = SinkSettings(at.connect_url, (sink,), stall_after_s=10.0)
        watch = SinkWatch(settings, stack.kafka, lambda: [topic], said.append)
        restarted: list[str] = []
        deadline = time.monotonic() + 60
        while not restarted and time.monotonic() < deadline:
            restarted = watch.look()
            time.sleep(2)
        assert restarted == [sink], said
        (line,) = said
        assert line.startswith(f"sink {sink} has not committed for ") and "restarted" in line, line
        want = [(1, "before"), (2, "during")]
        assert wait_for_rows(cdc_ports, topic, want, 120) == want
        assert watch.look() == []  # it caught up: nothing to restart
    finally:
        proxy.close()
        connect.delete(sink)


def test_a_warehouse_restart_mid_stream_loses_and_duplicates_nothing(
    stack: Stack, cdc_ports: CdcPorts, topic: str
) -> None:
    sink = f"restarted-{topic[-6:]}"
    register_sink(addresses(cdc_ports, registry_port(stack)), sink, [topic], "avro")
    produce_json(stack, topic, [({"id": i}, {"id": i, "name": f"r{i}"}) for i in range(1, 51)])
    assert len(wait_for_rows(cdc_ports, topic, [(i, f"r{i}") for i in range(1, 51)], 120)) == 50
    warehouse = postgres.service(stack.home, postgres.WAREHOUSE)
    assert warehouse.stop()  # the fault landed: it was running
    try:
        produce_json(
            stack, topic, [({"id": i}, {"id": i, "name": f"r{i}"}) for i in range(51, 201)]
        )
        time.sleep(15)  # the sink meets the stopped warehouse (and retries)
    finally:
        postgres.launch_postgres(stack.home, postgres.WAREHOUSE, cdc_ports.warehouse_db)()
    want = [(i, f"r{i}") for i in range(1, 201)]
    assert wait_for_rows(cdc_ports, topic, want, 180) == want  # each once (the key is unique)
    assert read_topic(stack, sink_dead_letters(sink), decode=False) == []
    assert ConnectApi(f"http://127.0.0.1:{cdc_ports.connect}").state(sink) == (
        "RUNNING", ["RUNNING"],
    )  # fmt: skip
