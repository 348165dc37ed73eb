"""A stage that failed for one lake table or one spec, while the rest of the pipeline went on.

A continuous pipeline contains such a failure (run.py): the failing table or spec
stops, the others and the warehouse path keep running. Its one-line reason is kept in
the lake (`_failing/<what>.json`, a small file replaced whole) so that `zync status`
and Dagster show it from any process; the next pass of it that commits clears it.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass

from zync_assets.core.errors import ZyncError, first_line
from zync_assets.lake import store as lake_store
from zync_assets.lake.pools import FAILING_FOLDER, lake_entry


@dataclass(frozen=True)
class Failure:
    what: str  # "table invoices", "spec shop"
    message: str  # one line: what went wrong and what to do
    at: dt.datetime


def _location(what: str) -> str:
    kind, _, name = what.partition(" ")
    return lake_entry(FAILING_FOLDER, f"{kind}-{name}.json")


def explain(exc: BaseException) -> str:
    """One line for a failure: a ZyncError says it already; anything else is named with the
    first line of its message (a JVM's stack trace left out)."""
    if isinstance(exc, ZyncError):
        return str(exc)
    return f"{type(exc).__name__}: {first_line(exc)}"


def record_failure(what: str, message: str, now: dt.datetime) -> None:
    text = json.dumps({"what": what, "message": message, "at": now.isoformat()})
    lake_store.write_text(_location(what), text)


def clear_failure(what: str) -> None:
    lake_store.delete_file(_location(what))


def read_failure(what: str) -> Failure | None:
    text = lake_store.read_text(_location(what))
    if not text:
        return None
    data = json.loads(text)
    return Failure(data["what"], data["message"], dt.datetime.fromisoformat(data["at"]))
