"""zync against a secured broker — the stack's SASL_SSL listener (PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512) and its mutual-TLS listener, with certificates from the stack's own CA —
and a secured registry (https only, basic auth).

Every client is covered: the CLI (librdkafka), ingest (Spark's Kafka source, Java),
to-kafka's two senders (the driver JVM's for a local Spark, librdkafka's for Spark
Connect), Dagster's sensor and assets. And what a user mistypes — a wrong password, the
wrong CA, plaintext against TLS, no client certificate — is one line naming the cause.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from dagster import DagsterInstance, materialize

from zync_assets.core.settings import KafkaSettings, RegistrySettings, kafka_env, registry_env
from zync_assets.orchestration.definitions import build_zync_definitions
from zync_assets.specs.model import load_spec
from zync_assets.stack.secure import local_credentials
from zync_assets_tests.conftest import (
    ZYNC,
    Stack,
    free_port,
    produce_json,
    read_topic,
    run_zync,
    stateless_spec,
)
from zync_assets_tests.test_dagster import evaluate

pytestmark = pytest.mark.integration

# A guard against a hang, not a figure: how long a refusal takes is bench/refusal_bench.py's.
REFUSAL_GUARD_S = 120.0


def over(stack: Stack, settings, **extra: str) -> dict[str, str]:
    return stack.env(**kafka_env(settings), **extra)


@pytest.fixture
def secured(stack: Stack, secured_registry: RegistrySettings) -> Stack:
    """The session's stack seen through its secured doors: SASL_SSL with SCRAM-SHA-512,
    and the https registry with basic auth."""
    return dataclasses.replace(stack, kafka=stack.sasl_ssl(), registry_settings=secured_registry)


def test_the_cli_speaks_every_sasl_mechanism_and_mutual_tls(secured: Stack, topic: str) -> None:
    stack = secured
    listeners = {
        "PLAIN": stack.sasl_ssl("PLAIN"),
        "SCRAM-SHA-256": stack.sasl_ssl("SCRAM-SHA-256"),
        "SCRAM-SHA-512": stack.sasl_ssl("SCRAM-SHA-512"),
        "mTLS": stack.mtls(),
    }
    for n, (name, settings) in enumerate(listeners.items()):
        line = f'{{"key": {{"id": {n}}}, "value": {{"id": {n}, "via": "{name}"}}}}\n'
        done = run_zync("produce", "-t", topic, env=over(stack, settings), stdin=line)
        assert done.returncode == 0, f"{name}: {done.stderr}"

    consumed = run_zync(
        "consume", "-t", topic, "--from-beginning", "--exit-after", "2s",
        env=over(stack, stack.mtls()),
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    assert [line.count('"via"') for line in consumed.stdout.splitlines()] == [1] * 4
    assert all(name in consumed.stdout for name in listeners)
    info = run_zync("info", "-t", topic, env=over(stack, stack.sasl_ssl("SCRAM-SHA-256")))
    assert info.returncode == 0 and "high 4" in info.stdout, info.stdout + info.stderr
    assert [r.value["via"] for r in read_topic(stack, topic)] == list(listeners)
    subjects = run_zync("ls", env=stack.env())
    assert subjects.returncode == 0 and f"{topic}-value" in subjects.stdout, subjects.stderr


def test_a_refused_connection_names_its_cause_in_one_line(
    secured: Stack, topic: str, tmp_path: Path
) -> None:
    stack = secured
    produce_json(stack, topic, [(None, {"n": 1})])
    stranger_ca = str(local_credentials(tmp_path / "elsewhere").ca)  # another CA altogether
    plaintext = KafkaSettings(stack.sasl_ssl().bootstrap_servers)
    no_client_cert = dataclasses.replace(stack.mtls(), ssl_cert=None, ssl_key=None)
    cases = {
        "wrong password": (stack.sasl_ssl(sasl_password="not-it"), "refused the credentials"),
        "wrong user": (stack.sasl_ssl("PLAIN", sasl_username="mallory"), "refused the credentials"),
        "unknown CA": (stack.sasl_ssl(ssl_ca=stranger_ca), "certificate verify failed"),
        "plaintext to TLS": (plaintext, "answers only TLS"),
        "no client certificate": (no_client_cert, "TLS with Kafka"),
    }
    registry = stack.registry_settings
    registry_cases = {
        "registry: wrong password": (
            dataclasses.replace(registry, password="not-it"), "refused the credentials"),
        "registry: no password": (
            dataclasses.replace(registry, user=None, password=None), "refused the credentials"),
        "registry: unknown CA": (dataclasses.replace(registry, ca=stranger_ca), "TLS with"),
        "registry: http to https": (
            dataclasses.replace(registry, url=registry.url.replace("https", "http")),
            "answers only TLS"),
    }  # fmt: skip

    def start(command: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
        return subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    running = {  # side by side: each waits out the client's connect timeout
        name: start([ZYNC, "info", "-t", topic], over(stack, settings))
        for name, (settings, _) in cases.items()
    }
    for name, (settings, _) in registry_cases.items():
        # `consume` looks up each message's schema; a registry-less command would not ask
        env = stack.env(**registry_env(settings))
        env.update({k: "" for k in registry_env(registry) if k not in registry_env(settings)})
        command = [ZYNC, "consume", "-t", topic, "--from-beginning", "--exit-after", "2s"]
        running[name] = start(command, env)
    says = {name: said for name, (_, said) in (cases | registry_cases).items()}
    for name, process in running.items():
        out, err = process.communicate(timeout=REFUSAL_GUARD_S)
        assert process.returncode == 1, f"{name}: exit {process.returncode}: {out} {err}"
        assert out == "" and len(err.splitlines()) == 1, f"{name}: {err}"
        assert err.startswith("zync: error: ") and says[name] in err, f"{name}: {err}"
    for secret in (stack.kafka.sasl_password, registry.password):
        assert secret and not any(secret in str(p.args) for p in running.values())


def test_a_dagster_run_over_sasl_ssl_ingests_transforms_and_sends_through_the_jvm(
    spark, secured: Stack, topic: str, tmp_path: Path, lake: Path, monkeypatch
) -> None:
    """Sensor (librdkafka), ingest (Spark's Kafka source) and to-kafka's JVM sender (a
    local Spark), all configured from the environment as a user's deployment is."""
    stack = secured
    for name, value in {**kafka_env(stack.kafka), **registry_env(stack.registry_settings)}.items():
        monkeypatch.setenv(name, value)
    spec = stateless_spec(tmp_path / "s.yaml", topic, "SecRaw", "SecStaging",
                          'sql: "in.key AS key, in.value AS value"')  # fmt: skip
    defs = build_zync_definitions([load_spec(spec)])
    produce_json(stack, topic, [({"id": i}, {"id": i, "n": i * 10}) for i in range(3)])
    instance = DagsterInstance.ephemeral()

    tick = evaluate(defs, instance, "raw_SecRaw_kafka_sensor")
    assert len(tick.run_requests) == 1
    graph = defs.resolve_asset_graph()
    keys = [k for k in graph.get_all_asset_keys() if graph.get(k).is_materializable]
    result = materialize(
        [defs.get_assets_def(k) for k in keys], instance=instance, resources=defs.resources,
        run_config=tick.run_requests[0].run_config,
    )  # fmt: skip
    assert result.success
    mtls = dataclasses.replace(stack, kafka=stack.mtls())
    assert [r.value for r in read_topic(mtls, f"{topic}_out")] == [
        {"id": i, "n": i * 10} for i in range(3)
    ]
    events = "\n".join(str(e) for e in instance.all_logs(result.run_id))
    secrets = [stack.kafka.sasl_password, stack.registry_settings.password]
    assert all(secret and secret not in events for secret in secrets)


def test_zync_run_over_sasl_ssl_on_spark_connect_sends_through_librdkafka(
    secured: Stack, spark_server: str, topic: str, tmp_path: Path, lake: Path
) -> None:
    stack = secured
    spec = stateless_spec(tmp_path / "s.yaml", topic, "SecRawC", "SecStagingC",
                          'sql: "in.key AS key, in.value AS value"')  # fmt: skip
    produce_json(stack, topic, [({"id": i}, {"id": i}) for i in range(4)])
    env = over(stack, stack.sasl_ssl("SCRAM-SHA-256"), ZYNC_SPARK_MASTER=spark_server)
    done = run_zync("run", str(spec), "--no-dagster", env=env, timeout=240)
    assert done.returncode == 0, done.stderr
    mtls = dataclasses.replace(stack, kafka=stack.mtls())
    assert [r.value for r in read_topic(mtls, f"{topic}_out")] == [{"id": i} for i in range(4)]
    status = run_zync("status", str(spec), "--format", "json", env=env)
    assert status.returncode == 0 and '"SecRawC"' in status.stdout, status.stderr


def files_holding(folder: Path, secrets: list[str]) -> list[str]:
    """Every file under `folder` whose bytes contain one of `secrets`."""
    needles = [s.encode() for s in secrets]
    return [
        str(path)
        for path in folder.rglob("*")
        if path.is_file() and any(n in path.read_bytes() for n in needles)
    ]


def test_no_secret_reaches_an_output_a_log_spark_s_ui_or_the_lake(
    secured: Stack, spark_server: str, topic: str, tmp_path: Path, lake: Path
) -> None:
    """Known secrets (the Kafka and registry passwords, a client key, a mistyped password)
    through every kind of command, successful, failing and verbose, with Spark's UI on."""
    stack = secured
    key_file = stack.mtls().ssl_key
    assert key_file is not None
    key_text = Path(key_file).read_text().splitlines()[1]  # a line of the key
    mistyped = "Mistyped-Passw0rd-4711"
    given = [stack.kafka.sasl_password, stack.registry_settings.password, key_text, mistyped]
    secrets = [s for s in given if s]
    assert len(secrets) == len(given), "the secured stack has passwords for Kafka and the registry"
    spec = stateless_spec(tmp_path / "s.yaml", topic, "SecretRaw", "SecretStaging",
                          'sql: "in.key AS key, in.value AS value"')  # fmt: skip
    ui_port = free_port()
    conf = tmp_path / "spark.conf"
    conf.write_text(f"spark.ui.enabled true\nspark.ui.port {ui_port}\n")  # over zync's defaults
    env = stack.env(ZYNC_SPARK_CONF=str(conf), ZYNC_HOME=str(stack.home))
    outputs: list[str] = []

    def zync(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        done = run_zync(*args, env={**env, "ZYNC_SPARK_MASTER": spark_server, **extra},
                        timeout=240)  # fmt: skip
        outputs.extend([done.stdout, done.stderr])
        return done

    line = '{"key": {"id": 1}, "value": {"id": 1}}\n'
    assert run_zync("produce", "-t", topic, env=env, stdin=line).returncode == 0
    ingest = subprocess.Popen(
        [ZYNC, "-v", "from-kafka", str(spec), "--exit-after", "8s"], env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    refused = subprocess.Popen(  # waits out its connect timeout meanwhile
        [ZYNC, "info", "-t", topic], env={**env, "ZYNC_KAFKA_SASL_PASSWORD": mistyped},
        text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    pages = spark_ui_pages(ui_port, ingest)
    ingest.terminate()  # it finishes its commit and exits 0
    out, err = ingest.communicate(timeout=120)
    assert ingest.returncode == 0, err
    outputs += [out, err, *pages]
    assert any("spark.app.name" in page for page in pages)  # the environment page was read
    zync("-v", "run", str(spec), "--no-dagster")
    zync("consume", "-t", f"{topic}_out", "--from-beginning", "--exit-after", "2s")
    zync("-v", "info", "-t", topic)
    zync("ls")
    zync("status", str(spec), "--format", "json")
    zync("stack", "status")
    zync("pool", "ls")
    outputs.extend(refused.communicate(timeout=60))
    assert refused.returncode == 1
    assert zync("ls", ZYNC_SCHEMA_REGISTRY_PASSWORD=mistyped).returncode == 1

    assert "1 records" in "".join(outputs) or "sent" in "".join(outputs)  # the run did send
    assert [s for s in secrets if any(s in text for text in outputs)] == []
    # The search finds them where they belong: the stack's owner-only credentials.
    assert files_holding(stack.home / "secure", secrets[:1] + secrets[2:3])
    assert files_holding(lake, secrets) == []
    assert files_holding(stack.home / "logs", secrets) == []


def spark_ui_pages(port: int, process: subprocess.Popen) -> list[str]:
    """What Spark's UI shows of a running zync once it ran a query — its environment page,
    jobs and SQL plans with their details — through the UI's REST API (the pages' data)."""
    import json
    import urllib.request

    def get(path: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return reply.read().decode()

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and process.poll() is None:
        try:
            app = json.loads(get("/api/v1/applications"))[0]["id"]
            sql = get(f"/api/v1/applications/{app}/sql?details=true&planDescription=true")
            if json.loads(sql):
                break
        except (OSError, IndexError, ValueError):
            pass
        time.sleep(0.5)
    else:
        process.kill()
        raise AssertionError(f"Spark's UI never showed a query: {process.communicate()}")
    api = f"/api/v1/applications/{app}"
    return [sql, get(f"{api}/environment"), get(f"{api}/jobs"), get("/environment/")]


def test_the_stacks_client_settings_work_from_resources_files(
    secured: Stack, topic: str, tmp_path: Path
) -> None:
    """What `zync stack up --secure` writes, copied to resources/ as its output says, is
    all a user needs: no ZYNC_KAFKA_* or ZYNC_SCHEMA_REGISTRY_* variable set."""
    credentials = local_credentials(secured.home)
    registry = secured.registry_settings
    resources = tmp_path / "resources"
    resources.mkdir()
    mtls = credentials.mtls_client_settings(secured.mtls().bootstrap_servers)
    (resources / "kafka.json").write_text(json.dumps(mtls))
    (resources / "schema_registry.json").write_text(json.dumps(
        {"url": registry.url, "user": registry.user, "password": registry.password,
         "ca_cert_file": registry.ca}))  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZYNC_KAFKA", "ZYNC_SCHEMA"))}
    line = '{"key": {"id": 1}, "value": {"id": 1}}\n'
    produced = run_zync("produce", "-t", topic, env=env, stdin=line, cwd=tmp_path)
    assert produced.returncode == 0, produced.stderr
    consumed = run_zync("consume", "-t", topic, "--from-beginning", "--exit-after", "2s",
                        env=env, cwd=tmp_path)  # fmt: skip
    assert consumed.returncode == 0 and '"id": 1' in consumed.stdout, consumed.stderr


def test_the_tls_probe_tells_tls_listeners_from_a_plaintext_one(secured: Stack) -> None:
    """What picks the advice when a TLS handshake fails: "not this protocol" for a
    plaintext listener, "check the certificates" for a TLS one, also one that demands a
    client certificate the probe does not have."""
    from zync_assets.core.tls_probe import speaks_tls

    def first(settings: KafkaSettings) -> str:
        return settings.bootstrap_servers.split(",")[0]

    assert speaks_tls(first(secured.sasl_ssl()))
    assert speaks_tls(first(secured.mtls()))
    assert not speaks_tls(f"127.0.0.1:{secured.ports.kafka}")
