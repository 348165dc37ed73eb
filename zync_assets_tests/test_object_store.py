"""The lake on an S3 API server (S3Proxy, run by the stack): `ZYNC_LAKE=s3a://bucket/prefix`.
Spark reads and writes it through hadoop-aws, zync's own reads of the lake's small files
go through pyarrow's S3 client; both sign their requests with the server's keys."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from zync_assets.kafka.registry import Registry
from zync_assets_tests.conftest import (
    DEMO_TABLES,
    Cluster,
    ObjectStore,
    Stack,
    read_topic,
    rebuild_table,
    run_zync,
    zync_ok,
)
from zync_assets_tests.test_cluster import apps_run

pytestmark = pytest.mark.integration

INVOICES = Path(__file__).parent.parent / "etl_specs" / "invoices.yaml"


@pytest.mark.slow
def test_the_invoice_demo_on_the_cluster_with_its_lake_on_s3_gives_zyncs_exact_results(
    stack: Stack, object_store: ObjectStore, spark_cluster: Cluster, tmp_path: Path
) -> None:
    """`zync run` (ingest → ETL → to-kafka in one driver) on the standalone cluster: the
    executors decode, transform and write the data files to S3, the driver commits.
    (Local mode with an S3 lake takes the same code path in one JVM. One run of all four
    batches: a run that starts from committed pools is every other test's subject.)"""
    from zync_assets.demo.invoices import produce_batch, reset

    lake = object_store.lake(f"lake-{uuid.uuid4().hex[:8]}")
    env = stack.env(ZYNC_LAKE=lake, ZYNC_SPARK_MASTER=spark_cluster.url, **object_store.env)
    reset(stack.kafka)
    registry = Registry(stack.registry_settings)
    before = apps_run(spark_cluster)
    for batch in (1, 2, 3, 4):
        produce_batch(batch, stack.kafka, registry)
    zync_ok("run", str(INVOICES), env=env, cwd=tmp_path)
    table = rebuild_table(read_topic(stack, "NewInvoices"), "ID")
    assert {
        k: (v["customer"], v["item"], v["invoice_status"]) for k, v in table.items()
    } == DEMO_TABLES[4]
    assert len(apps_run(spark_cluster) - before) == 1, "the run did not go to the cluster"
    listed = zync_ok("pool", "ls", env=env, cwd=tmp_path)  # zync's own reads of the lake
    assert listed.splitlines() == ["Raw  version 0", "Staging  version 0"]
    assert list(tmp_path.iterdir()) == [], "something was written beside the lake, not in it"


def test_object_store_refusals_are_one_line_each(
    stack: Stack, object_store: ObjectStore, tmp_path: Path
) -> None:
    endpoint = object_store.env["ZYNC_S3_ENDPOINT"]
    cases = {
        "wrong secret": ({"AWS_SECRET_ACCESS_KEY": "not-the-secret"}, object_store.lake("x"),
                         f"zync: error: the lake's object store at {endpoint} refused the "
                         f"credentials for {object_store.lake('x')}; check AWS_ACCESS_KEY_ID "
                         "and AWS_SECRET_ACCESS_KEY"),
        "no server": ({"ZYNC_S3_ENDPOINT": "http://127.0.0.1:9"}, object_store.lake("x"),
                      "zync: error: the lake's object store at http://127.0.0.1:9 does not "
                      "answer; start it (or set ZYNC_S3_ENDPOINT to where it listens) and "
                      "run again"),
        "no bucket": ({}, "s3a://no-such-bucket/lake",
                      f"zync: error: the lake's bucket 'no-such-bucket' does not exist at "
                      f"{endpoint}; create it or correct ZYNC_LAKE"),
    }  # fmt: skip
    for name, (changes, lake, expected) in cases.items():
        env = stack.env(ZYNC_LAKE=lake, **{**object_store.env, **changes})
        for command in (["pool", "ls"], ["status", str(INVOICES)]):
            done = run_zync(*command, env=env, cwd=tmp_path)
            assert done.returncode == 1, (name, command, done.stdout)
            assert done.stderr.strip() == expected, (name, command)
