"""Session fixtures: one private stack (Kafka + registry on free ports) and one SparkSession.

Both are real: the broker and registry run from the jars scripts/install.sh
fetched, in a temporary `.zync/`, and are stopped at the end even on failure.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from zync_assets.core.settings import KafkaSettings, RegistrySettings, kafka_env, registry_env
from zync_assets.kafka.registry import Registry
from zync_assets.stack.kafka import SecurePorts
from zync_assets.stack.registry import registry_url
from zync_assets.stack.secure import SASL_USER, local_credentials
from zync_assets.stack.services import (
    CdcPorts,
    StackPorts,
    cdc_down,
    cdc_up,
    stack_down,
    stack_up,
)
from zync_assets_tests.support import process_tree, scheduling
from zync_assets_tests.support.in_process import needs_a_process, run_in_process, worker_session
from zync_assets_tests.support.ports import free_port
from zync_assets_tests.support.py4j_sync import drop_thread_connection

ZYNC = str(Path(sys.executable).parent / "zync")


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    # Turn `timeout`/CI cancellation into a normal exit so the stack fixture stops its JVMs.
    raise SystemExit(128 + signum)


signal.signal(signal.SIGTERM, _exit_on_sigterm)


_RECORDED = scheduling.recorded_durations()


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks added here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        wrong = scheduling.misplaced(item.nodeid, set(getattr(item, "fixturenames", ())))
        if wrong:
            raise pytest.UsageError(wrong)
    marks = {item.nodeid: {m.name for m in item.iter_markers()} for item in items}
    fast = scheduling.fast_tier([item.nodeid for item in items], marks, _RECORDED)
    for item in items:
        if item.nodeid not in fast:
            item.add_marker(pytest.mark.slow)
        if scheduling.runs_last(item.nodeid):
            item.add_marker(pytest.mark.extended)


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ServiceGroups(LoadScopeScheduling):
        """Each test its own unit, except the tests of one heavy service: one unit."""

        def _split_scope(self, nodeid: str) -> str:
            return scheduling.unit_of(nodeid)

    config.option.loadscopereorder = False  # keep the longest-first order given below
    return ServiceGroups(config, log)


@pytest.hookimpl(tryfirst=True)  # before xdist sends the order to its controller
def pytest_collection_finish(session: pytest.Session) -> None:
    marks = {item.nodeid: {m.name for m in item.iter_markers()} for item in session.items}
    nodeids = [item.nodeid for item in session.items]
    order = scheduling.longest_units_first(nodeids, marks, _RECORDED)
    place = {nodeid: i for i, nodeid in enumerate(order)}
    session.items.sort(key=lambda item: place[item.nodeid])


@dataclass(frozen=True)
class Stack:
    home: Path
    kafka: KafkaSettings
    registry_settings: RegistrySettings
    ports: StackPorts

    @property
    def secure(self) -> SecurePorts:
        assert self.ports.secure is not None
        return self.ports.secure

    def stop_kafka(self) -> None:
        """Stop the broker: a clean shutdown, as an operator's restart does."""
        from zync_assets.stack.kafka import kafka_service

        kafka_service(self.home).stop()

    def start_kafka(self) -> None:
        """Start the broker again on its ports and data; wait until it answers."""
        from zync_assets.stack.kafka import launch_kafka

        ports = self.ports
        launch_kafka(self.home, ports.kafka, ports.kafka_controller, ports.secure)()

    def stop_registry(self) -> None:
        from zync_assets.stack.registry import registry_service

        registry_service(self.home).stop()

    def start_registry(self) -> None:
        """Start the registry again on its port and data; wait until it answers."""
        from zync_assets.stack.registry import launch_registry

        launch_registry(self.home, self.ports.registry, self.ports.registry_management)()

    def sasl_ssl(self, mechanism: str = "SCRAM-SHA-512", **changes: Any) -> KafkaSettings:
        """Settings for the broker's SASL_SSL listener (user `zync`), with `changes`."""
        credentials = local_credentials(self.home)
        settings = KafkaSettings(
            f"127.0.0.1:{self.secure.sasl_ssl}", "SASL_SSL", mechanism, SASL_USER,
            credentials.password(), str(credentials.ca),
        )  # fmt: skip
        return dataclasses.replace(settings, **changes)

    def mtls(self) -> KafkaSettings:
        """Settings for the broker's SSL listener, which requires a client certificate."""
        credentials = local_credentials(self.home)
        return KafkaSettings(
            f"127.0.0.1:{self.secure.mtls}", "SSL", ssl_ca=str(credentials.ca),
            ssl_cert=str(credentials.client_cert), ssl_key=str(credentials.client_key),
        )  # fmt: skip

    def env(self, **extra: str) -> dict[str, str]:
        """Environment for a `zync` subprocess that talks to this stack."""
        return {
            **os.environ,
            **kafka_env(self.kafka),
            **registry_env(self.registry_settings),
            **extra,
        }


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("stack") / ".zync"
    secure = SecurePorts(free_port(), free_port())
    ports = StackPorts(free_port(), free_port(), free_port(), free_port(), secure)
    saved = {k: os.environ.get(k) for k in ("ZYNC_KAFKA_BOOTSTRAP", "ZYNC_SCHEMA_REGISTRY_URL")}
    try:
        stack_up(ports, home)
        started = Stack(
            home,
            KafkaSettings(f"127.0.0.1:{ports.kafka}"),
            RegistrySettings(registry_url(ports.registry)),
            ports,
        )
        os.environ["ZYNC_KAFKA_BOOTSTRAP"] = started.kafka.bootstrap_servers
        os.environ["ZYNC_SCHEMA_REGISTRY_URL"] = started.registry_settings.url
        yield started
    finally:
        record_service_cpu(home)
        stack_down(home)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="session")
def secured_registry(stack: Stack, tmp_path_factory: pytest.TempPathFactory):
    """A second registry, secured as `zync stack up --secure` makes it: https only, with
    basic auth (its own CA and password). Apart from the session's plain one, which the
    other tests use; stopped with the session."""
    from zync_assets.stack.registry import (
        launch_registry,
        registry_service,
        secured_registry_settings,
    )

    home = tmp_path_factory.mktemp("secured-registry") / ".zync"
    port = free_port()
    try:
        launch_registry(home, port, free_port(), secure=True)()
        yield secured_registry_settings(home, port)
    finally:
        registry_service(home).stop()


@pytest.fixture(scope="session")
def registry(stack: Stack) -> Registry:
    return Registry(stack.registry_settings)


# Where scripts/test.sh keeps a run's reports; bench/suite_report.py adds these up.
CDC_SERVICES = ("pg-source", "pg-warehouse", "connect")
SUITE_REPORTS = Path(__file__).resolve().parent.parent / ".zync" / "suite"


def record_service_cpu(home: Path, only: tuple[str, ...] = ()) -> None:
    """The CPU each running service of the stack at `home` has used since it started, one
    JSON line per service in `.zync/suite/services.jsonl`, before they are stopped: what
    the services take from the tests beside them. A service restarted by a test counts
    from its restart."""
    from zync_assets.stack.services import stack_status

    lines = [
        json.dumps({"service": s.name, "home": str(home),
                    "cpu_seconds": round(process_tree.tree_cpu_seconds(s.running.pid), 1)})
        for s in stack_status(home) if s.running is not None and (not only or s.name in only)
    ]  # fmt: skip
    SUITE_REPORTS.mkdir(parents=True, exist_ok=True)
    with (SUITE_REPORTS / "services.jsonl").open("a") as out:
        out.writelines(line + "\n" for line in lines)


@pytest.fixture(scope="session")
def _cdc_addresses() -> CdcPorts:
    """The ports of the CDC services, one set per worker for the whole run."""
    return CdcPorts(free_port(), free_port(), free_port())


@pytest.fixture
def cdc_ports(stack: Stack, _cdc_addresses: CdcPorts) -> Iterator[CdcPorts]:
    """PostgreSQL source and warehouse clusters and a Kafka Connect worker with Debezium's
    connectors, beside the stack: started by the first test of the `cdc` group, stopped
    after its last (`pytest_runtest_teardown`). A test's connectors and replication slots
    go when it ends: left behind, every chain's connectors poll beside every later test."""
    cdc_up(stack.home, _cdc_addresses, stack.kafka.bootstrap_servers)
    yield _cdc_addresses
    remove_connectors_and_slots(_cdc_addresses)


def remove_connectors_and_slots(ports: CdcPorts) -> None:
    """Every connector of the Connect worker, then every replication slot no connector
    holds any more (Debezium leaves its slot behind when its connector is deleted)."""
    from zync_assets.kafka.connect_api import ConnectApi
    from zync_assets.stack import postgres

    connect = ConnectApi(f"http://127.0.0.1:{ports.connect}")
    for name in connect.names():
        connect.delete(name)
    with psycopg.connect(postgres.dsn(ports.source_db, "postgres"), autocommit=True) as conn:
        conn.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE NOT active"
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """The CDC services stop once the `cdc` group's last test on this worker has been torn
    down (xdist hands a worker its next test before it tears the last one down), so they
    take no CPU from the tests after the group."""
    last_of_group = scheduling.group_of(item.nodeid) == "cdc" and (
        nextitem is None or scheduling.group_of(nextitem.nodeid) != "cdc"
    )
    stack = getattr(item, "funcargs", {}).get("stack")
    result = yield  # the fixtures' teardown: cdc_ports removes the test's connectors
    if last_of_group and isinstance(stack, Stack):
        record_service_cpu(stack.home, only=CDC_SERVICES)
        cdc_down(stack.home)
    return result


@pytest.fixture(scope="session")
def spark_server(stack: Stack) -> str:
    """The stack's Spark Connect server (started by the first test that needs it); its
    `sc://` URL. Only subprocesses may use it: a Connect session switches the whole
    Python process to Connect's column classes, which the `spark` fixture's cannot mix
    with."""
    from zync_assets.stack.spark_server import launch_spark_server, spark_url

    port = free_port()
    launch_spark_server(stack.home, port)()
    return spark_url(port)  # the stack fixture's stack_down stops it with the rest


@dataclass(frozen=True)
class Cluster:
    """The session's Spark standalone cluster: a master and two one-core workers."""

    url: str
    ui_port: int
    state: Path
    workers: int


@pytest.fixture(scope="session")
def spark_cluster(stack: Stack) -> Cluster:
    """A Spark standalone cluster (master + 2 workers of one core each) from PySpark's own
    distribution, as `zync stack up --spark-workers 2` starts it (started by the first test
    that needs it; the stack fixture's stack_down stops it with the rest)."""
    from zync_assets.stack.spark_cluster import ClusterPorts, launch_cluster, master_url

    ports = ClusterPorts(free_port(), free_port(), (free_port(), free_port()))
    launch_cluster(stack.home, ports)()
    return Cluster(master_url(ports.master), ports.master_ui, stack.home, 2)


@dataclass(frozen=True)
class ObjectStore:
    """The session's S3 API server (S3Proxy, as `zync stack up --s3` runs it): its bucket
    and the variables a zync command needs to reach it."""

    bucket: str
    env: dict[str, str]

    def lake(self, name: str) -> str:
        return f"s3a://{self.bucket}/{name}"


@pytest.fixture(scope="session")
def object_store(stack: Stack) -> ObjectStore:
    from zync_assets.stack.s3 import LAKE_BUCKET, launch_s3, s3_env

    port = free_port()
    launch_s3(stack.home, port)()  # the stack fixture's stack_down stops it with the rest
    return ObjectStore(LAKE_BUCKET, s3_env(stack.home, port))


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name no other test uses."""
    return f"{request.node.name[:40].replace('[', '_').replace(']', '')}_{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="session")
def spark():
    # The worker's session lives as long as the suite, with C1's code (worker_session).
    session = worker_session()
    yield session
    session.stop()


_FAILED = pytest.StashKey[bool]()
_CPU_BEFORE = pytest.StashKey[process_tree.CpuSeconds]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_CPU_BEFORE] = process_tree.tree_cpu()
    _within_the_budget(item)


def _within_the_budget(item: pytest.Item) -> None:
    """A test that would end past the suite's deadline (`ZYNC_SUITE_DEADLINE`, which
    scripts/test.sh sets from `ZYNC_SUITE_BUDGET_MIN`) is skipped, saying so: CI's time
    limit fails a run that crosses it and lands nothing of it."""
    deadline = os.environ.get("ZYNC_SUITE_DEADLINE")
    if not deadline:
        return
    left = float(deadline) - time.time()
    marks = {m.name for m in item.iter_markers()}
    if not scheduling.fits_the_budget(item.nodeid, marks, _RECORDED, left):
        pytest.skip(
            f"the suite's time budget (ZYNC_SUITE_BUDGET_MIN) has {max(left, 0) / 60:.0f} "
            "minutes left, too few for this test: `scripts/test.sh -k` runs it alone"
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    if call.when == "teardown" and _CPU_BEFORE in item.stash:
        # Before the teardown's report is made, which carries it into the JUnit XML
        # (bench/suite_report.py): the CPU the test's set-up, call and teardown used.
        used = process_tree.used_since(item.stash[_CPU_BEFORE])
        item.user_properties.append(("cpu_seconds", round(used, 1)))
    report = yield
    if report.failed and call.when in ("setup", "call"):
        item.stash[_FAILED] = True
    return report


@pytest.fixture(autouse=True)
def _spark_usable_after_a_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that failed mid-call (a timeout above all) must not take the worker's
    SparkSession down with it: see support/py4j_sync.py."""
    yield
    if request.node.stash.get(_FAILED, False) and (session := _live_session()) is not None:
        drop_thread_connection(session)


def _live_session():  # -> SparkSession | None; PySpark only if a test has loaded it
    """The worker's SparkSession, if a test (or an in-process `zync`) started it."""
    module = sys.modules.get("pyspark.sql.session")
    return None if module is None else module.SparkSession._instantiatedSession


def run_zync(
    *args: str,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = 120,
    cwd: Path | None = None,
    process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run `zync`: the CLI's `main` in this worker, over its warm Spark (support/
    in_process.py), or the real console script where the call needs a process of its
    own or the test asks for one (`process=True`: the process itself is under test)."""
    environment = dict(os.environ) if env is None else env
    if process or needs_a_process(environment, stdin):
        return subprocess.run(
            [ZYNC, *args], input=stdin, capture_output=True, text=True, env=environment,
            timeout=timeout, cwd=cwd,
        )  # fmt: skip
    return run_in_process(list(args), environment, cwd)


def zync_ok(
    *args: str, env: dict[str, str], timeout: float = 600, cwd: Path | None = None,
    process: bool = False,
) -> str:  # fmt: skip
    """Run `zync` (as run_zync does), which must succeed without a traceback or a third
    party's WARN line; its standard output."""
    done = run_zync(*args, env=env, timeout=timeout, cwd=cwd, process=process)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "WARN" not in done.stderr, done.stderr
    return done.stdout


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private lake directory for the test (ZYNC_LAKE)."""
    folder = tmp_path / "lake"
    monkeypatch.setenv("ZYNC_LAKE", str(folder))
    return folder


def produce_json(
    stack: Stack,
    topic: str,
    records: Sequence[tuple[object, object]],
    value_schema: object = None,
    partitions: int = 1,
) -> None:
    """Produce (key, value) pairs as Avro through zync's own producer."""
    from zync_assets.kafka.produce import Line, produce
    from zync_assets.kafka.registry import Registry

    lines = [Line(i + 1, key, value) for i, (key, value) in enumerate(records)]
    registry = Registry(stack.registry_settings)
    produce(topic, lines, stack.kafka, registry, value_schema=value_schema, partitions=partitions)


def produce_bytes(stack: Stack, topic: str, messages: list[tuple[bytes | None, bytes | None]]):
    from zync_assets.kafka.clients import ensure_topic
    from zync_assets.kafka.produce import send

    ensure_topic(stack.kafka, topic)
    send(stack.kafka, topic, messages)


def produce_many(stack: Stack, topic: str, count: int, every_bad: int = 0) -> None:
    """`count` small Avro messages (fast: a few distinct payloads, re-used); every
    `every_bad`-th message is garbage instead, for the dead-letter path."""
    from fastavro import parse_schema

    from zync_assets.codec.avro import encode
    from zync_assets.kafka.clients import connected_producer, ensure_topic
    from zync_assets.kafka.registry import Registry

    schema = {"type": "record", "name": "Many", "fields": [{"name": "n", "type": "long"},
              {"name": "pad", "type": "string"}]}  # fmt: skip
    schema_id = Registry(stack.registry_settings).register(f"{topic}-value", schema)
    parsed = parse_schema(schema)
    payloads = [encode(schema_id, parsed, {"n": i, "pad": "x" * 100}) for i in range(97)]
    ensure_topic(stack.kafka, topic)
    out = connected_producer(stack.kafka, topic, **{"linger.ms": 50})
    for i in range(count):
        bad = every_bad and i % every_bad == every_bad - 1
        while True:
            try:
                out.produce(topic, value=b"garbage" if bad else payloads[i % 97])
                break
            except BufferError:
                out.poll(0.05)
    assert out.flush(60) == 0


def pool_offsets(spark, lake: Path, pool: str, killed: bool = False) -> list[int]:
    """Every offset in the pool (duplicates kept), after checking that `<pool>_dlq` holds
    exactly the pool's dead-letter rows; `killed`: right after a kill, which may have
    cut a run between its commit and its copy to `<pool>_dlq` (the next run makes it),
    so the copy may lag the pool, never hold what the pool does not."""
    raw = _pool_with_its_dead_letters_checked(spark, lake, pool, killed)
    return sorted(r.o for r in raw.selectExpr("kafka.offset AS o").collect())


def assert_each_offset_once(spark, lake: Path, pool: str, count: int) -> None:
    """The pool holds offsets 0..count-1 each once (a topic of one partition), its
    `<pool>_dlq` checked as `pool_offsets` checks it. Spark counts; the offsets come to
    Python only to show a mismatch (collecting 400,000 of them took seconds a call)."""
    raw = _pool_with_its_dead_letters_checked(spark, lake, pool, killed=False)
    found = raw.selectExpr(
        "count(*)", "count(DISTINCT kafka.offset)", "min(kafka.offset)", "max(kafka.offset)"
    ).first()
    assert found is not None
    if tuple(found) != (count, count, 0, count - 1):
        assert pool_offsets(spark, lake, pool) == list(range(count)), tuple(found)


def _pool_with_its_dead_letters_checked(spark, lake: Path, pool: str, killed: bool):
    from zync_assets.lake.pools import pool_exists

    raw = spark.read.format("delta").load(str(lake / pool))
    dead = sorted(
        r.o for r in raw.where("dead_letter IS NOT NULL").selectExpr("kafka.offset AS o").collect()
    )
    dlq = lake / f"{pool}_dlq"
    copied = []
    if pool_exists(str(dlq)):
        copied = sorted(
            r.o
            for r in spark.read.format("delta").load(str(dlq)).selectExpr("offset AS o").collect()
        )
    if killed:
        assert set(copied) <= set(dead) and len(copied) == len(set(copied)), (copied, dead)
    else:
        assert copied == dead
    return raw


@dataclass(frozen=True)
class Received:
    partition: int
    key: Any  # a decoded record: whatever its schema makes it
    value: Any
    headers: dict[str, bytes]


def read_topic(stack: Stack, topic: str, decode: bool = True) -> list[Received]:
    """Every committed record of `topic`, partition by partition, decoded as a consumer
    we did not write sees them: confluent-kafka's AvroDeserializer with read_committed."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from zync_assets.kafka.clients import partitions_of

    client = SchemaRegistryClient(stack.registry_settings.client_config())
    deserialize = AvroDeserializer(client)
    consumer = Consumer({
        **stack.kafka.client_config(), "group.id": uuid.uuid4().hex,
        "isolation.level": "read_committed", "enable.partition.eof": True,
        "enable.auto.commit": False,
    })  # fmt: skip
    received: list[Received] = []
    try:
        for partition in partitions_of(stack.kafka, topic):
            consumer.assign([TopicPartition(topic, partition, 0)])
            while True:
                message = consumer.poll(10)
                assert message is not None, f"{topic}[{partition}]: no EOF within 10s"
                if (error := message.error()) is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    break
                key, value = message.key(), message.value()
                if decode:
                    key = key and deserialize(key, SerializationContext(topic, MessageField.KEY))
                    value = value and deserialize(
                        value, SerializationContext(topic, MessageField.VALUE)
                    )
                raw = message.headers() or []
                pairs = raw.items() if isinstance(raw, dict) else raw
                headers = {n: v.encode() if isinstance(v, str) else v or b"" for n, v in pairs}
                received.append(Received(partition, key, value, headers))
    finally:
        consumer.close()
    return received


_ALICE, _BOB = ("Alice", "taco"), ("Bob", "burrito")
_CHARLIE, _DAN = ("Charlie", "enchilada"), ("Dan", "beans")
# zync's result after each batch of the invoice demo: ID -> (customer, item, status), as an
# upserting sink holds it.
DEMO_TABLES = {
    1: {100: (*_ALICE, "pending"), 101: (*_BOB, "pending")},
    2: {100: (*_ALICE, "pending"), 101: (*_BOB, "pending"), 102: (*_CHARLIE, "pending")},
    3: {100: (*_ALICE, "closed"), 101: (*_BOB, "pending"), 102: (*_CHARLIE, "pending"),
        103: (*_DAN, "pending")},
    4: {100: (*_ALICE, "closed"), 101: (*_BOB, "paid"), 102: (*_CHARLIE, "paid"),
        103: (*_DAN, "collections")},
}  # fmt: skip


def rebuild_table(records: list[Received], key_field: str) -> dict[object, dict]:
    """What a JDBC sink in upsert mode makes of the records (see `upsert_by_key`)."""
    from zync_assets.demo.sink import upsert_by_key

    return upsert_by_key(((r.key, r.value) for r in records), key_field)


def stateless_spec(path: Path, topic: str, raw: str, staging: str, rule: str) -> Path:
    """A one-rule spec: `topic` into pool `raw`, mapped by `rule` to `<topic>_out` in `staging`."""
    path.write_text(
        f"""
inputs:
  - {{topic: {topic}, pool: {raw}}}
outputs:
  - {{topic: {topic}_out, pool: {staging}}}
transforms:
  - {{type: stateless, in: {topic}, out: {topic}_out, {rule}}}
"""
    )
    return path
