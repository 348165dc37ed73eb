"""Pools: Delta tables under the lake directory, addressed by validated names."""

from __future__ import annotations

import json
import re
from pathlib import Path

from zync_assets.core.errors import ZyncError
from zync_assets.core.names import POOL_NAME
from zync_assets.lake import store as lake_store

DEAD_LETTER_SUFFIX = "_dlq"
# Lake tables (a spec's `tables:`) live in this folder of the lake; no pool may take its name.
TABLES_FOLDER = "_tables"
# What failed for one table or spec while the rest went on (pipeline/failures.py).
FAILING_FOLDER = "_failing"


def lake_dir() -> str:
    """The lake: an absolute folder or an `s3a://` URL (store.py)."""
    return lake_store.lake_uri()


def check_pool_name(name: str) -> str:
    if name in (TABLES_FOLDER, FAILING_FOLDER):
        raise ZyncError(f"invalid pool name {name!r}: the lake keeps its own files there")
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
    if lake_store.is_object_store(lake):
        return lake_store.join(lake, *parts)
    path = Path(lake).joinpath(*parts)
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
    folder = lake_store.join(lake_dir(), TABLES_FOLDER)
    return sorted(
        name
        for name in lake_store.names_in(folder)
        if "." not in name and _inside(folder, name) and pool_exists(lake_store.join(folder, name))
    )


def _inside(folder: str, name: str) -> bool:
    """Not a symbolic link (zync does not follow links inside a local lake)."""
    return lake_store.is_object_store(folder) or not Path(folder, name).is_symlink()


def dead_letter_path(pool: str) -> str:
    return lake_entry(check_pool_name(pool) + DEAD_LETTER_SUFFIX)


# A numbered commit or checkpoint file: only these make a Delta table. A bare
# `_delta_log/` is what a writer killed during its first commit leaves behind.
_COMMIT_FILE = re.compile(r"^\d{20}\.(json|checkpoint(\..+)?\.parquet)$")
_VERSION_FILE = re.compile(r"^\d{20}\.json$")


def pool_exists(path: str) -> bool:
    names = lake_store.names_in(lake_store.join(path, "_delta_log"))
    return any(_COMMIT_FILE.match(name) for name in names)


def pool_version(path: str) -> int | None:
    """The table's newest commit version (None: no table yet), asked of the file system.

    Cheap enough for every pass: no Spark job, no listing of a long log — from the
    last checkpoint, it probes forward for the commits written since.
    """
    log = lake_store.join(path, "_delta_log")
    version = _last_checkpoint(log)
    if version is None:  # a young table (no checkpoint yet): its log is short
        names = lake_store.names_in(log)
        found = [int(name[:20]) for name in names if _VERSION_FILE.match(name)]
        return max(found, default=None)
    while lake_store.is_file(commit_file(path, version + 1)):
        version += 1
    return version


def table_bytes(path: str, version: int) -> int | None:
    """The bytes of the table's data files at `version`, from the checksum file Delta
    writes beside each commit (None: no such file, say a writer that skips them)."""
    text = lake_store.read_text(lake_store.join(path, "_delta_log", f"{version:020d}.crc"))
    try:
        return int(json.loads(text or "")["tableSizeBytes"])
    except (ValueError, KeyError, TypeError):
        return None


def commit_file(path: str, version: int) -> str:
    """Where commit `version` of the table at `path` is (a file or an object)."""
    return lake_store.join(path, "_delta_log", f"{version:020d}.json")


def _last_checkpoint(log: str) -> int | None:
    try:
        return int(
            json.loads(lake_store.read_text(lake_store.join(log, "_last_checkpoint")) or "")[
                "version"
            ]
        )
    except (ValueError, KeyError, TypeError):
        return None


def require_pool(name: str, kind: str, hint: str) -> str:
    """The path of an existing pool; else a ZyncError naming the `kind` of pool and `hint`."""
    path = pool_path(name)
    if not pool_exists(path):
        raise ZyncError(f"{kind} {name} does not exist; {hint}")
    return path


def list_pools() -> list[str]:
    lake = lake_dir()
    return sorted(
        name
        for name in lake_store.names_in(lake)
        if _inside(lake, name) and pool_exists(lake_store.join(lake, name))
    )


def drop_table_files(name: str) -> None:
    """Delete a lake table and its change log (a demo's fresh start)."""
    lake_store.delete_tree(table_path(name))
    lake_store.delete_tree(table_changes_path(name))


def drop_pool_files(pool: str) -> None:
    """Delete a pool and its dead-letter table from the lake (a demo's fresh start)."""
    lake_store.delete_tree(pool_path(pool))
    lake_store.delete_tree(dead_letter_path(pool))
