"""State kept in Delta commits: JSON in `userMetadata`, found by scanning recent history.

Ingest progress and ETL cursors live in the commits that wrote the data they
describe, so state and data can never disagree.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zync_assets.pools import commit_file, pool_version


@dataclass(frozen=True)
class Commit:
    version: int
    data: dict[str, Any]
    metrics: dict[str, str]


def latest_commit(path: str, key: str, match: dict[str, Any] | None = None) -> Commit | None:
    """The newest commit whose metadata has `key` (with fields equal to `match`), if any.

    Read from the commit files themselves, newest first: the state a pass needs is
    nearly always in the table's newest commit, so this costs a file read or two
    where Delta's history() costs a Spark job over its last commits.
    """
    newest = pool_version(path)
    if newest is None:
        return None
    for version in range(newest, -1, -1):
        info = _commit_info(commit_file(path, version))
        if info is None:
            return None  # older commits were cleaned up (log retention)
        text = info.get("userMetadata") or ""
        if f'"{key}"' not in text:
            continue
        data = json.loads(text).get(key, {})
        if all(data.get(k) == v for k, v in (match or {}).items()):
            return Commit(version, data, info.get("operationMetrics") or {})
    return None


def _commit_info(file: Path) -> dict[str, Any] | None:
    """The commitInfo action of one commit file ({} if it has none; None if no file)."""
    try:
        with file.open() as lines:
            for line in lines:
                if line.startswith('{"commitInfo"'):
                    return json.loads(line)["commitInfo"]
    except FileNotFoundError:
        return None
    return {}


def metadata(key: str, **fields: Any) -> str:
    return json.dumps({key: fields})
