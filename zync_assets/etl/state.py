"""ETL state of one spec in one staging pool, kept in the commit that wrote its outputs.

run       ETL runs committed so far (the Delta txnVersion of app zync-etl/<spec>/<pool>)
cursors   per input topic-partition, the first offset not known to be done: every
          event below it is done (or expired); scans start there
next      per output topic, the offset the next output record gets

and what `zync status` and Dagster's checks show, as the pass left it (PassFigures): the
events it held back, the oldest of them, the source transactions it waits on, the
events it has expired in all, and the raw pools' offsets it read to. Read from the
commit file, they answer without a Spark job while no event has come in since.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from zync_assets.core.offsets import Offsets, offsets_from_json, offsets_to_json
from zync_assets.lake.commits import ETL_STATE_KEY, latest_commit, metadata

METADATA_KEY = ETL_STATE_KEY


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


@dataclass(frozen=True)
class PassFigures:
    """What the pass that committed `state` held back, as it recorded it."""

    pending: int
    oldest_pending: dt.datetime | None
    open_transactions: int
    oldest_open_transaction: dt.datetime | None
    expired_total: int | None  # None: an earlier pass did not count its expired events
    raw_seen: Offsets  # the raw pools' end offsets the pass read to


def pass_figures(state: EtlState) -> PassFigures | None:
    """The figures the state's pass recorded; None before any pass, or for a pass made
    before passes recorded them."""
    data = state.details
    if "raw_seen" not in data:
        return None
    return PassFigures(
        pending=int(data.get("pending", 0)),
        oldest_pending=_time(data.get("oldest_pending")),
        open_transactions=int(data.get("open_transactions", 0)),
        oldest_open_transaction=_time(data.get("oldest_open_transaction")),
        expired_total=data.get("expired_total"),
        raw_seen=offsets_from_json(data["raw_seen"]),
    )


def figures_metadata(
    previous: EtlState, *, pending: int, oldest_pending: dt.datetime | None,
    open_transactions: int, oldest_open_transaction: dt.datetime | None, expired: int,
    raw_seen: Offsets,
) -> dict[str, Any]:  # fmt: skip
    """A pass's PassFigures as state_metadata's fields; `previous`: the state it started
    from (its expired total goes on; before any pass, 0)."""
    total = 0 if previous.run == 0 else previous.details.get("expired_total")
    return {
        "pending": pending,
        "oldest_pending": _iso(oldest_pending),
        "open_transactions": open_transactions,
        "oldest_open_transaction": _iso(oldest_open_transaction),
        "expired_total": None if total is None else int(total) + expired,
        "raw_seen": offsets_to_json(raw_seen),
    }


def _iso(moment: dt.datetime | None) -> str | None:
    """UTC, with its zone: Spark hands timestamps back without one (the session's zone
    is UTC), and a reader compares them with aware times."""
    if moment is None:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)).isoformat()


def _time(text: str | None) -> dt.datetime | None:
    return None if text is None else dt.datetime.fromisoformat(text)
