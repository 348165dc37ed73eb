"""What a `zync` command imports: the CLI's `main` run in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

_RUN = """
import json, sys
from zync_assets.cli.main import main
try:
    main(sys.argv[2:])
    code = 0
except SystemExit as exit_:
    code = exit_.code if isinstance(exit_.code, int) else 1
with open(sys.argv[1], "w") as out:
    json.dump({"code": code, "modules": sorted({m.split(".")[0] for m in sys.modules})}, out)
"""


def modules_of(
    args: list[str], env: dict[str, str], cwd: Path, timeout: float = 120
) -> tuple[int, set[str]]:
    """`zync *args`' exit code, and the top-level packages loaded when it ended."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "modules.json"
        done = subprocess.run(
            [sys.executable, "-c", _RUN, str(report), *args], env=env, cwd=cwd,
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        assert report.exists(), f"zync {' '.join(args)} ended before its report: {done.stderr}"
        found = json.loads(report.read_text())
    return found["code"], set(found["modules"])
