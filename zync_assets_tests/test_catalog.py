"""Lake tables in a catalog: Spark's Hive catalog over the stack's metastore (Derby's
network server), so that a Spark session zync did not make reads them by name while the
pipeline that writes them runs, a table created mid-run included; `zync query` reads them
from there; `zync catalog sync` registers a lake's pools and drops what is gone."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from zync_assets.stack.metastore import launch_metastore, metastore_url
from zync_assets_tests.conftest import Stack, free_port, produce_json, run_zync
from zync_assets_tests.test_debezium_restarts import Stage

pytestmark = pytest.mark.integration

# A Spark session as a user's notebook would make it: Delta, and the catalog's metastore.
# Nothing of zync's but the jar cache's folder.
NOTEBOOK = """
import glob, json, sys
from pyspark.sql import SparkSession
url, jars, client, *queries = sys.argv[1:]
spark = (SparkSession.builder.master("local[1]")
    .config("spark.jars", ",".join(glob.glob(jars + "/*.jar")))
    .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
    .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
    .config("spark.sql.catalogImplementation", "hive")
    .config("spark.hadoop.javax.jdo.option.ConnectionURL", url)
    .config("spark.hadoop.javax.jdo.option.ConnectionDriverName", "org.apache.derby.jdbc.ClientDriver")
    .config("spark.driver.extraClassPath", client)
    .config("spark.ui.enabled", "false")
    .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
print(json.dumps([[list(r) for r in spark.sql(sql).collect()] for sql in queries]))
"""


@pytest.fixture(scope="module")
def metastore(stack: Stack) -> str:
    """The stack's metastore on a port of its own (stopped with the stack)."""
    port = free_port()
    launch_metastore(stack.home, port)()
    return metastore_url(port)


# zync's commands one after another in one process (support/in_process.py's way, the CLI's
# own `main`), as a user would type them, but over one JVM with Hive's client (each is
# 20-40 s of a loaded machine's start-up): each step is a `zync` command line, or
# `["rm", folder]`. Prints each command's exit code and output.
COMMANDS = """
import json, os, sys
from zync_assets.lake.store import delete_tree
from zync_assets_tests.support.in_process import run_in_process
results = []
for step in json.loads(sys.argv[1]):
    if step[0] == "rm":
        delete_tree(step[1])
        continue
    done = run_in_process(step, dict(os.environ), None)
    results.append([done.returncode, done.stdout, done.stderr])
print(json.dumps(results))
"""


def commands(env: dict[str, str], *steps: list[str]) -> list[tuple[int, str, str]]:
    """Each `zync` step's (exit code, stdout, stderr), all run by one process."""
    done = subprocess.run([sys.executable, "-c", COMMANDS, json.dumps(steps)],
                          capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return [tuple(r) for r in json.loads(done.stdout.strip().splitlines()[-1])]


def simple(n: int, start: int = 0) -> list:
    return [({"id": i}, {"op": "c", "after": {"id": i, "v": f"v{i}"}}) for i in range(start, n)]


def notebook(url: str, *queries: str) -> list[list[list]]:
    """Each query's rows, read by a Spark session of its own process."""
    from zync_assets.core.locations import jars_dir
    from zync_assets.spark.catalog import derby_client_jar

    done = subprocess.run(
        [sys.executable, "-c", NOTEBOOK, url, str(jars_dir() / "spark"), derby_client_jar(), *queries],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def wait_for(done, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "the pipeline never got that far"
        time.sleep(1)


@pytest.mark.timeout(900)
def test_a_notebook_reads_lake_tables_by_name_while_the_pipeline_writes_them(
    stack: Stack, metastore: str, tmp_path: Path
) -> None:
    prefix = f"cat{uuid.uuid4().hex[:6]}"
    database = f"db_{prefix}"
    topic = {t: f"{prefix}.public.{t}" for t in ("a", "b", "c")}
    produce_json(stack, topic["a"], simple(3))
    produce_json(stack, topic["b"], simple(2))
    spec = tmp_path / "whole.yaml"
    spec.write_text(
        f"inputs:\n  - {{topics: '{prefix}\\.public\\..*', pool: Whole}}\n"
        f"tables:\n  - {{topics: '{prefix}\\.public\\..*', name: '{{table}}'}}\n"
    )
    lake = tmp_path / "lake"
    env = stack.env(ZYNC_LAKE=str(lake), ZYNC_METASTORE=metastore,
                    ZYNC_CATALOG_DATABASE=database, ZYNC_DISCOVERY_INTERVAL="1s")  # fmt: skip
    env.pop("ZYNC_SPARK_MASTER", None)
    pipeline = Stage("run", ["run", "--follow", "--no-dagster", "--interval", "1s", str(spec)],
                     env, tmp_path)  # fmt: skip
    pipeline.ensure_running()
    try:
        wait_for(lambda: "table b: run 1" in pipeline.log.read_text())
        produce_json(stack, topic["c"], simple(4))  # a table created in the database mid-run
        produce_json(stack, topic["a"], simple(5, start=3))
        wait_for(
            lambda: all(f"table {t}" in pipeline.log.read_text() for t in ("a: run 2", "c: run 1"))
        )
        # While the pipeline holds the metastore too: a process of its own reads by name.
        rows, counted = notebook(
            metastore, f"SELECT id, v FROM {database}.a ORDER BY id",
            f"SELECT count(*) FROM {database}.c",
        )  # fmt: skip
    finally:
        pipeline.stop()
    assert rows == [[i, f"v{i}"] for i in range(5)]
    assert counted == [[4]]

    # A lake table removed by hand: its entry is stale until pruned; pools on request. Then
    # `c` read by its bare name: the catalog's table (a query's own views of the pools
    # would stand in `catalog ls` of the same process, so it comes last).
    synced, ls_run, queried = commands(
        env, ["rm", str(lake / "_tables" / "b")], ["catalog", "sync", "--pools", "--prune"],
        ["catalog", "ls", "--pools"], ["query", "SELECT count(*) AS n FROM c"],
    )  # fmt: skip
    assert synced[0] == 0, synced[2]
    assert f"dropped {database}.b" in synced[1]
    assert f"registered {database}_pools.Whole" in synced[1]
    assert queried[0] == 0, queried[2]
    assert json.loads(queried[1]) == {"n": 4}
    assert ls_run[0] == 0, ls_run[2]
    listed = ls_run[1].splitlines()
    assert [line.split()[0] for line in listed] == [
        f"{database}.a", f"{database}.c", f"{database}_pools.Whole".lower(),
    ]  # fmt: skip
    assert listed[0].split()[1] == f"file:{lake}/_tables/a"


def test_a_metastore_that_is_down_is_one_line_with_what_to_do(stack: Stack, tmp_path: Path) -> None:
    down = f"jdbc:derby://127.0.0.1:{free_port()}/metastore;create=true"
    env = stack.env(ZYNC_LAKE=str(tmp_path / "lake"), ZYNC_METASTORE=down)
    env.pop("ZYNC_SPARK_MASTER", None)
    done = run_zync("catalog", "ls", env=env, process=True, timeout=240)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"zync: error: the catalog's metastore at {down} (ZYNC_METASTORE) did not answer: start "
        "it (`zync stack up --catalog` starts the local one), or unset ZYNC_METASTORE to keep "
        "the lake without a catalog"
    ]


@pytest.mark.parametrize(
    ("setting", "value", "says"),
    [
        ("ZYNC_METASTORE", "derby:/tmp/metastore", "give the metastore database's JDBC URL"),
        ("ZYNC_CATALOG_DATABASE", "my-lake", "give a database name of letters, digits and _"),
    ],
)
def test_a_bad_catalog_setting_is_one_line(
    tmp_path: Path, setting: str, value: str, says: str
) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ZYNC_METASTORE": "jdbc:derby://x/y"}
    done = run_zync("query", "SELECT 1", env={**env, setting: value}, process=True)
    assert done.returncode != 0
    (line,) = done.stderr.strip().splitlines()
    assert setting in line and says in line, line
