"""The soak, short: one minute of changes while the pipeline is killed -9 at random beside
a second pipeline that is never killed, both compacting after every commit, then every
offset and every change reconciled (support/soak.py; bench/soak.py runs it longer, one
pipeline, and its figures are in docs/RELIABILITY.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from zync_assets.kafka.registry import Registry
from zync_assets_tests.conftest import Stack
from zync_assets_tests.support.soak import run_soak

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.timeout(600)
def test_a_one_minute_soak_with_kills_reconciles_every_offset(stack: Stack, tmp_path: Path):
    # A kill every 12-18 s: at least 3 in the minute, some while Spark starts, some mid-pass.
    # The rival writes every pool and the lake table too (its tables in a loop of their own),
    # and compaction after every commit races both writers and the kills.
    registry = Registry(stack.registry_settings)
    soak, figures = run_soak(
        stack.kafka, registry, 1, tmp_path, kill_every=(12, 18), rival=True,
        pipeline_args=("--tables-loop", "--compact-every", "1"),
    )  # fmt: skip
    assert len(soak.kills) >= 3, f"{len(soak.kills)} kills: the soak proved too little"
    assert soak.rival_run is not None and soak.rival_run.returncode == 0, "the rival failed"
    assert figures["raw_compactions"] > 0, "no compaction raced the writers"
    assert figures["records_lost"] == 0 and figures["records_duplicated"] == 0, figures
    assert figures["records_reconciled"] == figures["records_produced"] > 0, figures
    assert figures["poison_messages"] > 0 and figures["poison_not_dead_lettered"] == 0, figures
    assert figures["output_records"] == figures["output_records_expected"], figures
    assert figures["table_rows"] > 0 and figures["table_rows_differing"] == 0, figures
    assert figures["done_records"] > 0 and figures["done_records_duplicated"] == 0, figures
    assert figures["lake_table_rows"] > 0 and figures["lake_table_rows_differing"] == 0, figures
