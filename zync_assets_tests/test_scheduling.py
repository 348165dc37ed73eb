"""Which tests the fast tier keeps, and in which order the suite hands out its work."""

from __future__ import annotations

import pytest

from zync_assets_tests.support import scheduling
from zync_assets_tests.support.scheduling import fast_tier, longest_units_first


def ids(*names: str) -> list[str]:
    return [f"zync_assets_tests/{name}" for name in names]


def test_the_fast_tier_keeps_the_cheapest_tests_that_fit_its_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(scheduling, "FAST_BUDGET_S", 30.0)
    nodeids = ids("test_a.py::t1", "test_a.py::t2", "test_b.py::t3", "test_b.py::t4")
    recorded = {"test_a.py::t1": 12.0, "test_a.py::t2": 3.0, "test_b.py::t3": 10.0,
                "test_b.py::t4": 20.0}  # fmt: skip
    assert fast_tier(nodeids, {}, recorded) == set(ids("test_a.py::t2", "test_b.py::t3",
                                                       "test_a.py::t1"))  # fmt: skip


def test_groups_hand_marked_slow_tests_and_untimed_guesses_count_as_they_should(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(scheduling, "FAST_BUDGET_S", 25.0)
    grouped = "test_cluster.py::t"  # a heavy service's group: never in the fast tier
    nodeids = ids(grouped, "test_a.py::killer", "test_a.py::new", "test_a.py::known")
    marks = {nodeids[1]: {"slow"}, nodeids[2]: {"integration"}}
    recorded = {grouped: 1.0, "test_a.py::killer": 1.0, "test_a.py::known": 4.0}
    # The new test is guessed at GUESS_S["integration"] (20 s): 4 + 20 fits in 25.
    assert fast_tier(nodeids, marks, recorded) == set(ids("test_a.py::known", "test_a.py::new"))
    monkeypatch.setattr(scheduling, "FAST_BUDGET_S", 23.0)
    assert fast_tier(nodeids, marks, recorded) == set(ids("test_a.py::known"))


def test_work_goes_out_longest_unit_first_and_a_group_stays_together() -> None:
    nodeids = ids("test_a.py::short", "test_cluster.py::one", "test_a.py::long",
                  "test_cluster.py::two")  # fmt: skip
    recorded = {"test_a.py::short": 1.0, "test_cluster.py::one": 30.0, "test_a.py::long": 50.0,
                "test_cluster.py::two": 40.0}  # fmt: skip
    assert longest_units_first(nodeids, {}, recorded) == ids(
        "test_cluster.py::one", "test_cluster.py::two", "test_a.py::long", "test_a.py::short"
    )


def test_the_tests_that_run_last_go_out_after_every_other_unit() -> None:
    last = next(iter(scheduling.LAST))  # a real entry: the list the suite orders by
    nodeids = ids("test_a.py::short", last, "test_a.py::long")
    recorded = {"test_a.py::short": 1.0, last: 500.0, "test_a.py::long": 50.0}
    assert longest_units_first(nodeids, {}, recorded) == ids(
        "test_a.py::long", "test_a.py::short", last
    )
