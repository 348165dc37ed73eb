"""A lake table's state, kept in the commit that applied the changes it describes.

run      passes committed so far (the Delta txnVersion of app zync-table/<table>)
cursors  per source topic-partition, the first offset not yet applied: a pass reads the
         source pool from there, so a table is exactly once like the pools it reads
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zync_assets.core.offsets import Offsets, offsets_from_json, offsets_to_json
from zync_assets.etl.state import read_state
from zync_assets.lake.commits import commit_info, latest_commit, metadata, user_metadata
from zync_assets.lake.pools import commit_file, pool_exists, pool_path, pool_version
from zync_assets.lake.progress import read_progress
from zync_assets.specs.model import Spec
from zync_assets.specs.tables import TableDef

METADATA_KEY = "zync_table"


def app_id(table: str) -> str:
    return f"zync-table/{table}"


def changes_app_id(table: str) -> str:
    return f"zync-table-changes/{table}"


@dataclass(frozen=True)
class TableState:
    run: int = 0
    cursors: Offsets = field(default_factory=dict)
    attempt: str | None = None
    version: int | None = None  # the table version that holds this state
    details: dict[str, Any] = field(default_factory=dict)

    def cursor(self, topic: str, partition: int) -> int:
        return self.cursors.get(topic, {}).get(partition, 0)


def read_table_state(path: str, table: str) -> TableState:
    commit = latest_commit(path, METADATA_KEY, {"table": table})
    if commit is None:
        return TableState()
    data = commit.data
    return TableState(
        run=int(data["run"]),
        cursors=offsets_from_json(data["cursors"]),
        attempt=data.get("attempt"),
        version=commit.version,
        details=data,
    )


def table_metadata(table: str, run: int, attempt: str, cursors: Offsets, **counts: Any) -> str:
    return metadata(
        METADATA_KEY, table=table, run=run, attempt=attempt, cursors=offsets_to_json(cursors),
        **counts,
    )  # fmt: skip


@dataclass(frozen=True)
class TableVersion:
    """One commit of a table, as `zync table history` shows it."""

    version: int
    timestamp: int  # ms since the epoch
    operation: str
    run: int | None  # the table pass that made it (None: schema changes, maintenance)
    cursors: Offsets
    counts: dict[str, int]


def table_history(path: str, table: str) -> list[TableVersion]:
    """Every commit still in the table's log, oldest first, read from the commit files."""
    newest = pool_version(path)
    versions = []
    for version in range(0, -1 if newest is None else newest + 1):
        info = commit_info(commit_file(path, version))
        if info is None:
            continue  # removed by log retention
        data = user_metadata(info).get(METADATA_KEY) or {}
        counts = {
            k: v
            for k, v in data.items()
            if k in ("read", "upserts", "deletes", "ignored", "truncates")
        }
        versions.append(TableVersion(
            version, int(info.get("timestamp", 0)), str(info.get("operation", "")),
            data.get("run"), offsets_from_json(data.get("cursors", {})), counts,
        ))  # fmt: skip
    return versions


def source_ends(spec: Spec, table: TableDef) -> Offsets | None:
    """Per source partition, the end of what the source pool has committed (None: no pool
    yet), read from its commit files: no Spark job."""
    path = pool_path(table.source_pool)
    if not pool_exists(path):
        return None
    if table.from_staging:
        return {table.source: {0: read_state(path, spec.name).next_offsets.get(table.source, 0)}}
    return {table.source: dict(read_progress(path).offsets.get(table.source, {}))}
