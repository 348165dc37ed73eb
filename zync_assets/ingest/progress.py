"""A pool's ingest progress, kept in the Delta commits that wrote the data.

Every ingest commit carries, in its `userMetadata`, the run number and the end
offset of each topic-partition it covered; the commit is also tagged with Delta's
`txnAppId`/`txnVersion` (app `zync-ingest/<pool>`, version = run), so a retried or
concurrent run with the same number can never commit twice. Progress is thus
exactly as durable and atomic as the data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from zync_assets.ingest.ranges import Offsets, offsets_from_json, offsets_to_json
from zync_assets.pools import pool_exists

METADATA_KEY = "zync_ingest"
HISTORY_PAGE = 100


def app_id(pool: str) -> str:
    return f"zync-ingest/{pool}"


@dataclass(frozen=True)
class Progress:
    """What the newest ingest commit of a table recorded (run 0: nothing yet)."""

    run: int = 0
    offsets: Offsets = field(default_factory=dict)
    attempt: str | None = None
    version: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    operation_metrics: dict[str, str] | None = None


def commit_metadata(run: int, attempt: str, offsets: Offsets, **details: Any) -> str:
    return json.dumps(
        {
            METADATA_KEY: {
                "run": run,
                "attempt": attempt,
                "offsets": offsets_to_json(offsets),
                **details,
            }
        }
    )


def read_progress(spark: SparkSession, path: str) -> Progress:
    """Progress recorded by the newest ingest commit of the Delta table at `path`."""
    if not pool_exists(path):
        return Progress()
    rows = (
        DeltaTable.forPath(spark, path)
        .history(HISTORY_PAGE)
        .where("userMetadata LIKE '%zync_ingest%'")
        .orderBy("version", ascending=False)
        .select("version", "userMetadata", "operationMetrics")
        .limit(1)
        .collect()
    )
    if not rows:
        return Progress()
    data = json.loads(rows[0].userMetadata)[METADATA_KEY]
    return Progress(
        run=int(data["run"]),
        offsets=offsets_from_json(data["offsets"]),
        attempt=data.get("attempt"),
        version=rows[0].version,
        details=data,
        operation_metrics=rows[0].operationMetrics,
    )
