"""Which worker runs what, and in which order.

Services too heavy to start on both xdist workers (PostgreSQL ×2 with Kafka Connect; a
Spark master with its workers and the S3 server) each get one group: every test that
needs the service is one unit of xdist's work, so the service starts once, on one worker.
The two groups are apart, so the two workers can run them side by side. Every other test
is its own unit.

The fast tier (`scripts/test.sh --fast`, `-m "not slow"`) keeps the cheapest tests, by the
last full run's record, that fit in FAST_BUDGET_S; the rest, every test of a group and
every test marked `slow` by hand (fault injection) are marked slow. A budget, not a
threshold in seconds: a threshold lets the tier grow as the suite grows and tests slow
down (30 s gave 332 tests and 15.2 minutes one run after it gave 308 and 10.1).

Units go out longest first (by the seconds each test took in the last full run,
`durations.json`, which `bench/suite_report.py` writes): the long ones start while both
workers are fresh and the short ones even out the end.
"""

from __future__ import annotations

import json
from pathlib import Path

DURATIONS = Path(__file__).with_name("durations.json")

# A heavy session fixture → its group.
SERVICE_GROUPS = {"cdc_ports": "cdc", "spark_cluster": "cluster", "object_store": "cluster"}

# What runs in each group: a whole module (`test_x.py`) or one test (`test_x.py::name`).
# A module-scoped fixture that starts a heavy service (the Dagster daemon's first batch)
# keeps its module whole.
GROUPED = {
    "test_debezium_chain.py": "cdc",
    "test_debezium_restarts.py": "cdc",
    "test_user_schema_chain.py": "cdc",
    "test_sink_errors.py": "cdc",
    "test_sink_outages.py": "cdc",
    "test_whole_database.py": "cdc",
    "test_dagster_daemon.py": "cdc",
    "test_stack.py::test_status_lists_the_cdc_services_with_their_addresses": "cdc",
    "test_cluster.py": "cluster",
    "test_object_store.py": "cluster",
    "test_lake_store.py": "cluster",
    "test_ingest_faults.py::test_kill_9_at_random_points_then_resume_loses_and_doubles_nothing[cluster]": "cluster",
}

# The tests that run last, in a session of their own (`-m extended`): each is the heaviest
# of its kind and has a larger run in a benchmark, or proves what a faster test proves
# too, end to end. Within a time budget (`ZYNC_SUITE_BUDGET_MIN`, CI's by default) they
# are the ones the budget cuts first; `scripts/test.sh` with no budget runs them all.
LAST = {
    # its 50-table run is bench/mirror_bench.py; here its restart outran 420 s (2026-12-01)
    "test_whole_database.py::test_one_short_spec_mirrors_a_whole_database_through_a_kill_and_a_connect_restart",
    "test_view_model.py::test_views_equal_their_query_over_current_rows_after_every_round",
    "test_soak.py::test_a_one_minute_soak_with_kills_reconciles_every_offset",
    "test_tables_model.py::test_tables_equal_the_model[0]",
    "test_spark_connect.py::test_the_invoice_demo_goes_through_the_connect_server",
    "test_wheel.py::test_a_host_project_runs_zync_from_its_wheel",
    "test_catalog.py::test_a_notebook_reads_lake_tables_by_name_while_the_pipeline_writes_them",
    "test_quiet.py::test_common_commands_print_nothing_third_party",
    "test_pipeline.py::test_the_pipeline_service_carries_each_batch_reports_to_dagster_and_stops_cleanly",
}
# What a recorded second may take on a loaded machine slower than the one that recorded
# it, when the budget asks whether a test still fits (measured: 2.3 to 2.9 times).
SLOWDOWN = 2.5

# A test the last run did not time: by its marks.
GUESS_S = {"slow": 120.0, "integration": 20.0}
# The fast tier's tests' recorded seconds added up (both workers' work, as the loaded
# full run timed it, set-ups included). 9.9 test-minutes made a 10.4-minute fast tier:
# fixture start-ups (a stack, a Spark session per worker) come on top.
FAST_BUDGET_S = 7.5 * 60


def short_id(nodeid: str) -> str:
    """`zync_assets_tests/test_x.py::name[param]` → `test_x.py::name[param]`."""
    path, _, name = nodeid.partition("::")
    return f"{path.rsplit('/', 1)[-1]}::{name}"


def runs_last(nodeid: str) -> bool:
    return short_id(nodeid) in LAST


def fits_the_budget(
    nodeid: str, marks: set[str], recorded: dict[str, float], left_s: float
) -> bool:
    """Whether a test, by its record (or its marks), still ends within `left_s` seconds."""
    return _seconds(nodeid, {nodeid: marks}, recorded) * SLOWDOWN < left_s


def group_of(nodeid: str) -> str | None:
    test = short_id(nodeid)
    return GROUPED.get(test) or GROUPED.get(test.split("::", 1)[0])


def unit_of(nodeid: str) -> str:
    """xdist's unit of work for a test: its group, or the test alone."""
    return group_of(nodeid) or nodeid


def misplaced(nodeid: str, fixtures: set[str]) -> str | None:
    """Why a test that needs a heavy service sits outside that service's group, if it does."""
    wanted = {SERVICE_GROUPS[f] for f in fixtures if f in SERVICE_GROUPS}
    if not wanted:
        return None
    if len(wanted) > 1:
        return f"{nodeid} needs services of groups {sorted(wanted)}: one test, one group"
    (group,) = wanted
    if group_of(nodeid) != group:
        return (
            f"{nodeid} needs the {group} group's services: add it (or its module) to GROUPED "
            "in zync_assets_tests/support/scheduling.py, or each worker starts its own"
        )
    return None


def fast_tier(
    nodeids: list[str], marks: dict[str, set[str]], recorded: dict[str, float]
) -> set[str]:
    """The tests the fast tier keeps: of those in no group and not marked slow, the
    cheapest by the record (a test it has not timed, by its guess) that fit the budget."""
    candidates = [
        n for n in nodeids
        if not group_of(n) and not runs_last(n) and "slow" not in marks.get(n, set())
    ]  # fmt: skip
    kept, spent = set(), 0.0
    for nodeid in sorted(candidates, key=lambda n: (_seconds(n, marks, recorded), n)):
        spent += _seconds(nodeid, marks, recorded)
        if spent > FAST_BUDGET_S:
            break
        kept.add(nodeid)
    return kept


def _seconds(nodeid: str, marks: dict[str, set[str]], recorded: dict[str, float]) -> float:
    """A test's seconds in the last full run, or a guess by its marks."""
    known = recorded.get(short_id(nodeid))
    if known is not None:
        return known
    return max((GUESS_S.get(m, 0.0) for m in marks.get(nodeid, set())), default=1.0)


def recorded_durations() -> dict[str, float]:
    return json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}


def longest_units_first(
    nodeids: list[str], marks: dict[str, set[str]], recorded: dict[str, float]
) -> list[str]:
    """The node ids reordered so that units (groups and lone tests) come longest first,
    the units of LAST's tests after all the others (longest first among themselves); a
    group's tests keep their order among themselves."""

    unit_seconds: dict[str, float] = {}
    unit_last: dict[str, bool] = {}
    for nodeid in nodeids:
        unit = unit_of(nodeid)
        unit_seconds[unit] = unit_seconds.get(unit, 0.0) + _seconds(nodeid, marks, recorded)
        unit_last[unit] = unit_last.get(unit, True) and runs_last(nodeid)
    order = {nodeid: i for i, nodeid in enumerate(nodeids)}

    def place(nodeid: str) -> tuple[bool, float, str, int]:
        unit = unit_of(nodeid)
        return unit_last[unit], -unit_seconds[unit], unit, order[nodeid]

    return sorted(nodeids, key=place)
