"""ETL state of one spec in one staging pool, kept in the commit that wrote its outputs.

run       ETL runs committed so far (the Delta txnVersion of app zync-etl/<spec>/<pool>)
cursors   per input topic-partition, the first offset not known to be done: every
          event below it is done (or expired); scans start there
next      per output topic, the offset the next output record gets
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zync_assets.commits import latest_commit, metadata
from zync_assets.ingest.ranges import Offsets, offsets_from_json, offsets_to_json

METADATA_KEY = "zync_etl"


def app_id(spec: str, pool: str) -> str:
    return f"zync-etl/{spec}/{pool}"


@dataclass(frozen=True)
class EtlState:
    run: int = 0
    cursors: Offsets = field(default_factory=dict)
    next_offsets: dict[str, int] = field(default_factory=dict)
    attempt: str | None = None
    version: int | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def cursor(self, topic: str, partition: int) -> int:
        return self.cursors.get(topic, {}).get(partition, 0)


def read_state(path: str, spec: str) -> EtlState:
    commit = latest_commit(path, METADATA_KEY, {"spec": spec})
    if commit is None:
        return EtlState()
    data = commit.data
    return EtlState(
        run=int(data["run"]),
        cursors=offsets_from_json(data["cursors"]),
        next_offsets={k: int(v) for k, v in data["next"].items()},
        attempt=data.get("attempt"),
        version=commit.version,
        details=data,
    )


def state_metadata(
    spec: str, run: int, attempt: str, cursors: Offsets, next_offsets: dict[str, int], **counts: Any
) -> str:
    return metadata(
        METADATA_KEY, spec=spec, run=run, attempt=attempt,
        cursors=offsets_to_json(cursors), next=next_offsets, **counts,
    )  # fmt: skip
