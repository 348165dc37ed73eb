"""`staging/<pool>` and `done/<pool>` per spec: one multi-asset, started by raw's new data."""

import json

from dagster import (
    AssetCheckResult,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetSpec,
    AutomationCondition,
    MaterializeResult,
    multi_asset,
)

from zync_assets.etl.checks import run_checks
from zync_assets.etl.run import EtlResult, run_etl, staging_pools
from zync_assets.ingest.ranges import offsets_to_json
from zync_assets.orchestration.raw import raw_key
from zync_assets.orchestration.resources import SparkResource
from zync_assets.spec import Spec

CURSORS_KEY = "cursors"


def staging_key(pool: str) -> AssetKey:
    return AssetKey(["staging", pool])


def done_key(pool: str) -> AssetKey:
    return AssetKey(["done", pool])


def etl_metadata(result: EtlResult) -> dict:
    return {
        CURSORS_KEY: json.dumps(offsets_to_json(result.cursors)),
        "run": result.run if result.run is not None else "nothing new",
        "read": result.read,
        "outputs": sum(result.outputs.values()),
        "outputs_by_topic": json.dumps(result.outputs),
        "done": result.done,
        "expired": result.expired,
        "unmatched": result.unmatched,
        "pending": result.pending,
    }


def etl_assets(spec: Spec) -> list:
    raw_deps = [raw_key(pool) for pool in spec.raw_pools()]
    return [_pool_asset(spec, pool, raw_deps) for pool in staging_pools(spec)]


def _pool_asset(spec: Spec, pool: str, raw_deps: list[AssetKey]):
    eager = AutomationCondition.eager()
    checks = [
        AssetCheckSpec("dense_output_offsets", asset=staging_key(pool)),
        AssetCheckSpec("cursors_never_move_back", asset=staging_key(pool)),
        AssetCheckSpec("no_duplicate_done_records", asset=done_key(pool)),
    ]

    @multi_asset(
        name=f"etl_{spec.name}_{pool}".replace("-", "_"),
        specs=[
            AssetSpec(
                staging_key(pool),
                deps=raw_deps,
                group_name="staging",
                automation_condition=eager,
                description=f"Output records of spec {spec.name} ({spec.path.name}).",
            ),
            AssetSpec(
                done_key(pool),
                deps=raw_deps,
                group_name="staging",
                automation_condition=eager,
                description=f"Done records: input events of {spec.name} consumed into {pool}.",
            ),
        ],
        check_specs=checks,
        can_subset=False,
    )
    def etl_pool(context: AssetExecutionContext, spark: SparkResource):
        session = spark.session()
        (result,) = run_etl(session, spec, pool=pool)
        context.log.info(
            f"{spec.name} → {pool}: read {result.read}, outputs {result.outputs}, done {result.done}, "
            f"expired {result.expired}, pending {result.pending}"
        )
        metadata = etl_metadata(result)
        yield MaterializeResult(asset_key=staging_key(pool), metadata=metadata)
        yield MaterializeResult(asset_key=done_key(pool), metadata=metadata)
        for check in run_checks(session, result):
            asset = (
                done_key(pool) if check.name == "no_duplicate_done_records" else staging_key(pool)
            )
            yield AssetCheckResult(
                asset_key=asset, check_name=check.name, passed=check.passed,
                metadata={"detail": check.detail},
            )  # fmt: skip

    return etl_pool
