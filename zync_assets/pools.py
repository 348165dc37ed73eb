"""Pools: Delta tables under the lake directory, addressed by validated names."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from zync_assets.errors import ZyncError

POOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
DEAD_LETTER_SUFFIX = "_dlq"
# Lake tables (a spec's `tables:`) live in this folder of the lake; no pool may take its name.
TABLES_FOLDER = "_tables"


def lake_dir() -> Path:
    return Path(os.environ.get("ZYNC_LAKE", ".zync/lake")).resolve()


def check_pool_name(name: str) -> str:
    if name == TABLES_FOLDER:
        raise ZyncError(f"invalid pool name {name!r}: the lake keeps its tables there")
    if not POOL_NAME.match(name):
        raise ZyncError(
            f"invalid pool name {name!r}: use 1-64 letters, digits, '_' or '-' "
            "(no paths, dots or spaces)"
        )
    return name


def lake_entry(*parts: str) -> str:
    """A path in the lake, refused when a symbolic link in it leads elsewhere: zync reads,
    writes and deletes only what is inside the lake (the lake folder itself may be a link).
    Names are checked before they get here: no `..`, no slashes."""
    lake = lake_dir()
    path = lake.joinpath(*parts)
    if path.resolve() != path:
        raise ZyncError(
            f"{path} leads through a symbolic link to {path.resolve()}: zync does not follow "
            f"links inside the lake ({lake}); move the folder itself there, or set ZYNC_LAKE"
        )
    return str(path)


def pool_path(name: str) -> str:
    return lake_entry(check_pool_name(name))


def table_path(name: str) -> str:
    """A lake table's Delta table (names are checked by the spec: no paths)."""
    return lake_entry(TABLES_FOLDER, name)


def table_changes_path(name: str) -> str:
    """The table's change log: what it must remember between passes (tables/changes.py)."""
    return lake_entry(TABLES_FOLDER, f"{name}.changes")


def list_tables() -> list[str]:
    folder = lake_dir() / TABLES_FOLDER
    if not folder.is_dir():
        return []
    return sorted(
        p.name
        for p in folder.iterdir()
        if "." not in p.name and not p.is_symlink() and pool_exists(str(p))
    )


def dead_letter_path(pool: str) -> str:
    return lake_entry(check_pool_name(pool) + DEAD_LETTER_SUFFIX)


# A numbered commit or checkpoint file: only these make a Delta table. A bare
# `_delta_log/` is what a writer killed during its first commit leaves behind.
_COMMIT_FILE = re.compile(r"^\d{20}\.(json|checkpoint(\..+)?\.parquet)$")
_VERSION_FILE = re.compile(r"^\d{20}\.json$")


def pool_exists(path: str) -> bool:
    log = Path(path) / "_delta_log"
    return log.is_dir() and any(_COMMIT_FILE.match(entry.name) for entry in log.iterdir())


def pool_version(path: str) -> int | None:
    """The table's newest commit version (None: no table yet), asked of the file system.

    Cheap enough for every pass: no Spark job, no listing of a long log — from the
    last checkpoint, it probes forward for the commits written since.
    """
    log = Path(path) / "_delta_log"
    version = _last_checkpoint(log)
    if version is None:  # a young table (no checkpoint yet): its log is short
        if not log.is_dir():
            return None
        found = [int(e.name[:20]) for e in os.scandir(log) if _VERSION_FILE.match(e.name)]
        return max(found, default=None)
    while commit_file(path, version + 1).is_file():
        version += 1
    return version


def commit_file(path: str, version: int) -> Path:
    return Path(path) / "_delta_log" / f"{version:020d}.json"


def _last_checkpoint(log: Path) -> int | None:
    try:
        return int(json.loads((log / "_last_checkpoint").read_text())["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def require_pool(name: str, kind: str, hint: str) -> str:
    """The path of an existing pool; else a ZyncError naming the `kind` of pool and `hint`."""
    path = pool_path(name)
    if not pool_exists(path):
        raise ZyncError(f"{kind} {name} does not exist; {hint}")
    return path


def list_pools() -> list[str]:
    lake = lake_dir()
    if not lake.is_dir():
        return []
    return sorted(p.name for p in lake.iterdir() if not p.is_symlink() and pool_exists(str(p)))


def drop_table_files(name: str) -> None:
    """Delete a lake table and its change log (a demo's fresh start)."""
    shutil.rmtree(table_path(name), ignore_errors=True)
    shutil.rmtree(table_changes_path(name), ignore_errors=True)


def drop_pool_files(pool: str) -> None:
    """Delete a pool and its dead-letter table from the lake (a demo's fresh start)."""
    shutil.rmtree(pool_path(pool), ignore_errors=True)
    shutil.rmtree(dead_letter_path(pool), ignore_errors=True)
