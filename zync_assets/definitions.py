"""Dagster definitions: every spec in `etl_specs/` becomes assets, sensors and checks.

    kafka/<topic>  →  raw/<pool>  →  staging/<pool>, done/<pool>  →  kafka/<output topic>

Load with `dagster dev -m zync_assets.definitions` (or workspace.yaml). Spark assets
run with the in-process executor: one JVM per run, not one per step.
"""

from __future__ import annotations

import os
from pathlib import Path

from dagster import Definitions, in_process_executor

from zync_assets.errors import ZyncError
from zync_assets.orchestration.raw import raw_pool_asset, raw_pool_sensor, topic_assets
from zync_assets.orchestration.resources import (
    KafkaResource,
    SchemaRegistryResource,
    SparkResource,
)
from zync_assets.orchestration.staging import etl_assets
from zync_assets.orchestration.tokafka import output_topic_assets
from zync_assets.spec import Spec, find_specs, load_spec

_PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def spec_folder() -> Path:
    """`$ZYNC_SPECS`, else ./etl_specs, else the checkout's etl_specs/."""
    if os.environ.get("ZYNC_SPECS"):
        return Path(os.environ["ZYNC_SPECS"])
    local = Path("etl_specs")
    return local if local.is_dir() else _PACKAGE_ROOT / "etl_specs"


def raw_pools(specs: list[Spec]) -> dict[str, list[str]]:
    """Every raw pool of the specs with its topics (a topic may feed one pool only)."""
    pools: dict[str, list[str]] = {}
    for spec in specs:
        for pool, topics in spec.raw_pools().items():
            pools.setdefault(pool, [])
            pools[pool] += [t for t in topics if t not in pools[pool]]
    return pools


def _check_staging_owners(specs: list[Spec]) -> None:
    owner: dict[str, str] = {}
    for spec in specs:
        for route in spec.outputs:
            if owner.setdefault(route.pool, spec.name) != spec.name:
                raise ZyncError(
                    f"staging pool {route.pool} is written by specs {owner[route.pool]} and "
                    f"{spec.name}: give each spec its own staging pool"
                )


def build_definitions(specs: list[Spec]) -> Definitions:
    _check_staging_owners(specs)
    pools = raw_pools(specs)
    topics = sorted({t for ts in pools.values() for t in ts})
    return Definitions(
        assets=[
            *topic_assets(topics),
            *(raw_pool_asset(pool, ts) for pool, ts in pools.items()),
            *(asset for spec in specs if spec.transforms for asset in etl_assets(spec)),
            *(asset for spec in specs if spec.transforms for asset in output_topic_assets(spec)),
        ],
        sensors=[raw_pool_sensor(pool, ts) for pool, ts in pools.items()],
        resources={
            "spark": SparkResource(),
            "kafka": KafkaResource(),
            "schema_registry": SchemaRegistryResource(),
        },
        executor=in_process_executor,
    )


defs = build_definitions([load_spec(p) for p in find_specs(spec_folder())])
