"""A lake table's state, kept in the commit that applied the changes it describes.

run      passes committed so far (the Delta txnVersion of app zync-table/<table>)
cursors  per source topic-partition, the first offset not yet applied: a pass reads the
         source pool from there, so a table is exactly once like the pools it reads
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zync_assets.commits import latest_commit, metadata
from zync_assets.ingest.ranges import Offsets, offsets_from_json, offsets_to_json

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
