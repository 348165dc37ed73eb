"""Which benchmark results no longer describe the code: a result is stale when the code it
measured changed after the commit it records (`bench/common.py` writes the commit and
whether the tree was clean), or when it records none (then the commit that last wrote the
file stands in for it, said as such), or when no benchmark writes it at all.

    python -m bench.stale          # the stale results, one line each; exit 1 if any
    python -m bench.stale --all    # every result, stale or not

The code a result measured: the package, zync's Spark functions, the resources, the pinned
versions, `bench/common.py` and the benchmark's own module (found by the name it publishes);
for the suite's figures, the tests too. A Python file whose change is only to its
comments and docstrings (the same syntax tree without them) did not change what was
measured, and does not count.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
# Kept free of imports beyond the standard library: bench/common.py reads it too.
MEASURED = ("zync_assets", "jvm/src", "resources", "scripts/constraints.txt", "bench/common.py")
# What a result measured beyond the package: the suite's figures measure the tests.
# (Not the durations the suite's report writes beside its result: the run's output, not its code.)
ALSO_MEASURED = {
    "suite": (
        "zync_assets_tests", "scripts/test.sh", "setup.cfg",
        ":(exclude)zync_assets_tests/support/durations.json",
    )
}  # fmt: skip
_WRITES = re.compile(r"""(?:publish|publish_joined|write_results)\(\s*["'](\w+)["']""")


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def writers() -> dict[str, list[str]]:
    """Each result's name → the benchmark modules that write it."""
    found: dict[str, list[str]] = {}
    for module in sorted((ROOT / "bench").glob("*.py")):
        for name in _WRITES.findall(module.read_text()):
            found.setdefault(name, []).append(f"bench/{module.name}")
    return found


def _code_of(source: str) -> str | None:
    """A Python file's syntax tree without its docstrings (comments are not in it); None
    for a file that does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list) and body and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)
        ):  # fmt: skip
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
    return ast.dump(tree)


def _show(commit: str, path: str) -> str | None:
    done = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True,
                          text=True)  # fmt: skip
    return done.stdout if done.returncode == 0 else None


def code_changed(commit: str, path: str) -> bool:
    """Whether `path` changed since `commit` in what it does: for a Python file present at
    both, beyond its comments and docstrings."""
    if not path.endswith(".py"):
        return True
    before, now = _show(commit, path), _show("HEAD", path)
    if before is None or now is None:
        return True
    old = _code_of(before)
    return old is None or old != _code_of(now)


@dataclass(frozen=True)
class Verdict:
    name: str
    stale: bool
    why: str

    def line(self) -> str:
        return f"{self.name}: {'stale' if self.stale else 'current'}: {self.why}"


def judge(result: Path, written_by: dict[str, list[str]]) -> Verdict:
    name = result.stem
    record = json.loads(result.read_text())
    modules = written_by.get(name)
    if not modules:
        return Verdict(name, True, "no benchmark under bench/ writes it")
    commit, how = record.get("commit"), "recorded"
    if not commit:
        commit, how = _git("log", "-1", "--format=%H", "--", str(result)), "inferred from git log"
    if not commit:
        return Verdict(name, True, "not committed, and it records no commit")
    paths = (*MEASURED, *modules, *ALSO_MEASURED.get(name, ()))
    changed = [
        path
        for path in _git("diff", "--name-only", commit, "HEAD", "--", *paths).splitlines()
        if code_changed(commit, path)
    ]
    dirty = " (measured on a dirty tree)" if record.get("clean") is False else ""
    at = f"measured at {commit[:10]} ({how}, {record.get('date')}){dirty}"
    if changed:
        return Verdict(name, True, f"{at}; {len(changed)} files changed since, e.g. {changed[0]}")
    return Verdict(name, bool(dirty), at)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="list current results too")
    args = parser.parse_args(argv)
    written_by = writers()
    verdicts = [judge(path, written_by) for path in sorted(RESULTS.glob("*.json"))]
    for verdict in verdicts:
        if verdict.stale or args.all:
            print(verdict.line())
    return 1 if any(v.stale for v in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
