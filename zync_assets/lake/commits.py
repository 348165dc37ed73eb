"""State kept in Delta commits: JSON in `userMetadata`, found by scanning recent history.

Ingest progress and ETL cursors live in the commits that wrote the data they
describe, so state and data can never disagree.

Delta's log retention deletes old commit files, and with them the state of a writer
that has not committed for a while. So maintenance (pipeline/maintenance.py) writes *carry*
commits: the newest state of every writer as of a version `read`. A reader that
meets a carry needs only the commits after `read`: a writer's own commit there is
newer; else the carried copy is its state. A carry is only trusted while every
commit after its `read` is still in the log.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from zync_assets.core.errors import ZyncError
from zync_assets.lake import store as lake_store
from zync_assets.lake.pools import commit_file, pool_version

CARRY_KEY = "zync_carry"
# An ETL pass's state (etl/state.py), whose `next` names every output topic its spec wrote:
# to-kafka reads a staging pool's topics from it.
ETL_STATE_KEY = "zync_etl"


@dataclass(frozen=True)
class Commit:
    version: int
    data: dict[str, Any]
    metrics: dict[str, str]


def latest_commit(
    path: str, key: str, match: dict[str, Any] | None = None, newest: int | None = None
) -> Commit | None:
    """The newest commit whose metadata has `key` (with fields equal to `match`), if any.

    Read from the commit files themselves, newest first (from version `newest`, default
    the table's newest): the state a pass needs is nearly always in the table's newest
    commit or carry, so this costs a file read or two where Delta's history() costs a
    Spark job over its last commits.
    """
    newest = pool_version(path) if newest is None else newest
    if newest is None:
        return None
    carried: tuple[int, Commit | None] | None = None  # (read version, carried state)
    for version in range(newest, -1, -1):
        if carried is not None and version <= carried[0]:
            return carried[1]  # no commit of ours after the carry's read: the carry holds
        info = commit_info(commit_file(path, version))
        if info is None:  # this and older commits were removed by log retention
            raise ZyncError(
                f"{path}: the commit holding its {key} state was removed by log retention "
                "and no carry of it survives; run `zync pool maintain` (or `zync run --follow`) "
                "more often than the retention window (see docs/operations.md#maintenance)"
            )
        entries = user_metadata(info)
        if CARRY_KEY in entries:
            carried = carried or _carried(entries[CARRY_KEY], key, match)
        elif _matches(entries.get(key), match):
            return Commit(version, entries[key], info.get("operationMetrics") or {})
    return carried[1] if carried is not None else None


def newest_states(path: str, read: int) -> dict[str, list[Commit]]:
    """Every writer's newest state as of version `read`: per key, one commit per spec.

    What a carry commit holds. Commits that log retention already removed are
    not there to be read: their writers' states were lost unless an older carry
    holds them (then they are taken from it).
    """
    direct: dict[tuple[str, Any], Commit] = {}
    carried: dict[tuple[str, Any], Commit] = {}
    carried_read = -1  # a carry holds everything up to its read: no need to look below
    for version in range(read, -1, -1):
        if version <= carried_read:
            break
        info = commit_info(commit_file(path, version))
        if info is None:
            break
        entries = user_metadata(info)
        if CARRY_KEY in entries:
            carry = entries[CARRY_KEY]
            if carry["read"] > carried_read:
                carried_read = carry["read"]
                carried = {
                    (key, entry["data"].get("spec")): Commit(entry["version"], entry["data"], {})
                    for key, listed in carry["states"].items()
                    for entry in listed
                }
            continue
        for key, data in entries.items():
            if key.startswith("zync_") and isinstance(data, dict):
                commit = Commit(version, data, info.get("operationMetrics") or {})
                direct.setdefault((key, data.get("spec")), commit)
    states: dict[str, list[Commit]] = {}
    for (key, _spec), commit in (carried | direct).items():
        states.setdefault(key, []).append(commit)
    return states


def carry_metadata(read: int, states: dict[str, list[Commit]]) -> str:
    """A carry commit's metadata: per state key, the newest commits as of version `read`."""
    entries = {key: [{"version": c.version, "data": c.data} for c in commits]
               for key, commits in states.items()}  # fmt: skip
    return json.dumps({CARRY_KEY: {"read": read, "states": entries}})


def _carried(
    carry: dict[str, Any], key: str, match: dict[str, Any] | None
) -> tuple[int, Commit | None]:
    for entry in carry["states"].get(key, []):
        if _matches(entry["data"], match):
            return carry["read"], Commit(entry["version"], entry["data"], {})
    return carry["read"], None


def user_metadata(info: dict[str, Any]) -> dict[str, Any]:
    """A commit's userMetadata as zync writes it: a JSON object ({} for anyone else's)."""
    try:
        parsed = json.loads(info.get("userMetadata") or "{}")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _matches(data: Any, match: dict[str, Any] | None) -> bool:
    return isinstance(data, dict) and all(data.get(k) == v for k, v in (match or {}).items())


def commit_info(file: str) -> dict[str, Any] | None:
    """The commitInfo action of one commit file ({} if it has none; None if no file)."""
    try:
        for line in lake_store.lines(file):
            if line.startswith('{"commitInfo"'):
                return json.loads(line)["commitInfo"]
    except FileNotFoundError:
        return None
    return {}


def metadata(key: str, **fields: Any) -> str:
    return json.dumps({key: fields})
