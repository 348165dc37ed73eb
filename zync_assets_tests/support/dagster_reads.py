"""Reads of a Dagster instance that a test expects to find something: a missing record is
an assertion that names it, not an AttributeError on None further down."""

from __future__ import annotations

from dagster import AssetKey, AssetMaterialization, DagsterInstance, DagsterRun, EventLogEntry


def latest_materialization_entry(instance: DagsterInstance, key: AssetKey) -> EventLogEntry:
    entry = instance.get_latest_materialization_event(key)
    assert entry is not None, f"no materialization of {key.to_user_string()} recorded"
    return entry


def latest_materialization(instance: DagsterInstance, key: AssetKey) -> AssetMaterialization:
    """The asset's latest materialization (its metadata: `.metadata`)."""
    materialization = latest_materialization_entry(instance, key).asset_materialization
    assert materialization is not None, f"{key.to_user_string()}'s latest event holds none"
    return materialization


def run_by_id(instance: DagsterInstance, run_id: str) -> DagsterRun:
    run = instance.get_run_by_id(run_id)
    assert run is not None, f"no run {run_id} in the instance"
    return run


def why_failed(instance: DagsterInstance, run: DagsterRun) -> str:
    """A failed run's selection and the first error its events hold, for an assertion
    message: which run failed and why, not just that one did."""
    errors = [
        event.dagster_event.event_specific_data.error.message.strip()  # type: ignore[union-attr]
        for event in instance.all_logs(run.run_id)
        if event.dagster_event is not None
        and event.dagster_event.is_failure
        and getattr(event.dagster_event.event_specific_data, "error", None) is not None
    ]
    selection = sorted(k.to_user_string() for k in run.asset_selection or ())
    checks = sorted(c.to_user_string() for c in run.asset_check_selection or ())
    return f"{run.run_id[:8]} {run.status.value} {selection} {checks}: " + (
        errors[0].splitlines()[0] if errors else "no error event"
    )
