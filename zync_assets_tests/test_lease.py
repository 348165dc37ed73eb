"""Pipeline leases: which live `zync run --follow` feeds a pool (Dagster's sensors ask)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from zync_assets.lake.lease import LEASE_TTL_S, PipelineLeases, pipeline_feeding


def test_a_pipeline_lease_names_a_live_pipeline_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZYNC_LAKE", str(tmp_path))
    leases = PipelineLeases(["Raw", "Staging"], ["invoices"])
    assert pipeline_feeding("Raw") is None
    leases.beat()
    feeder = pipeline_feeding("Raw")
    assert feeder is not None and feeder.pid == os.getpid() and feeder.specs == ["invoices"]
    assert leases.others() == []  # our own lease is not another pipeline's

    stale = json.loads((tmp_path / ".pipelines" / "Raw.json").read_text())
    stale["heartbeat"] = time.time() - LEASE_TTL_S - 1
    (tmp_path / ".pipelines" / "Raw.json").write_text(json.dumps(stale))
    assert pipeline_feeding("Raw") is None  # a pipeline that stopped beating

    dead = {**stale, "heartbeat": time.time(), "pid": 2**22 + 12345}
    (tmp_path / ".pipelines" / "Raw.json").write_text(json.dumps(dead))
    assert pipeline_feeding("Raw") is None  # killed -9: its pid is gone

    assert pipeline_feeding("Staging") is not None
    leases.release()
    assert pipeline_feeding("Staging") is None
