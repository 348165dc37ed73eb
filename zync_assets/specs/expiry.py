"""`expire-after`: a bound on how long an unpaired denorm event may wait.

Either a count of offsets (`1000 offsets`: expired once more than that many later
offsets exist in its partition) or a duration (`7d`, `12h`, `30m`: by the event's Kafka timestamp).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from zync_assets.core.errors import ZyncError
from zync_assets.core.timeparse import parse_duration


@dataclass(frozen=True)
class Expiry:
    offsets: int | None = None
    seconds: float | None = None


def parse_expiry(text: str) -> Expiry:
    match = re.fullmatch(r"\s*(\d+)\s*offsets?\s*", text)
    if match:
        return Expiry(offsets=int(match.group(1)))
    try:
        return Expiry(seconds=parse_duration(text))
    except ZyncError as exc:
        raise ZyncError(
            f"{text!r} is neither a count of offsets (e.g. `1000 offsets`) "
            "nor a duration (e.g. `7d`, `12h`)"
        ) from exc
