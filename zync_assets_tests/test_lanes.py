"""A loop of passes beside the caller's (follow.Lane), as continuous mode runs the lake
tables: it catches up with everything committed before it is told to finish, stops at
once on a signal, and its failure stops the caller instead of dying unseen."""

from __future__ import annotations

import threading
import time

import pytest

from zync_assets.pipeline.follow import Lane, Turns


class Commits:
    """What a warehouse path commits and what a tables lane has taken of it."""

    def __init__(self, pass_s: float = 0.02) -> None:
        self.committed: list[int] = []
        self.taken: list[int] = []
        self.pass_s = pass_s
        self.lock = threading.Lock()
        self.passing = threading.Event()  # a pass of the lane has read what it takes

    def commit(self, n: int) -> None:
        with self.lock:
            self.committed.append(n)

    def take(self) -> list[int]:
        """One pass of the lane: what is new, taken after a pass's worth of work."""
        with self.lock:
            new = self.committed[len(self.taken) :]
        self.passing.set()  # what it takes is fixed now
        time.sleep(self.pass_s)
        self.taken += new
        return [len(new)]


def lane(commits: Commits, stop: list[bool], **kw) -> Lane[int]:
    return Lane(
        "test-lane", kw.pop("run_once", commits.take), lambda _r: None, did_work=bool,
        interval=0.01, stop_requested=lambda: stop[0], **kw,
    )  # fmt: skip


def test_finishing_takes_everything_committed_before_it() -> None:
    commits, stop = Commits(), [False]
    running = lane(commits, stop).start()
    for n in range(40):  # commits land before, during and between the lane's passes
        commits.commit(n)
        time.sleep(0.003)
    running.finish()
    running.join()
    assert commits.taken == list(range(40))


def test_a_stop_ends_the_lane_after_its_pass_without_catching_up() -> None:
    commits, stop = Commits(pass_s=0.2), [False]
    commits.commit(0)
    running = lane(commits, stop).start()
    assert commits.passing.wait(timeout=10)  # the first pass is under way
    commits.commit(1)
    stop[0] = True
    running.finish()
    running.join()
    assert commits.taken == [0]  # the pass under way ended; no pass took 1


def test_a_failure_in_the_lane_is_seen_by_the_caller_and_raised_at_join() -> None:
    commits, stop = Commits(), [False]
    calls = [0]

    def fails_second_time() -> list[int]:
        calls[0] += 1
        if calls[0] == 2:
            raise RuntimeError("the table's MERGE failed: Spark is gone")
        return commits.take()

    running = lane(commits, stop, run_once=fails_second_time).start()
    deadline = time.monotonic() + 10
    while not running.failed:  # what the caller's loop stops on
        assert time.monotonic() < deadline, "the lane's failure was never seen"
        time.sleep(0.01)
    running.finish()
    with pytest.raises(RuntimeError, match="Spark is gone"):
        running.join()
    assert calls[0] == 2  # it stopped at its failure


def test_the_lanes_set_up_runs_in_its_own_thread_before_its_first_pass() -> None:
    commits, stop, seen = Commits(), [False], []

    def started() -> None:
        seen.append((threading.current_thread().name, len(commits.taken)))

    running = lane(commits, stop, started=started).start()
    commits.commit(0)
    running.finish()
    running.join()
    assert seen == [("test-lane", 0)] and commits.taken == [0]


def test_dagster_records_a_lake_tables_pass_after_the_warehouse_pass_it_read(
    tmp_path,
) -> None:
    """The lane's pass may read commits of a warehouse pass still under way: its events
    are held until that pass's are written, so Dagster never sees a table newer than its
    pool (the automation sensor would start a run to bring the table up to date)."""
    from dagster import AssetKey, AssetMaterialization, DagsterInstance

    from zync_assets.orchestration.report import _Writer

    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    writer = _Writer(tmp_path)

    def events(name: str):
        return lambda: [AssetMaterialization(AssetKey(name.split("/")))]

    writer.put([events("raw/1")])
    writer.hold([events("table/a")])  # read raw/2's commit, not yet recorded
    writer.put([events("raw/2")])
    writer.hold([events("table/b")])  # after the last warehouse pass: written at close
    writer.close()
    instance = DagsterInstance.from_config(str(tmp_path))
    names = ["raw/1", "table/a", "raw/2", "table/b"]
    written = {
        name: instance.fetch_materializations(AssetKey(name.split("/")), limit=1)
        .records[0]
        .storage_id
        for name in names
    }
    assert sorted(names, key=written.__getitem__) == ["raw/1", "raw/2", "table/a", "table/b"]


def test_the_tables_lane_waits_for_the_warehouse_pass_under_way_and_only_for_it() -> None:
    """Turns: the lane's pass starts once the warehouse path's pass under way has ended;
    under a steady stream (pass after pass, no gap) it gets its turn all the same."""
    turns, timeline, stop, under_way = Turns(), [], threading.Event(), threading.Event()
    commits = Commits()
    commits.commit(0)

    def warehouse_path() -> None:
        while not stop.is_set():  # back to back, as under a backlog
            with turns.taking():
                timeline.append("pass starts")
                under_way.set()
                time.sleep(0.1)
                timeline.append("pass ends")

    def take() -> list[int]:
        timeline.append("tables pass")
        return commits.take()

    loop = threading.Thread(target=warehouse_path)
    loop.start()
    assert under_way.wait(timeout=10)  # a warehouse pass is under way
    running = lane(commits, [False], run_once=take, yield_to=turns).start()
    running.finish()
    running.join()
    stop.set()
    loop.join()
    tables = timeline.index("tables pass")
    ends = [n for n, event in enumerate(timeline) if event == "pass ends"]
    assert ends[0] < tables < ends[1], timeline  # after the pass under way, not starved
    assert commits.taken == [0]
