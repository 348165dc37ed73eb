"""State read from Delta commit files directly (no Spark): the newest matching commit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zync_assets.core.errors import ZyncError
from zync_assets.lake.commits import carry_metadata, latest_commit, newest_states
from zync_assets.lake.pools import pool_version


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
    newest = latest_commit(str(table), "zync_etl")
    assert newest is not None and newest.version == 4
    assert latest_commit(str(table), "zync_ingest") is None
    assert latest_commit(str(tmp_path / "Missing"), "zync_etl") is None


def test_a_state_lost_to_log_retention_is_an_error_not_a_fresh_start(tmp_path: Path) -> None:
    table = tmp_path / "Raw"
    for version in range(20, 25):  # versions 0..19 removed by log retention
        commit(table, version, {"zync_ingest": {"run": version}} if version == 20 else None)
    (table / "_delta_log" / "_last_checkpoint").write_text(json.dumps({"version": 20}))
    found = latest_commit(str(table), "zync_ingest")
    assert found is not None and found.version == 20
    with pytest.raises(ZyncError, match=r"removed by log retention.*zync pool maintain"):
        latest_commit(str(table), "zync_etl")  # None would re-read the topics from 0


def carry(table: Path, version: int, read: int) -> None:
    """A carry commit as maintenance writes it: the newest states as of `read`."""
    states = newest_states(str(table), read)
    log = table / "_delta_log"
    info = {
        "timestamp": version,
        "operation": "WRITE",
        "userMetadata": carry_metadata(read, states),
    }
    (log / f"{version:020d}.json").write_text(json.dumps({"commitInfo": info}) + "\n")


def test_a_carry_stands_in_for_commits_that_log_retention_removed(tmp_path: Path) -> None:
    table = tmp_path / "Staging"
    commit(table, 0, {"zync_etl": {"spec": "idle", "run": 1}})
    commit(table, 1, {"zync_etl": {"spec": "busy", "run": 1}})
    commit(table, 2, {"zync_etl": {"spec": "busy", "run": 2}})
    commit(table, 3, {"zync_etl": {"spec": "busy", "run": 3}})  # raced the carry's read
    carry(table, 4, read=2)
    commit(table, 5, {"zync_etl": {"spec": "busy", "run": 4}})
    for version in range(3):  # log retention removes 0..2
        (table / "_delta_log" / f"{version:020d}.json").unlink()
    (table / "_delta_log" / "_last_checkpoint").write_text(json.dumps({"version": 3}))

    def run_of(spec: str, newest: int | None = None) -> int | None:
        found = latest_commit(str(table), "zync_etl", {"spec": spec}, newest)
        return None if found is None else found.data["run"]

    assert run_of("idle") == 1  # only the carry still holds it
    assert run_of("busy") == 4
    assert run_of("busy", newest=4) == 3  # committed after the carry's read: newer than it
    assert run_of("new") is None  # the carry says it had no state: no error, no deeper look
    states = newest_states(str(table), 5)
    assert sorted((c.data["spec"], c.data["run"]) for c in states["zync_etl"]) == [
        ("busy", 4),
        ("idle", 1),
    ]


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
