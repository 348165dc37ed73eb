"""Pools: Delta tables under the lake directory, addressed by validated names."""

from __future__ import annotations

import os
import re
from pathlib import Path

from zync_assets.errors import ZyncError

POOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
DEAD_LETTER_SUFFIX = "_dlq"


def lake_dir() -> Path:
    return Path(os.environ.get("ZYNC_LAKE", ".zync/lake")).resolve()


def check_pool_name(name: str) -> str:
    if not POOL_NAME.match(name):
        raise ZyncError(
            f"invalid pool name {name!r}: use 1-64 letters, digits, '_' or '-' "
            "(no paths, dots or spaces)"
        )
    return name


def pool_path(name: str) -> str:
    return str(lake_dir() / check_pool_name(name))


def dead_letter_path(pool: str) -> str:
    return str(lake_dir() / (check_pool_name(pool) + DEAD_LETTER_SUFFIX))


def pool_exists(path: str) -> bool:
    return (Path(path) / "_delta_log").is_dir()


def list_pools() -> list[str]:
    lake = lake_dir()
    if not lake.is_dir():
        return []
    return sorted(p.name for p in lake.iterdir() if (p / "_delta_log").is_dir())
