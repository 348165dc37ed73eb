"""The soak, short: one minute of changes while the pipeline is killed -9 at random, then
every offset and every change reconciled (bench/soak.py; the long run's figures are in
docs/RELIABILITY.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.soak import run_soak
from zync_assets_tests.conftest import Stack

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.timeout(600)
def test_a_one_minute_soak_with_kills_reconciles_every_offset(stack: Stack, tmp_path: Path):
    soak, figures = run_soak(1, tmp_path)  # on the session's stack (its env is set)
    assert soak.kills, "no kill landed: the soak proved nothing"
    assert figures["records_lost"] == 0 and figures["records_duplicated"] == 0, figures
    assert figures["records_reconciled"] == figures["records_produced"] > 0, figures
    assert figures["poison_messages"] > 0 and figures["poison_not_dead_lettered"] == 0, figures
    assert figures["output_records"] == figures["output_records_expected"], figures
    assert figures["table_rows"] > 0 and figures["table_rows_differing"] == 0, figures
