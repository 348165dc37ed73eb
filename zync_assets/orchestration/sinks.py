"""`sink_reads_it`: a check on each output topic that the sink connector reading it runs.

zync's outputs end at their topics; a warehouse is only as current as the sink that
reads them. A sink task that FAILED reads none of its topics (the stack's JDBC sink is
one task over `warehouse_.*`: every table it serves stops), so the check of every output
topic it reads fails, with Connect's reason and what to do — the lines `zync status`
prints (pipeline/sink_status.py). Records in the sink's dead-letter topic make it a
warning: they are kept, but someone should look at them. A topic no sink reads passes,
and says so.

The checks run with their topics' materializations and, by the automation sensor, once a
minute on their own: a sink that stops between two changes shows within a minute.
The sinks are the definitions' configuration's (`ZyncConfig.sinks`: `ZYNC_CONNECT_URL`,
`ZYNC_SINKS`), as for `zync status`.

(No `from __future__ import annotations`: Dagster reads the check function's type hints.)
"""

from collections.abc import Iterator
from typing import Any

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckKey,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    AutomationCondition,
    MetadataValue,
    multi_asset_check,
)

from zync_assets.core.errors import ZyncError
from zync_assets.core.settings import SinkSettings
from zync_assets.orchestration.naming import DEFAULT_NAMING, Naming
from zync_assets.orchestration.resources import resource_keys, zync_step
from zync_assets.orchestration.tokafka import mirror_asset_name
from zync_assets.pipeline.sink_status import SinkStatus, sink_statuses
from zync_assets.specs.ingested import mirrored
from zync_assets.specs.model import Spec

SINK_CHECK = "sink_reads_it"
EVERY_MINUTE = "* * * * *"


def output_topic_keys(spec: Spec, naming: Naming = DEFAULT_NAMING) -> list[AssetKey]:
    """The spec's output-topic assets: one per route, one per mirror rule."""
    keys = [naming.key("topic", route.topic, output=True) for route in spec.outputs]
    keys += [
        naming.key("topic", mirror_asset_name(rule), output=True)
        for rule in spec.transforms
        if rule.type == "mirror"
    ]
    return list(dict.fromkeys(keys))


def topics_by_asset(spec: Spec, naming: Naming = DEFAULT_NAMING) -> dict[AssetKey, list[str]]:
    """Each output-topic asset's topics now (a mirror's: one per topic ingested so far)."""
    topics = {naming.key("topic", r.topic, output=True): [r.topic] for r in spec.outputs}
    now = mirrored(spec)
    for rule in now.transforms:
        if rule.type == "mirror":
            key = naming.key("topic", mirror_asset_name(rule), output=True)
            topics[key] = list(rule.output_topics)
    return topics


def sink_check_result(
    key: AssetKey, topics: list[str], statuses: list[SinkStatus], connect_url: str
) -> AssetCheckResult:
    """Whether every sink that reads one of `topics` reads on: an ERROR when one has
    stopped, a WARN when one only holds dead letters."""
    readers = [s for s in statuses if set(s.topics) & set(topics)]
    problems = [line for s in readers for line in s.problems(connect_url)]
    stopped = any(s.stopped for s in readers)
    metadata: dict[str, Any] = {
        "sinks": ", ".join(s.name for s in readers) or "no sink connector reads it",
        "sink_lag": MetadataValue.json({s.name: s.lag for s in readers}),
    }
    if problems:
        metadata["problems"] = MetadataValue.md("\n".join(f"- {line}" for line in problems))
    return AssetCheckResult(
        asset_key=key,
        check_name=SINK_CHECK,
        passed=not problems,
        severity=AssetCheckSeverity.ERROR if stopped else AssetCheckSeverity.WARN,
        metadata=metadata,
        description=problems[0] if problems else None,
    )


def _unanswered(key: AssetKey, why: str) -> AssetCheckResult:
    return AssetCheckResult(
        asset_key=key, check_name=SINK_CHECK, passed=False,
        severity=AssetCheckSeverity.WARN, description=why, metadata={"problems": why},
    )  # fmt: skip


def sink_checks(
    spec: Spec, naming: Naming = DEFAULT_NAMING, sinks: SinkSettings | None = None
) -> list[AssetChecksDefinition]:
    """One multi-check over the spec's output-topic assets ([] when it has none), of the
    sinks `sinks` names (None: those of the run's configuration, as the CLI reads it)."""
    keys = output_topic_keys(spec, naming)
    if not keys:
        return []
    minutely: AutomationCondition[AssetCheckKey] = AutomationCondition.cron_tick_passed(
        EVERY_MINUTE
    )

    @multi_asset_check(
        name=naming.definition_name(f"sinks_of_{spec.name}"),
        specs=[
            AssetCheckSpec(
                SINK_CHECK,
                asset=key,
                automation_condition=minutely,
                description="The sink connector that reads this topic runs: no task FAILED "
                "or stalled, no record in its dead-letter topic.",
            )
            for key in keys
        ],
        can_subset=True,
        required_resource_keys=resource_keys(naming),
    )
    def sinks_read_them(context: AssetCheckExecutionContext) -> Iterator[AssetCheckResult]:
        selected = {check.asset_key for check in context.selected_asset_check_keys}
        with zync_step(context, naming) as step:
            topics = topics_by_asset(spec, naming)
            chosen = sinks or step.config.sinks
            try:
                statuses = sink_statuses(chosen, step.config.kafka)
            except ZyncError as exc:
                for key in keys:
                    if key in selected:
                        yield _unanswered(key, str(exc))
                return
        for key in keys:
            if key in selected:
                yield sink_check_result(key, topics.get(key, []), statuses, chosen.connect_url)

    return [sinks_read_them]
