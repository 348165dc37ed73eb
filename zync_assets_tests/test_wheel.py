"""zync-assets as a library: built into a wheel, installed into a fresh virtualenv outside
the checkout, and run in a host's own Dagster project beside an asset of the host's.

Nothing of the checkout is on the host's path: the virtualenv holds the wheel and its
dependencies (the versions of scripts/constraints.txt), the jar cache is filled by the
wheel's `zync jars`, and zync's Spark functions come from inside the wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from zync_assets_tests.conftest import Stack, produce_json, read_topic, stateless_spec

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # a wheel and a virtualenv: 2+ min

CHECKOUT = Path(__file__).resolve().parent.parent
HOST_PROJECT = Path(__file__).resolve().parent / "host_project"
# What only the local stack and the demo need (the `stack` extra): a library install
# must not pull them. (cryptography and requests are also required by confluent-kafka's
# and Dagster's own dependencies, so they are present either way.)
STACK_ONLY = {"psycopg", "psycopg-binary", "dagster-webserver"}


def run(command: list[str | Path], env: dict[str, str], cwd: Path, timeout: float = 600) -> str:
    done = subprocess.run([str(c) for c in command], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip
    assert done.returncode == 0, f"{command}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with zync-assets installed from the wheel `python -m build`
    makes (from the sdist it makes first); its bin folder."""
    work = tmp_path_factory.mktemp("wheel")
    cache = {"PIP_CACHE_DIR": str(CHECKOUT / ".zync" / "pip-cache"),
             "ZYNC_M2": str(CHECKOUT / ".zync" / "m2")}  # fmt: skip
    env = {**os.environ, **cache}
    run([sys.executable, "-m", "build", "--outdir", work / "dist", CHECKOUT], env, work)
    [wheel] = (work / "dist").glob("zync_assets-*.whl")
    run([sys.executable, "-m", "venv", work / "venv"], env, work)
    pip: list[str | Path] = [work / "venv" / "bin" / "pip", "--disable-pip-version-check", "-q"]
    run([*pip, "install", "--no-compile", "-c", CHECKOUT / "scripts" / "constraints.txt",
         wheel], env, work)  # fmt: skip
    return work / "venv" / "bin"


def test_a_host_project_runs_zync_from_its_wheel(
    venv: Path, stack: Stack, topic: str, tmp_path: Path
) -> None:
    installed = json.loads(run([venv / "pip", "list", "--format=json"], dict(os.environ), tmp_path))
    names = {package["name"].lower() for package in installed}
    assert "zync-assets" in names and "dagster" in names
    assert not names & STACK_ONLY, names & STACK_ONLY

    project = tmp_path / "host"
    shutil.copytree(HOST_PROJECT, project)
    (project / "specs").mkdir()
    stateless_spec(project / "specs" / "orders.yaml", topic, "OrdersRaw", "OrdersStaging",
                   'sql: "in.key AS key, in.after AS value"')  # fmt: skip
    (project / "dagster_home").mkdir()
    env = {
        "PATH": f"{venv}:/usr/bin:/bin", "HOME": str(tmp_path / "home"),
        **{k: os.environ[k] for k in ("JAVA_HOME", "TMPDIR") if k in os.environ},
        "ZYNC_KAFKA_BOOTSTRAP": stack.kafka.bootstrap_servers,
        "ZYNC_SCHEMA_REGISTRY_URL": stack.registry_settings.url,
        "ZYNC_LAKE": str(project / "lake"), "ZYNC_JARS": str(tmp_path / "jars"),
        "DAGSTER_HOME": str(project / "dagster_home"), "HOST_OUT_TOPIC": f"{topic}_out",
    }  # fmt: skip

    fetched = run([venv / "zync", "jars", "--maven-repo", CHECKOUT / ".zync" / "m2"], env, project)
    assert f"spark jars fetched into {tmp_path / 'jars' / 'spark'}" in fetched
    assert str(venv.parent / "lib") in fetched  # zync's functions: the wheel's own jar

    # dg finds the Component through the wheel's entry point, as `dg list components` does.
    registry = run([venv / "python", "-c", "from dagster.components.core.package_entry import "
                    "discover_entry_point_package_objects as found; print(*map(str, found()))"],
                   env, project)  # fmt: skip
    assert "namespace='zync_assets', name='ZyncComponent'" in registry

    lineage = json.loads(run([venv / "python", "lineage.py"], env, project))
    assert lineage["zync_assets"].startswith(str(venv.parent))  # not the checkout's
    parents = lineage["parents"]
    assert parents["order_report"] == [f"kafka/{topic}_out"]
    assert "staging/OrdersStaging" in parents[f"kafka/{topic}_out"]
    assert "raw/OrdersRaw" in parents["staging/OrdersStaging"]
    assert parents["raw/OrdersRaw"] == [f"kafka/{topic}"]

    dagster = [venv / "dagster"]
    definitions = ["-f", "host_project/definitions.py"]
    run([*dagster, "definitions", "validate", *definitions], env, project)

    orders = [({"id": i}, {"before": None, "after": {"id": i, "total": 10 * i}}) for i in range(3)]
    produce_json(stack, topic, orders)
    # One run: zync's raw → staging → kafka assets, then the host's asset after them.
    selection = (f"raw/OrdersRaw,staging/OrdersStaging,done/OrdersStaging,kafka/{topic}_out,"
                 "order_report")  # fmt: skip
    run([*dagster, "asset", "materialize", *definitions, "--select", selection], env, project)
    sent = read_topic(stack, f"{topic}_out")
    assert [r.value for r in sent] == [value["after"] for _, value in orders]
    assert json.loads((project / "report.json").read_text()) == {"orders": len(orders)}
