"""Where the test suite's time goes: a run's JUnit XML → bench/results/suite.json.

    scripts/test.sh --junitxml=/tmp/suite.xml      # the full suite, as CI runs it
    python -m bench.suite_report /tmp/suite.xml --wall-seconds 3540 [--workers 2]

Figures: `tests`, `failed`, `full_minutes` (the run's wall time, given: the XML's own
time is its workers' sum), `test_minutes` (the tests' own times added up: set-up and
calls), the time per module, and the 20 slowest tests with their seconds. The table
goes to docs/BENCHMARKS.md. Each test's seconds also go to the tests' own
`support/durations.json`, by which the suite hands out its longest work first.
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from bench.common import publish
from zync_assets_tests.support.scheduling import DURATIONS

SLOWEST = 20


def read_cases(path: Path) -> list[tuple[str, str, float, bool]]:
    """(module, test, seconds, failed) for each test case of the report."""
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        module = (case.get("classname") or "").split(".")[-1] + ".py"
        failed = any(child.tag in ("failure", "error") for child in case)
        if module in (".py", "pytest.py"):
            continue  # pytest's own entry for an internal error (a run stopped early)
        cases.append((module, case.get("name") or "", float(case.get("time") or 0), failed))
    return cases


def figures(
    cases: list[tuple[str, str, float, bool]], wall_s: float, workers: int,
    fast_s: float | None = None, collected: int | None = None,
) -> dict:  # fmt: skip
    per_module: dict[str, float] = defaultdict(float)
    for module, _, seconds, _ in cases:
        per_module[module] += seconds
    slowest = sorted(cases, key=lambda c: c[2], reverse=True)[:SLOWEST]
    return {
        "tests": len(cases),
        "collected": collected or len(cases),
        "complete": collected is None or len(cases) >= collected,
        "failed": sum(1 for c in cases if c[3]),
        "workers": workers,
        "full_minutes": round(wall_s / 60, 1),
        "fast_minutes": round(fast_s / 60, 1) if fast_s is not None else None,
        "test_minutes": round(sum(c[2] for c in cases) / 60, 1),
        "modules_minutes": {
            m: round(s / 60, 1) for m, s in sorted(per_module.items(), key=lambda i: -i[1])
        },
        "slowest": [{"test": f"{m}::{n}", "seconds": round(s, 1)} for m, n, s, _ in slowest],
    }


def table(found: dict) -> str:
    rows = "\n".join(f"| `{t['test']}` | {t['seconds']} |" for t in found["slowest"])
    return (
        f"\n## Test suite\n\nThe full suite (`scripts/test.sh`, {found['workers']} workers): "
        f"{found['tests']} of {found['collected']} tests run"
        f"{'' if found['complete'] else ' (stopped early)'}, {found['failed']} failed, "
        f"{found['full_minutes']} minutes "
        f"wall time ({found['test_minutes']} minutes of tests added up); the fast tier "
        f"(`scripts/test.sh --fast`): {found['fast_minutes']} minutes. The slowest:\n\n"
        f"| test | seconds |\n|---|---|\n{rows}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path)
    parser.add_argument("--wall-seconds", type=float, required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--fast-seconds", type=float, help="the fast tier's wall time")
    parser.add_argument("--collected", type=int, help="tests collected, for a run stopped early")
    args = parser.parse_args()
    cases = read_cases(args.junit)
    found = figures(cases, args.wall_seconds, args.workers, args.fast_seconds, args.collected)
    publish("suite", table(found), found)
    write_durations(cases)


def write_durations(cases: list[tuple[str, str, float, bool]]) -> None:
    """Each test's seconds, merged over what an earlier (perhaps partial) run recorded."""
    known = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    known.update({f"{module}::{test}": round(seconds, 1) for module, test, seconds, _ in cases})
    DURATIONS.write_text(json.dumps(dict(sorted(known.items())), indent=0) + "\n")


if __name__ == "__main__":
    main()
