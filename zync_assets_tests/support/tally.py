"""The closing line of a suite run in several pytest sessions (scripts/test.sh runs the
fast tier, then the rest): their JUnit reports added up into one `suite: N passed, N
failed` line, so that the whole run's count stands last, not only its last session's.

    python -m zync_assets_tests.support.tally REPORT.xml [REPORT.xml ...]
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Counts:
    passed: int = 0
    failed: int = 0
    skipped: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.passed + other.passed, self.failed + other.failed, self.skipped + other.skipped
        )

    def line(self) -> str:
        return f"suite: {self.passed} passed, {self.failed} failed, {self.skipped} skipped"


def counts(report: Path) -> Counts:
    """What one JUnit report holds; a missing report (its session never ran) holds nothing."""
    if not report.is_file():
        return Counts()
    total = Counts()
    for suite in ET.parse(report).getroot().iter("testsuite"):
        tests, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
        failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        total += Counts(tests - skipped - failed, failed, skipped)
    return total


def main(argv: list[str]) -> int:
    total = sum((counts(Path(a)) for a in argv), Counts())
    print(total.line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
