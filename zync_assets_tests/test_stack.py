"""`zync stack` failure modes, each a one-line error."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from zync_assets import jars
from zync_assets.core.errors import ZyncError
from zync_assets.core.settings import RegistrySettings
from zync_assets.spark.session import spark_jars
from zync_assets.stack import connect, java
from zync_assets.stack.connectors import connector_config
from zync_assets.stack.process import Service
from zync_assets.stack.services import CdcPorts, StackPorts, stack_status, stack_up
from zync_assets_tests.conftest import Stack, free_port, run_zync


def test_port_in_use_is_refused(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ZyncError, match=f"port {port} for kafka is in use"):
            stack_up(StackPorts(kafka=port, registry=free_port()), tmp_path / ".zync")
    assert all(s.running is None for s in stack_status(tmp_path / ".zync"))


def test_missing_jars_point_at_the_installer(tmp_path: Path) -> None:
    done = run_zync(  # in an empty folder: a stack running in the checkout must not matter
        "stack", "up", env={"PATH": "/usr/bin:/bin", "ZYNC_JARS": str(tmp_path), "HOME": "/tmp"},
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1
    assert "jars are missing" in done.stderr and "scripts/install.sh" in done.stderr


def test_missing_spark_jars_point_at_zync_jars(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ZYNC_JARS", str(tmp_path))
    with pytest.raises(ZyncError, match=r"Delta Lake jars are missing .*`zync jars`"):
        spark_jars()
    (tmp_path / "spark").mkdir()
    (tmp_path / "spark" / "delta-spark_4.2_2.13-4.4.0.jar").touch()
    # zync's own functions come from the package, not the cache.
    assert spark_jars() == [
        str(tmp_path / "spark" / "delta-spark_4.2_2.13-4.4.0.jar"),
        str(jars.FUNCTIONS_JAR),
    ]
    monkeypatch.setattr(jars, "FUNCTIONS_JAR", tmp_path / "zync-spark.jar")
    with pytest.raises(ZyncError, match=r"functions jar is missing from the package .*jvm/build"):
        spark_jars()


def test_missing_java_is_explained(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(java, "JVM_DIRS", str(tmp_path / "*" / "bin" / "java"))
    with pytest.raises(ZyncError, match="Java is not installed"):
        java.find_java(17, "Kafka", "ZYNC_KAFKA_JAVA_HOME")


def test_too_old_java_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ZyncError, match=r"needs Java 99\+, found only"):
        java.find_java(99, "a future registry", "ZYNC_REGISTRY_JAVA_HOME")


def test_a_service_that_dies_while_starting_names_its_log(tmp_path: Path) -> None:
    service = Service("broken", tmp_path / "run")
    port = free_port()
    proc = service.launch(["sh", "-c", "echo boom; exit 3"], port)
    with pytest.raises(ZyncError, match=r"broken exited with status 3.*see its log: .*broken\.log"):
        service.wait_ready(proc, port, lambda: False, timeout=10)
    assert "boom" in service.log.read_text()


def test_status_reports_the_running_stack(stack: Stack, spark_server: str) -> None:
    done = run_zync("stack", "status", env=stack.env(ZYNC_HOME=str(stack.home)))
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert lines[0].startswith("kafka") and "running" in lines[0]
    assert lines[1].startswith("registry") and stack.registry_settings.url in lines[1]
    names = [line.split()[0] for line in lines]
    # The cluster's workers are listed (after their master) only while they run: the
    # session's spark_cluster fixture starts two if a cluster test ran first.
    workers = [line for line in lines if line.startswith("spark-worker-")]
    assert all("running" in line for line in workers)
    assert [n for n in names if not n.startswith("spark-worker-")] == [
        "kafka", "registry", "s3", "catalog", "spark", "spark-master", "pg-source",
        "pg-warehouse", "connect", "dagster", "pipeline",
    ]  # fmt: skip
    assert names[6 : 6 + len(workers)] == [f"spark-worker-{n}" for n in range(1, len(workers) + 1)]
    spark = lines[4]  # the spark_server fixture's Connect server
    assert "running" in spark and f" {spark_server} " in spark, spark
    assert "stopped" in lines[-2]  # only with --dagster
    assert "stopped" in lines[-1]  # only with --follow


def test_status_lists_the_cdc_services_with_their_addresses(
    stack: Stack, cdc_ports: CdcPorts
) -> None:
    done = run_zync("stack", "status", env=stack.env(ZYNC_HOME=str(stack.home)))
    lines = {line.split()[0]: line for line in done.stdout.splitlines()}
    assert f"127.0.0.1:{cdc_ports.source_db} " in lines["pg-source"]
    assert f"127.0.0.1:{cdc_ports.warehouse_db} " in lines["pg-warehouse"]
    assert f"http://127.0.0.1:{cdc_ports.connect} " in lines["connect"]
    assert all("running" in lines[name] for name in ("pg-source", "pg-warehouse", "connect"))


def test_missing_connect_plugins_point_at_the_installer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ZYNC_JARS", str(tmp_path))
    (tmp_path / "connect").mkdir()
    (tmp_path / "connect" / "x.jar").write_bytes(b"")
    with pytest.raises(ZyncError, match=r"connect-plugins are missing .* run scripts/install.sh"):
        connect.launch_connect(tmp_path / ".zync", free_port(), "127.0.0.1:1")


def test_connector_configurations_are_filled_and_checked(tmp_path: Path) -> None:
    config = connector_config("jdbc-sink", "avro", topics="t", warehouse_port="5",
                              database="w", registry_v2="http://r", dead_letters="dl")  # fmt: skip
    assert config["topics"] == "t" and config["connection.url"] == "jdbc:postgresql://127.0.0.1:5/w"
    assert config["collection.name.format"] == "${topic}"  # the sink's own placeholder stays
    assert config["value.converter"] == "zync.connect.registry.TimedAvroConverter"
    assert config["value.converter.zync.registry.request.timeout.ms"] == "10000"
    assert config["connector.class"] == "zync.connect.sink.IsolatingJdbcSinkConnector"
    assert config["key.converter.apicurio.registry.url"] == "http://r"
    assert not any(k.startswith("//") for k in config)
    assert config["errors.tolerance"] == "all"
    assert config["errors.deadletterqueue.topic.name"] == "dl"
    as_json = connector_config(
        "jdbc-sink", "json", topics="t", warehouse_port="5", database="w", dead_letters="dl"
    )
    assert as_json["value.converter.schemas.enable"] == "true"
    with pytest.raises(ZyncError, match=r"no value for the placeholder \{\{topics\}\}"):
        connector_config("jdbc-sink", "json", warehouse_port="5", database="w")
    with pytest.raises(ZyncError, match="unknown wire format 'protobuf'"):
        connector_config("jdbc-sink", "protobuf")


def test_dagster_that_cannot_load_the_specs_says_why_and_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from zync_assets.stack.dagster import dagster_service, launch_dagster

    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "bad.yaml").write_text("inputs: [{topic: T}]\n")  # no pool
    monkeypatch.setenv("ZYNC_SPECS", str(specs))
    wait = launch_dagster(
        tmp_path, free_port(), "127.0.0.1:1", RegistrySettings("http://127.0.0.1:1")
    )
    try:
        with pytest.raises(ZyncError, match="Dagster could not load code location") as error:
            wait()
        assert "\n" not in str(error.value) and "bad.yaml" in str(error.value)
    finally:
        dagster_service(tmp_path).stop()
    assert dagster_service(tmp_path).running() is None


def test_zync_jars_without_maven_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no mvn on it
    with pytest.raises(ZyncError, match=r"Maven \(mvn\) is missing: .*apt-get install maven"):
        jars.fetch("spark", tmp_path / "cache")
    assert not (tmp_path / "cache" / "spark").exists()  # nothing half-filled left as the set


def test_a_command_that_needs_the_stack_extra_names_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A library install has no psycopg: the demo's commands say which extra to install."""
    from zync_assets.cli.main import COMMANDS, LazyCommand, main

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "zync_assets.demo.workload", raising=False)
    monkeypatch.setitem(COMMANDS, "workload", LazyCommand("zync_assets.demo.workload", "run", ""))
    with pytest.raises(SystemExit) as exit_code:
        main(["workload"])
    assert exit_code.value.code == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "zync: error: the local stack and the demo need psycopg, which a library install "
        "leaves out: pip install 'zync-assets[stack]'"
    ]
