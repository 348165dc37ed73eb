"""State kept in Delta commits: JSON in `userMetadata`, found by scanning recent history.

Ingest progress and ETL cursors live in the commits that wrote the data they
describe, so state and data can never disagree.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from zync_assets.pools import pool_exists

HISTORY_PAGE = 200


@dataclass(frozen=True)
class Commit:
    version: int
    data: dict[str, Any]
    metrics: dict[str, str]


def latest_commit(
    spark: SparkSession, path: str, key: str, match: dict[str, Any] | None = None
) -> Commit | None:
    """The newest commit whose metadata has `key` (with fields equal to `match`), if any."""
    if not pool_exists(path):
        return None
    table = DeltaTable.forPath(spark, path)
    for limit in (HISTORY_PAGE, None):  # recent history first; all of it if need be
        history = table.history(limit) if limit else table.history()
        rows = (
            history.where(f"userMetadata LIKE '%\"{key}\"%'")
            .orderBy("version", ascending=False)
            .select("version", "userMetadata", "operationMetrics")
            .collect()
        )
        for row in rows:
            data = json.loads(row.userMetadata).get(key, {})
            if all(data.get(k) == v for k, v in (match or {}).items()):
                return Commit(row.version, data, row.operationMetrics or {})
        if limit is None or history.count() < limit:
            return None
    return None


def metadata(key: str, **fields: Any) -> str:
    return json.dumps({key: fields})
