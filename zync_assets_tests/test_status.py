"""`zync status` and the figures behind it, on a real pool and topic."""

from __future__ import annotations

from pathlib import Path

import pytest

from zync_assets.demo.via_dagster import covers
from zync_assets.status import OutputStatus, PartitionLag, raw_status, staging_status
from zync_assets_tests.conftest import Stack, produce_bytes, produce_json, run_zync

pytestmark = pytest.mark.integration


def test_lag_never_goes_negative_and_coverage_needs_every_partition() -> None:
    assert PartitionLag("t", 0, end=10, cursor=4).lag == 6
    assert PartitionLag("t", 0, end=3, cursor=4).lag == 0  # records deleted by retention
    assert OutputStatus("o", staged=5, sent=2).lag == 3
    assert covers({"a": {0: 3, 1: 2}}, {"a": {0: 3, 1: 2}})
    assert not covers({"a": {0: 3}}, {"a": {0: 3, 1: 1}})


def test_status_shows_lag_pending_dead_letters_and_unsent_records(
    spark, stack: Stack, registry, topic: str, tmp_path: Path, lake: Path
) -> None:
    from zync_assets.etl.run import run_etl
    from zync_assets.ingest.ingest import ingest
    from zync_assets.spec import load_spec

    spec_path = tmp_path / "status.yaml"
    spec_path.write_text(
        f"""
inputs:
  - {{topic: {topic}, pool: StatusRaw}}
outputs:
  - {{topic: {topic}_out, pool: StatusStaging}}
transforms:
  - {{type: stateless, in: {topic}, out: {topic}_out, sql: "in.key AS key, in.value AS value"}}
"""
    )
    produce_json(stack, topic, [({"id": i}, {"n": i}) for i in range(3)])
    produce_bytes(stack, topic, [(None, b"not avro")])
    ingest(spark, "StatusRaw", [topic], stack.kafka, registry)
    run_etl(spark, load_spec(spec_path))
    produce_json(stack, topic, [({"id": 9}, {"n": 9})])  # not ingested yet

    raw = raw_status(spark, stack.kafka, "StatusRaw", [topic])
    assert (raw.lag, raw.dead_letters) == (1, 1)
    (staging,) = [staging_status(spark, stack.kafka, load_spec(spec_path), "StatusStaging")]
    assert (staging.lag, staging.pending, staging.expired) == (0, 0, 0)
    assert staging.outputs == [OutputStatus(f"{topic}_out", staged=3, sent=0)]

    env = stack.env(ZYNC_LAKE=str(lake), COLUMNS="250")  # no wrapped table cells
    shown = run_zync("status", str(spec_path), env=env, timeout=300)
    assert shown.returncode == 0, shown.stderr
    row = next(line for line in shown.stdout.splitlines() if f"{topic}[0]" in line)
    end, cursor, lag, dead = (cell.strip() for cell in row.split("│")[3:7])
    assert (end, cursor, lag, dead) == ("5", "4", "1", "1")
