"""When zync's assets start by themselves (Dagster's declarative automation), and how
fresh their specs say they must be (Dagster's freshness policies)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from dagster import AutomationCondition, FreshnessPolicy

from zync_assets.specs.model import Freshness


def after_checked_upstream() -> AutomationCondition:
    """Eager — after new upstream data — but never past a failed blocking check upstream:
    a staging pass whose output offsets are not dense, whose cursors moved back or whose
    done records repeat is not sent to Kafka nor merged into a lake table, by this run
    (Dagster skips the steps after a failed blocking check) or by a later one."""
    return AutomationCondition.eager() & AutomationCondition.all_deps_blocking_checks_passed()


def freshness_policy(freshness: Freshness | None) -> FreshnessPolicy | None:
    """Dagster's time-window policy from a spec's `freshness:` (none without one)."""
    if freshness is None:
        return None
    warn = dt.timedelta(seconds=freshness.warn_s) if freshness.warn_s is not None else None
    return FreshnessPolicy.time_window(
        fail_window=dt.timedelta(seconds=freshness.fail_s), warn_window=warn
    )


def strictest(freshnesses: Iterable[Freshness | None]) -> Freshness | None:
    """A raw pool read by several specs: the shortest `fail` any of them sets."""
    given = [f for f in freshnesses if f is not None]
    return min(given, key=lambda f: f.fail_s) if given else None
