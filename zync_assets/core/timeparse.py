"""Durations written like `500ms`, `5s`, `1m30s`, `2h`."""

from __future__ import annotations

import re

from zync_assets.core.errors import ZyncError

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """Seconds in a duration such as `1m30s`; a plain number is seconds."""
    text = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = _PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ZyncError(f"bad duration {text!r}: write it like 500ms, 5s, 1m30s or 2h")
    return sum(float(number) * _SECONDS[unit] for number, unit in parts)
