"""Where an ETL pass starts and ends (etl/snapshot.py's Reach): what sizes its Spark
settings, and when it must read the done records of earlier passes."""

from __future__ import annotations

from zync_assets.core.offsets import Offsets, offsets_to_json
from zync_assets.etl.snapshot import Reach
from zync_assets.etl.state import EtlState


def passed(cursors: Offsets, raw_seen: Offsets | None) -> EtlState:
    """The state a pass committed: its cursors and, if it recorded them, its raw_seen."""
    details = {} if raw_seen is None else {"raw_seen": offsets_to_json(raw_seen)}
    return EtlState(run=3, cursors=cursors, details=details)


def test_the_backlog_is_the_raw_events_between_the_cursors_and_the_ends() -> None:
    state = passed({"a": {0: 10, 1: 4}}, {"a": {0: 10, 1: 4}})
    where = Reach(state, {"Raw": {"a": {0: 12, 1: 4, 2: 5}}, "Other": {"b": {0: 7}}})
    # a/0: 2 new; a/1: none; a/2 and b/0 have no cursor yet: all of theirs
    assert where.backlog == 2 + 0 + 5 + 7
    assert where.raw_end == {"a": {0: 12, 1: 4, 2: 5}, "b": {0: 7}}


def test_no_done_records_lie_ahead_while_the_cursors_stand_where_the_last_pass_read_to() -> None:
    seen = {"a": {0: 10, 1: 4}}
    ends = {"Raw": {"a": {0: 15, 1: 9}}}
    assert not Reach(passed(seen, seen), ends).done_ahead
    # A new partition, read by no pass yet: nothing of it is done either.
    assert not Reach(passed(seen, seen), {"Raw": {"a": {0: 15, 1: 9, 2: 3}}}).done_ahead


def test_done_records_may_lie_ahead_of_an_event_the_last_pass_left_pending() -> None:
    # The last pass read a/0 to 10 but left offset 6 pending: 7-9 may be done already.
    state = passed({"a": {0: 6, 1: 4}}, {"a": {0: 10, 1: 4}})
    assert Reach(state, {"Raw": {"a": {0: 15, 1: 9}}}).done_ahead


def test_a_pass_that_did_not_record_how_far_it_read_reads_the_done_records() -> None:
    seen = {"a": {0: 10}}
    assert Reach(passed(seen, None), {"Raw": {"a": {0: 15}}}).done_ahead
    assert Reach(EtlState(), {"Raw": {"a": {0: 15}}}).done_ahead  # no pass yet


def test_a_views_pass_counts_the_row_versions_it_joins_its_changes_with() -> None:
    """10,000 changes to a view over 1,000,000 rows are no small pass: the view's stored
    versions (at most one per event its inputs had) count with its backlog."""
    state = passed({"acc": {0: 1_000_000}, "cus": {0: 5}}, None)
    where = Reach(state, {"Raw": {"acc": {0: 1_010_000}, "cus": {0: 5}, "other": {0: 3}}})
    assert where.backlog == 10_000 + 3
    assert where.size(set()) == where.backlog  # no view: the backlog alone
    assert where.size({"acc", "cus"}) == where.backlog + 1_010_000 + 5
