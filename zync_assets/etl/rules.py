"""Structural validation of `transforms` (the SQL is checked against Spark later)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zync_assets.errors import ZyncError


def parse_rules(path: Path, items: Any, inputs: list, outputs: list) -> list:
    if items:
        raise ZyncError(f"{path}: transforms: not supported yet (ETL is being built)")
    return []
