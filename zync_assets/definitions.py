"""Dagster definitions: every spec in `etl_specs/` becomes assets, sensors and checks.

    kafka/<topic>  →  raw/<pool>  →  staging/<pool>, done/<pool>  →  kafka/<output topic>

Load with `dagster dev -m zync_assets.definitions` (or workspace.yaml). Spark assets
run with the in-process executor: one Spark session per run, not one per step. A raw
pool's Kafka sensor starts one run that carries new data through every stage downstream
of the pool; the automation sensor starts the runs that other changes call for (a
failed stage's retry, an asset materialized by hand).
"""

from __future__ import annotations

from collections.abc import Callable

from dagster import (
    AssetKey,
    AssetSelection,
    AutomationConditionSensorDefinition,
    DefaultSensorStatus,
    Definitions,
    in_process_executor,
)

from zync_assets.errors import ZyncError
from zync_assets.orchestration.maintenance import maintenance_job, maintenance_schedule
from zync_assets.orchestration.raw import raw_pool_asset, raw_pool_sensor, topic_assets, topic_key
from zync_assets.orchestration.resources import (
    KafkaResource,
    SchemaRegistryResource,
    SparkResource,
)
from zync_assets.orchestration.staging import done_key, etl_assets, staging_key
from zync_assets.orchestration.tables import table_assets, table_key
from zync_assets.orchestration.tokafka import output_topic_assets
from zync_assets.settings import sensor_interval_seconds
from zync_assets.spec import Spec, all_raw_pools, find_specs, load_spec, spec_folder


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


def automation_sensor(interval: int) -> AutomationConditionSensorDefinition:
    """Evaluates the eager conditions: staging and output topics follow new upstream data.

    Explicit (rather than Dagster's default one) so that it runs from the start and as
    often as the Kafka sensors.
    """
    return AutomationConditionSensorDefinition(
        "zync_automation",
        target=AssetSelection.all(),
        default_status=DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=interval,
        description="Starts staging/<pool> after its raw pools grow, kafka/<out> with it.",
    )


def downstream_of(pool: str, specs: list[Spec]) -> list[AssetKey]:
    """The staging, done, output-topic and table assets that raw pool `pool` feeds."""
    keys: list[AssetKey] = []
    for spec in specs:
        if pool not in spec.raw_pools():
            continue
        if spec.transforms:
            for staging in spec.staging_pools():
                keys += [staging_key(staging), done_key(staging)]
            keys += [topic_key(route.topic) for route in spec.outputs]
        keys += [table_key(t.name) for t in spec.tables if t.from_staging and spec.transforms]
        keys += [table_key(t.name) for t in spec.tables if not t.from_staging]
    return list(dict.fromkeys(keys))


def build_definitions(specs: list[Spec]) -> Definitions:
    _check_owners(specs)
    pools = all_raw_pools(specs)
    formats = {topic: wire for spec in specs for topic, wire in spec.formats().items()}
    interval = sensor_interval_seconds()
    topics = sorted({t for ts in pools.values() for t in ts})
    staging = sorted({r.pool for spec in specs if spec.transforms for r in spec.outputs})
    kept = [*pools, *staging]
    upkeep = maintenance_job(kept)
    return Definitions(
        assets=[
            *topic_assets(topics, formats),
            *(raw_pool_asset(pool, ts, formats) for pool, ts in pools.items()),
            *(asset for spec in specs if spec.transforms for asset in etl_assets(spec)),
            *(asset for spec in specs if spec.transforms for asset in output_topic_assets(spec)),
            *(asset for spec in specs for asset in table_assets(spec)),
        ],
        sensors=[
            *(
                raw_pool_sensor(pool, ts, interval, downstream_of(pool, specs))
                for pool, ts in pools.items()
            ),
            automation_sensor(interval),
        ],
        jobs=[upkeep],
        schedules=[maintenance_schedule(upkeep, kept)],
        resources={
            "spark": SparkResource(),
            "kafka": KafkaResource(),
            "schema_registry": SchemaRegistryResource(),
        },
        executor=in_process_executor,
    )


defs = build_definitions([load_spec(p) for p in find_specs(spec_folder())])
