"""How long a refused connection takes to become its one line: `zync info` against the
stack's secured doors with each mistake a user makes (a wrong password, the wrong CA,
plaintext against TLS, no client certificate, and the registry's four), one at a time on
an otherwise idle private stack. The test (test_secure_kafka.py) checks the lines; this
measures the seconds, which a loaded test run cannot.

    python -m bench.refusal_bench
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import publish
from zync_assets.core.settings import KafkaSettings, RegistrySettings, kafka_env, registry_env
from zync_assets.stack.kafka import SecurePorts
from zync_assets.stack.registry import launch_registry, registry_url, secured_registry_settings
from zync_assets.stack.secure import SASL_USER, local_credentials
from zync_assets.stack.services import StackPorts, stack_down, stack_up
from zync_assets_tests.support.ports import free_port

ZYNC = str(Path(sys.executable).with_name("zync"))
TARGET_S = 30.0  # what a user waits for a refusal, at most


def cases(home: Path, ports: StackPorts, registry: RegistrySettings) -> dict[str, dict[str, str]]:
    """Each mistake → the environment of a `zync info` that makes it."""
    assert ports.secure is not None
    credentials = local_credentials(home)
    sasl = KafkaSettings(f"127.0.0.1:{ports.secure.sasl_ssl}", "SASL_SSL", "SCRAM-SHA-512",
                         SASL_USER, credentials.password(), str(credentials.ca))  # fmt: skip
    mtls = KafkaSettings(f"127.0.0.1:{ports.secure.mtls}", "SSL", ssl_ca=str(credentials.ca))
    stranger = str(local_credentials(Path(tempfile.mkdtemp()) / "elsewhere").ca)
    kafka = {
        "wrong password": dataclasses.replace(sasl, sasl_password="not-it"),
        "wrong user": dataclasses.replace(sasl, sasl_mechanism="PLAIN", sasl_username="mallory"),
        "unknown CA": dataclasses.replace(sasl, ssl_ca=stranger),
        "plaintext to TLS": KafkaSettings(sasl.bootstrap_servers),
        "no client certificate": mtls,
    }
    registries = {
        "registry: wrong password": dataclasses.replace(registry, password="not-it"),
        "registry: no password": dataclasses.replace(registry, user=None, password=None),
        "registry: unknown CA": dataclasses.replace(registry, ca=stranger),
        "registry: http to https": dataclasses.replace(
            registry, url=registry.url.replace("https", "http")),
    }  # fmt: skip
    plain = {**os.environ, **kafka_env(KafkaSettings(f"127.0.0.1:{ports.kafka}"))}
    found = {name: {**plain, **kafka_env(s), **registry_env(registry)} for name, s in kafka.items()}
    for name, settings in registries.items():
        env = {**plain, **registry_env(settings)}
        env.update({k: "" for k in registry_env(registry) if k not in registry_env(settings)})
        found[name] = env
    return found


def refusal_seconds(env: dict[str, str], registry_case: bool) -> tuple[float, str]:
    """Seconds until `zync info` (or, for the registry, `consume`, which asks it) exits 1."""
    command = [ZYNC, "info", "-t", "refused"]
    if registry_case:
        command = [ZYNC, "consume", "-t", "refused", "--from-beginning", "--exit-after", "2s"]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - started
    lines = done.stderr.strip().splitlines()
    if done.returncode != 1 or len(lines) != 1:
        raise RuntimeError(f"{command}: exit {done.returncode}, {done.stderr[-1000:]}")
    return round(seconds, 1), lines[0]


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="zync-refusal-"))
    home, registry_home = work / ".zync", work / "secured" / ".zync"
    ports = StackPorts(free_port(), free_port(), free_port(), free_port(),
                       SecurePorts(free_port(), free_port()))  # fmt: skip
    try:
        stack_up(ports, home)
        port = free_port()
        launch_registry(registry_home, port, free_port(), secure=True)()
        registry = secured_registry_settings(registry_home, port)
        env = {**os.environ, "ZYNC_KAFKA_BOOTSTRAP": f"127.0.0.1:{ports.kafka}",
               "ZYNC_SCHEMA_REGISTRY_URL": registry_url(ports.registry)}  # fmt: skip
        subprocess.run([ZYNC, "produce", "-t", "refused"], input='{"value": {"n": 1}}\n',
                       env=env, check=True, capture_output=True, text=True)  # fmt: skip
        seconds = {
            name: refusal_seconds(case, name.startswith("registry"))
            for name, case in cases(home, ports, registry).items()
        }
    finally:
        stack_down(registry_home)
        stack_down(home)
    worst = max(s for s, _ in seconds.values())
    rows = "\n".join(f"| {name} | {s} | {line[:90]} |" for name, (s, line) in seconds.items())
    table = (
        f"\n## Refused connections\n\nEach mistake alone, on an idle private stack: seconds "
        f"until `zync` exits 1 with its one line (target ≤ {TARGET_S:g} s; worst {worst} s).\n\n"
        f"| mistake | seconds | the line |\n|---|---|---|\n{rows}\n"
    )
    publish("refusal", table, {"seconds": {n: s for n, (s, _) in seconds.items()},
                               "worst_s": worst, "target_s": TARGET_S})  # fmt: skip
    print(json.dumps({"worst_s": worst}))


if __name__ == "__main__":
    main()
