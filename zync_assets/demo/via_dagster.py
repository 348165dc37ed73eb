"""Watch Dagster carry one batch of the demo from Kafka to the output topic.

Nothing here starts a run: the daemon's Kafka sensor starts raw/Raw, the automation
sensor starts staging/Staging and kafka/NewInvoices after it. This module only reads
the Dagster instance (the same storage the daemon writes) to tell when each stage
has caught up with the offsets just produced, and reports what is running meanwhile.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from dagster import AssetKey, DagsterInstance, DagsterRunStatus, RunsFilter
from dagster._core.instance.ref import InstanceRef

from zync_assets.core.errors import ZyncError
from zync_assets.core.offsets import Offsets, offsets_from_metadata
from zync_assets.orchestration.raw import ACTIVE_RUN_STATUSES

_FAILED = [DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED]


@dataclass(frozen=True)
class Stage:
    key: AssetKey
    label: str
    offsets_key: str | None = None  # metadata with the input offsets this stage has read to


@dataclass(frozen=True)
class Reached:
    """A stage's materialization that covers the batch: when, by which run, its metadata."""

    timestamp: float
    run_id: str
    metadata: Mapping[str, object]


def open_instance(home: Path) -> DagsterInstance:
    """The instance `dagster dev` uses (its DAGSTER_HOME), opened read-mostly from here."""
    return DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))


def _latest(instance: DagsterInstance, key: AssetKey) -> Reached | None:
    entry = instance.get_latest_materialization_event(key)
    if entry is None or entry.asset_materialization is None:
        return None
    metadata = {k: v.value for k, v in entry.asset_materialization.metadata.items()}
    return Reached(entry.timestamp, entry.run_id, metadata)


def covers(progress: Offsets, end: Offsets) -> bool:
    """True if the recorded progress reaches every end offset."""
    return all(
        progress.get(topic, {}).get(partition, 0) >= offset
        for topic, parts in end.items()
        for partition, offset in parts.items()
    )


def caught_up(instance: DagsterInstance, stages: list[Stage], end: Offsets) -> list[Reached]:
    """The stages, in order, whose newest materialization covers `end` (a prefix).

    A stage with `offsets_key` must have read to `end`; any stage must have
    materialized after the one before it did.
    """
    reached: list[Reached] = []
    for stage in stages:
        latest = _latest(instance, stage.key)
        if latest is None or (reached and latest.timestamp <= reached[-1].timestamp):
            break
        if stage.offsets_key is not None:
            read_to = offsets_from_metadata(latest.metadata.get(stage.offsets_key, {}))
            if not covers(read_to, end):
                break
        reached.append(latest)
    return reached


def _failed_since(instance: DagsterInstance, since: dt.datetime) -> list[str]:
    runs = instance.get_runs(RunsFilter(statuses=_FAILED, created_after=since))
    return [run.run_id for run in runs]


def running_runs(instance: DagsterInstance) -> list[str]:
    labels = []
    for run in instance.get_runs(RunsFilter(statuses=ACTIVE_RUN_STATUSES)):
        keys = ", ".join(k.to_user_string() for k in sorted(run.asset_selection or []))
        labels.append(f"run {run.run_id[:8]} {run.status.value.lower()}: {keys or run.job_name}")
    return labels


def wait_for_stages(
    instance: DagsterInstance,
    stages: list[Stage],
    end: Offsets,
    since: dt.datetime,
    ui_url: str,
    report: Callable[[str], None],
    timeout: float = 600.0,
) -> list[Reached]:
    """Wait until every stage covers `end`; report progress; fail on a failed run."""
    deadline = time.monotonic() + timeout
    started = time.monotonic()
    while True:
        reached = caught_up(instance, stages, end)
        if len(reached) == len(stages):
            return reached
        failed = _failed_since(instance, since)
        if failed:
            raise ZyncError(
                f"Dagster run {failed[0]} failed; see {ui_url}/runs/{failed[0]} "
                f"(and `zync stack status` for the logs)"
            )
        if time.monotonic() > deadline:
            raise ZyncError(
                f"{stages[len(reached)].label} did not catch up within {timeout:.0f}s; "
                f"is the Dagster daemon running? See {ui_url}/overview/automation"
            )
        done = [s.label for s in stages[: len(reached)]]
        running = running_runs(instance)
        waiting = stages[len(reached)].label
        report(
            f"{time.monotonic() - started:4.0f}s  done: {', '.join(done) or '-'}  ·  "
            + ("; ".join(running) if running else f"waiting for a sensor to start {waiting}")
        )
        time.sleep(1.0)
