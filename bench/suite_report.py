"""Where the test suite's time goes: a run's JUnit XML → bench/results/suite.json.

    scripts/test.sh                    # the full suite as CI runs it: fast tier, then the rest
    python -m bench.suite_report       # its reports: .zync/suite/{fast,slow}.xml and seconds

`scripts/test.sh` leaves each pytest session's JUnit XML and wall seconds in
`.zync/suite/`; the report reads them unless given other files (`--wall-seconds` then).

Figures: `tests`, `failed`, `full_minutes` (the run's wall time, given: the XML's own
time is its workers' sum), `test_minutes` (the tests' own times added up: set-up and
calls), `cpu_minutes` (the CPU each test's process tree used, added up: on two saturated
cores the cost a test puts on the others), the time and CPU per module, and the 20
slowest tests with their seconds and CPU seconds. The table
goes to docs/BENCHMARKS.md. Each test's seconds also go to the tests' own
`support/durations.json`, by which the suite hands out its longest work first.
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from bench.common import publish
from zync_assets_tests.support.scheduling import DURATIONS

SLOWEST = 20
REPORTS = Path(__file__).resolve().parent.parent / ".zync" / "suite"


@dataclass(frozen=True)
class Case:
    module: str
    test: str
    seconds: float
    failed: bool
    cpu_seconds: float | None = None  # conftest.py's property; None in an older report
    skipped: bool = False  # by a mark, or by the suite's time budget (ZYNC_SUITE_BUDGET_MIN)

    @property
    def name(self) -> str:
        return f"{self.module}::{self.test}"


def read_cases(path: Path) -> list[Case]:
    """Each test case of the report."""
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        module = (case.get("classname") or "").split(".")[-1] + ".py"
        failed = any(child.tag in ("failure", "error") for child in case)
        if module in (".py", "pytest.py"):
            continue  # pytest's own entry for an internal error (a run stopped early)
        cpu = [p.get("value") for p in case.iter("property") if p.get("name") == "cpu_seconds"]
        skipped = any(child.tag == "skipped" for child in case)
        cases.append(Case(module, case.get("name") or "", float(case.get("time") or 0), failed,
                          float(cpu[0]) if cpu and cpu[0] else None, skipped))  # fmt: skip
    return cases


def figures(
    cases: list[Case], wall_s: float, workers: int,
    fast_s: float | None = None, collected: int | None = None,
) -> dict:  # fmt: skip
    per_module: dict[str, float] = defaultdict(float)
    cpu_per_module: dict[str, float] = defaultdict(float)
    for case in cases:
        per_module[case.module] += case.seconds
        cpu_per_module[case.module] += case.cpu_seconds or 0.0
    slowest = sorted(cases, key=lambda c: c.seconds, reverse=True)[:SLOWEST]
    costliest = sorted(cases, key=lambda c: c.cpu_seconds or 0.0, reverse=True)[:SLOWEST]
    timed = [c.cpu_seconds for c in cases if c.cpu_seconds is not None]
    return {
        "tests": len(cases),
        "collected": collected or len(cases),
        "complete": collected is None or len(cases) >= collected,
        "failed": sum(1 for c in cases if c.failed),
        "skipped": sum(1 for c in cases if c.skipped),
        "workers": workers,
        "full_minutes": round(wall_s / 60, 1),
        "fast_minutes": round(fast_s / 60, 1) if fast_s is not None else None,
        "test_minutes": round(sum(c.seconds for c in cases) / 60, 1),
        "cpu_minutes": round(sum(timed) / 60, 1) if timed else None,
        "modules_minutes": _minutes(per_module),
        "modules_cpu_minutes": _minutes(cpu_per_module) if timed else None,
        "slowest": [_entry(c) for c in slowest],
        "most_cpu": [_entry(c) for c in costliest] if timed else None,
    }


def _minutes(seconds: dict[str, float]) -> dict[str, float]:
    return {m: round(s / 60, 1) for m, s in sorted(seconds.items(), key=lambda i: -i[1])}


def _entry(case: Case) -> dict:
    return {"test": case.name, "seconds": round(case.seconds, 1), "cpu_seconds": case.cpu_seconds}


def table(found: dict) -> str:
    rows = "\n".join(
        f"| `{t['test']}` | {t['seconds']} | {t['cpu_seconds']} |" for t in found["slowest"]
    )
    cpu = f", {found['cpu_minutes']} CPU-minutes" if found.get("cpu_minutes") else ""
    return (
        f"\n## Test suite\n\nThe full suite (`scripts/test.sh`, {found['workers']} workers): "
        f"{found['tests']} of {found['collected']} tests run"
        f"{'' if found['complete'] else ' (stopped early)'}, {found['failed']} failed, "
        f"{found['full_minutes']} minutes "
        f"wall time ({found['test_minutes']} minutes of tests added up{cpu}); the fast tier "
        f"(`scripts/test.sh --fast`): {found['fast_minutes']} minutes. The slowest:\n\n"
        f"| test | seconds | CPU seconds |\n|---|---|---|\n{rows}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path, nargs="*", help=f"default: {REPORTS}/*.xml")
    parser.add_argument("--wall-seconds", type=float, help="default: the sessions' seconds")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--fast-seconds", type=float, help="the fast tier's wall time")
    parser.add_argument("--collected", type=int, help="tests collected, for a run stopped early")
    parser.add_argument(
        "--keep-durations",
        action="store_true",
        help="leave support/durations.json as it is (a run on another machine)",
    )
    args = parser.parse_args()
    reports = args.junit or sorted(REPORTS.glob("*.xml"))
    wall = args.wall_seconds or sum(_seconds(r) for r in reports)
    fast = args.fast_seconds or (_seconds(REPORTS / "fast.xml") if not args.junit else None)
    cases = [case for report in reports for case in read_cases(report)]
    found = figures(cases, wall, args.workers, fast, args.collected)
    found.update(service_cpu(REPORTS / "services.jsonl"))
    publish("suite", table(found), found)
    if not args.keep_durations:
        write_durations(cases, found["complete"])


def service_cpu(path: Path) -> dict:
    """The services' CPU (the tests' conftest.py writes a line per service as it stops
    them): `service_cpu_minutes` and the minutes of each kind of service."""
    if not path.is_file():
        return {"service_cpu_minutes": None}
    by_service: dict[str, float] = defaultdict(float)
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        by_service[entry["service"]] += entry["cpu_seconds"]
    return {
        "service_cpu_minutes": round(sum(by_service.values()) / 60, 1),
        "services_cpu_minutes": _minutes(by_service),
    }


def _seconds(report: Path) -> float:
    """A session's wall seconds, as scripts/test.sh wrote them beside its report."""
    seconds = report.with_suffix(".seconds")
    if not seconds.is_file():
        raise SystemExit(f"suite_report: no {seconds}: give --wall-seconds")
    return float(seconds.read_text())


def write_durations(cases: list[Case], complete: bool) -> None:
    """Each test's seconds: a whole run's alone (a removed test's record goes with it); a
    partial run's merged over what an earlier one recorded."""
    known = json.loads(DURATIONS.read_text()) if DURATIONS.exists() and not complete else {}
    known.update({case.name: round(case.seconds, 1) for case in cases})
    DURATIONS.write_text(json.dumps(dict(sorted(known.items())), indent=0) + "\n")


if __name__ == "__main__":
    main()
