"""State read from Delta commit files directly (no Spark): the newest matching commit."""

from __future__ import annotations

import json
from pathlib import Path

from zync_assets.commits import latest_commit
from zync_assets.pools import pool_version


def commit(table: Path, version: int, metadata: dict | None = None, adds: int = 2) -> None:
    """A commit file as Delta writes it: commitInfo first, then its actions."""
    log = table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    info = {"timestamp": version, "operation": "WRITE", "operationMetrics": {"numOutputRows": "3"}}
    if metadata is not None:
        info["userMetadata"] = json.dumps(metadata)
    lines = [{"commitInfo": info}] + [{"add": {"path": f"part-{version}-{i}"}} for i in range(adds)]
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def test_the_newest_commit_with_the_key_and_match_wins(tmp_path: Path) -> None:
    table = tmp_path / "Staging"
    commit(table, 0, {"zync_etl": {"spec": "a", "run": 1}})
    commit(table, 1, {"zync_etl": {"spec": "b", "run": 1}})
    commit(table, 2, {"zync_etl": {"spec": "a", "run": 2}})
    commit(table, 3)  # e.g. an OPTIMIZE: no userMetadata
    commit(table, 4, {"zync_etl": {"spec": "b", "run": 2}})
    found = latest_commit(str(table), "zync_etl", {"spec": "a"})
    assert found is not None and (found.version, found.data["run"]) == (2, 2)
    assert found.metrics == {"numOutputRows": "3"}
    assert latest_commit(str(table), "zync_etl").version == 4
    assert latest_commit(str(table), "zync_ingest") is None
    assert latest_commit(str(tmp_path / "Missing"), "zync_etl") is None


def test_a_cleaned_up_log_ends_the_search(tmp_path: Path) -> None:
    table = tmp_path / "Raw"
    for version in range(20, 25):  # versions 0..19 removed by log retention
        commit(table, version, {"zync_ingest": {"run": version}} if version == 20 else None)
    (table / "_delta_log" / "_last_checkpoint").write_text(json.dumps({"version": 20}))
    assert latest_commit(str(table), "zync_ingest").version == 20
    assert latest_commit(str(table), "zync_etl") is None


def test_the_version_probes_forward_from_the_last_checkpoint(tmp_path: Path) -> None:
    table = tmp_path / "Raw"
    assert pool_version(str(table)) is None
    for version in range(14):
        commit(table, version)
    assert pool_version(str(table)) == 13  # no checkpoint yet: from a listing
    (table / "_delta_log" / "_last_checkpoint").write_text(json.dumps({"version": 10}))
    assert pool_version(str(table)) == 13
    commit(table, 14)
    assert pool_version(str(table)) == 14
