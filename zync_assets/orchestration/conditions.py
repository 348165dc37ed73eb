"""When zync's assets start by themselves (Dagster's declarative automation)."""

from __future__ import annotations

from dagster import AutomationCondition


def after_checked_upstream() -> AutomationCondition:
    """Eager — after new upstream data — but never past a failed blocking check upstream:
    a staging pass whose output offsets are not dense, whose cursors moved back or whose
    done records repeat is not sent to Kafka nor merged into a lake table, by this run
    (Dagster skips the steps after a failed blocking check) or by a later one."""
    return AutomationCondition.eager() & AutomationCondition.all_deps_blocking_checks_passed()
