"""zync's Dagster definitions from its specs, ready to merge into a host project's.

    kafka/<topic>  →  raw/<pool>  →  staging/<pool>, done/<pool>  →  kafka/<output topic>
                                          ↘ table/<name> (lake tables)

`build_zync_definitions(specs)` returns assets, checks, sensors, a job and a schedule that
sit beside a host's own in one `Definitions.merge`: no executor (the host's applies),
resources keyed `zync_lake`, `zync_kafka`, `zync_schema_registry` and `zync_spark` (under
a key prefix `<prefix>_zync_…`: two zync definitions, two lakes), and sensors that select
only zync's assets. A raw pool's Kafka sensor starts runs of a job of its own
that runs in-process whatever the host's executor: one Spark session carries a change
through every stage downstream of the pool. The automation sensor starts the runs that
other changes call for (a failed stage's retry, an asset materialized by hand); those
use the Definitions' executor, which zync's own code location (`zync_assets.definitions`)
sets to the in-process one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dagster import (
    AssetChecksDefinition,
    AssetKey,
    AssetsDefinition,
    AssetSelection,
    AssetSpec,
    AutomationConditionSensorDefinition,
    DefaultSensorStatus,
    Definitions,
    ExecutorDefinition,
)

from zync_assets.core.config import ZyncConfig
from zync_assets.core.errors import ZyncError
from zync_assets.ingest.discovery import pool_inputs
from zync_assets.orchestration.conditions import strictest
from zync_assets.orchestration.maintenance import maintenance_job, maintenance_schedule
from zync_assets.orchestration.naming import DEFAULT_NAMING, Naming, ZyncTranslator
from zync_assets.orchestration.raw import (
    pattern_assets,
    raw_pool_asset,
    raw_pool_sensor,
    topic_assets,
)
from zync_assets.orchestration.resources import zync_resources
from zync_assets.orchestration.sinks import sink_checks
from zync_assets.orchestration.staging import etl_assets
from zync_assets.orchestration.tables import pattern_asset_name, table_assets
from zync_assets.orchestration.tokafka import mirror_asset_name, output_topic_assets
from zync_assets.specs.model import Freshness, Spec

AUTOMATION_SENSOR = "zync_automation"


def _check_owners(specs: list[Spec]) -> None:
    """A staging pool is written by one spec, and a lake table defined by one."""
    _one_owner(specs, "staging pool", lambda spec: [r.pool for r in spec.outputs],
               "give each spec its own staging pool")  # fmt: skip
    _one_owner(specs, "table", lambda spec: [t.name for t in spec.tables],
               "define each table in one spec")  # fmt: skip


def _one_owner(specs: list[Spec], kind: str, names: Callable[[Spec], list[str]], fix: str) -> None:
    owner: dict[str, str] = {}
    for spec in specs:
        for name in names(spec):
            if owner.setdefault(name, spec.name) != spec.name:
                raise ZyncError(f"{kind} {name} is in specs {owner[name]} and {spec.name}: {fix}")


def automation_sensor(
    interval: int,
    assets: Sequence[AssetsDefinition],
    naming: Naming = DEFAULT_NAMING,
    checks: Sequence[AssetChecksDefinition] = (),
) -> AutomationConditionSensorDefinition:
    """Evaluates the eager conditions of zync's assets and checks (and no host's): staging
    and output topics follow new upstream data; the sink checks run once a minute.

    Explicit (rather than Dagster's default one) so that it runs from the start and as
    often as the Kafka sensors.
    """
    return AutomationConditionSensorDefinition(
        naming.definition_name(AUTOMATION_SENSOR),
        target=AssetSelection.assets(*assets) | AssetSelection.checks(*checks),
        default_status=DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=interval,
        description="Starts staging/<pool> after its raw pools grow, kafka/<out> with it.",
    )


def downstream_of(pool: str, specs: list[Spec], naming: Naming = DEFAULT_NAMING) -> list[AssetKey]:
    """The staging, done, output-topic and table assets that raw pool `pool` feeds."""
    keys: list[AssetKey] = []
    for spec in specs:
        if pool not in spec.raw_pools():
            continue
        if spec.transforms:
            for staging in spec.staging_pools():
                keys += [naming.key("staging", staging), naming.key("done", staging)]
            keys += [naming.key("topic", route.topic, output=True) for route in spec.outputs]
            keys += [
                naming.key("topic", mirror_asset_name(rule), output=True)
                for rule in spec.transforms
                if rule.type == "mirror"
            ]
        tables = [t for t in spec.tables if spec.transforms or not t.from_staging]
        keys += [naming.key("table", t.name) for t in tables]
        keys += [
            naming.key("table", pattern_asset_name(spec, number))
            for number in range(1, len(spec.table_patterns) + 1)
        ]
    return list(dict.fromkeys(keys))


def freshness_of(pool: str, specs: list[Spec]) -> Freshness | None:
    """Raw pool `pool`'s freshness: the strictest of the specs that read it."""
    return strictest(spec.freshness for spec in specs if pool in spec.raw_pools())


def build_zync_definitions(
    specs: list[Spec],
    *,
    config: ZyncConfig | None = None,
    executor: ExecutorDefinition | None = None,
    sensor_interval_s: int | None = None,
    translator: ZyncTranslator | None = None,
    key_prefix: str | Sequence[str] | None = None,
) -> Definitions:
    """zync's definitions for `specs` (see the module's text). `config`: the lake, Kafka,
    registry and Spark they work with (default: the environment of each run's process, as
    the CLI reads it); `executor`: none by default, so that they merge with a host's;
    `sensor_interval_s`: how often the sensors look (default the configuration's); `translator`: how assets are named, grouped,
    owned and tagged (naming.py); `key_prefix`: a prefix for every asset key and every
    sensor, job and op name."""
    _check_owners(specs)
    prefix = (key_prefix,) if isinstance(key_prefix, str) else tuple(key_prefix or ())
    naming = Naming(translator or ZyncTranslator(), prefix)
    pools = pool_inputs(specs)
    formats = {topic: wire for spec in specs for topic, wire in spec.formats().items()}
    interval = sensor_interval_s or (config or ZyncConfig.from_env()).sensor_interval_s
    topics = sorted({t for inputs in pools.values() for t in inputs.named})
    patterns = [p for inputs in pools.values() for p in inputs.patterns]
    staging = sorted({r.pool for spec in specs if spec.transforms for r in spec.outputs})
    kept = [*pools, *staging]
    upkeep = maintenance_job(kept, naming)
    external: list[AssetSpec] = [
        *topic_assets(topics, formats, naming),
        *pattern_assets(patterns, naming),
    ]
    transforming = [spec for spec in specs if spec.transforms]
    materialized: list[AssetsDefinition] = [
        *(
            raw_pool_asset(pool, inputs, formats, naming, freshness_of(pool, specs))
            for pool, inputs in pools.items()
        ),
        *(asset for spec in transforming for asset in etl_assets(spec, naming)),
        *(asset for spec in transforming for asset in output_topic_assets(spec, naming)),
        *(asset for spec in specs for asset in table_assets(spec, naming)),
    ]
    sinks = config.sinks if config is not None else None
    checks = [check for spec in transforming for check in sink_checks(spec, naming, sinks)]
    return Definitions(
        assets=[*external, *materialized],
        asset_checks=checks,
        sensors=[
            *(
                raw_pool_sensor(pool, inputs, interval, downstream_of(pool, specs, naming), naming)
                for pool, inputs in pools.items()
            ),
            automation_sensor(interval, materialized, naming, checks),
        ],
        jobs=[upkeep],
        schedules=[maintenance_schedule(upkeep, kept, naming)],
        resources=zync_resources(config, naming),
        executor=executor,
    )
