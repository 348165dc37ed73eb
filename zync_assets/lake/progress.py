"""A pool's ingest progress, kept in the Delta commits that wrote the data.

Every ingest commit carries, in its `userMetadata`, the run number and the end
offset of each topic-partition it covered; the commit is also tagged with Delta's
`txnAppId`/`txnVersion` (app `zync-ingest/<pool>`, version = run), so a retried or
concurrent run with the same number can never commit twice. Progress is thus
exactly as durable and atomic as the data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zync_assets.core.offsets import Offsets, offsets_from_json, offsets_to_json
from zync_assets.lake.commits import latest_commit, metadata
from zync_assets.lake.pools import dead_letter_path, pool_exists

METADATA_KEY = "zync_ingest"


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
    return metadata(
        METADATA_KEY, run=run, attempt=attempt, offsets=offsets_to_json(offsets), **details
    )


def read_progress(path: str) -> Progress:
    """Progress recorded by the newest ingest commit of the Delta table at `path`."""
    commit = latest_commit(path, METADATA_KEY)
    if commit is None:
        return Progress()
    return Progress(
        run=int(commit.data["run"]),
        offsets=offsets_from_json(commit.data["offsets"]),
        attempt=commit.data.get("attempt"),
        version=commit.version,
        details=commit.data,
        operation_metrics=commit.metrics,
    )


def recorded_dead_letters(pool: str) -> int | None:
    """How many rows raw pool `pool`'s `<pool>_dlq` holds, as its newest copy recorded
    them (no Spark job); None where no copy recorded it (a copy made before copies
    counted, or a staging pool's `<pool>_dlq` of expired events)."""
    path = dead_letter_path(pool)
    if not pool_exists(path):
        return 0
    copied = read_progress(path)
    total = copied.details.get("dead_letters_total") if copied.run else None
    return None if total is None else int(total)
