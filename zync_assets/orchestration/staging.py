"""`staging/<pool>` and `done/<pool>` per spec: one multi-asset, started by raw's new data."""

import datetime as dt
from collections.abc import Iterator

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    AssetSpec,
    AutomationCondition,
    MaterializeResult,
    MetadataValue,
    multi_asset,
)
from pyspark.sql import SparkSession

from zync_assets.core.offsets import offsets_to_json
from zync_assets.etl.checks import run_checks
from zync_assets.etl.run import EtlResult, run_etl
from zync_assets.orchestration.conditions import freshness_policy
from zync_assets.orchestration.naming import DEFAULT_NAMING, Naming
from zync_assets.orchestration.raw import dead_letter_check
from zync_assets.orchestration.resources import resource_keys, zync_step
from zync_assets.orchestration.versions import POOL_KINDS, code_version
from zync_assets.pipeline.status import expired_total, input_lags
from zync_assets.specs.model import Spec

CURSORS_KEY = "cursors"
RAW_SEEN_KEY = "raw_offsets_seen"  # the raw pool's end offsets this pass read up to


def staging_key(pool: str) -> AssetKey:
    """A staging pool's key as zync's own code location names it."""
    return DEFAULT_NAMING.key("staging", pool)


def done_key(pool: str) -> AssetKey:
    return DEFAULT_NAMING.key("done", pool)


def etl_metadata(result: EtlResult) -> dict:
    return {
        CURSORS_KEY: MetadataValue.json(offsets_to_json(result.cursors)),
        "run": result.run if result.run is not None else "nothing new",
        "read": result.read,
        "outputs": sum(result.outputs.values()),
        "outputs_by_topic": MetadataValue.json(result.outputs),
        "done": result.done,
        "expired": result.expired,
        "unmatched": result.unmatched,
        "pending": result.pending,
        "pending_oldest_age_s": pending_age_seconds(result.oldest_pending),
        "open_transactions": result.transactions.open,
        "oldest_open_transaction_age_s": pending_age_seconds(result.transactions.oldest_open),
        "expired_transactions": result.transactions.expired,
        RAW_SEEN_KEY: MetadataValue.json(offsets_to_json(result.raw_seen)),
    }


def pending_age_seconds(oldest: dt.datetime | None) -> float:
    """Age of the oldest pending event (0 when nothing waits)."""
    if oldest is None:
        return 0.0
    return round((dt.datetime.now(dt.UTC) - oldest.replace(tzinfo=dt.UTC)).total_seconds(), 1)


def etl_assets(spec: Spec, naming: Naming = DEFAULT_NAMING) -> list:
    raw_deps = [naming.key("raw", pool) for pool in spec.raw_pools()]
    return [_pool_asset(spec, pool, raw_deps, naming) for pool in spec.staging_pools()]


def _pool_asset(
    spec: Spec, pool: str, raw_deps: list[AssetKey], naming: Naming
) -> AssetsDefinition:
    eager = AutomationCondition.eager()
    staging, done = naming.key("staging", pool), naming.key("done", pool)
    checks = [  # blocking: a pass that fails one is never sent on (conditions.py)
        AssetCheckSpec("dense_output_offsets", asset=staging, blocking=True),
        AssetCheckSpec("cursors_never_move_back", asset=staging, blocking=True),
        AssetCheckSpec("no_duplicate_done_records", asset=done, blocking=True),
        AssetCheckSpec("no_expired_events", asset=staging),
    ]
    if gated(spec):
        checks.append(AssetCheckSpec("no_stale_transactions", asset=staging))
    version = code_version(spec.rules_of(pool), spec.shaper)

    @multi_asset(
        name=naming.definition_name(f"etl_{spec.name}_{pool}"),
        specs=[
            AssetSpec(
                **naming.attributes("staging", pool),
                deps=raw_deps,
                kinds=POOL_KINDS,
                code_version=version,
                automation_condition=eager,
                freshness_policy=freshness_policy(spec.freshness),
                description=f"Output records of spec {spec.name} ({spec.path.name}).",
            ),
            AssetSpec(
                **naming.attributes("done", pool),
                deps=raw_deps,
                kinds=POOL_KINDS,
                code_version=version,
                automation_condition=eager,
                freshness_policy=freshness_policy(spec.freshness),
                description=f"Done records: input events of {spec.name} consumed into {pool}.",
            ),
        ],
        check_specs=checks,
        can_subset=False,
        required_resource_keys=resource_keys(naming),
    )
    def etl_pool(context: AssetExecutionContext) -> Iterator[MaterializeResult | AssetCheckResult]:
        with zync_step(context, naming) as step:  # not across a yield: Dagster's code runs there
            session = step.session()
            (result,) = run_etl(session, spec, pool=pool)
            wrote = (
                f"wrote outputs {result.outputs}, {result.done} done records (ETL run {result.run})"
                if result.run is not None
                else f"wrote nothing ({result.note or 'nothing to commit'})"
            )
            context.log.info(
                f"{spec.name} → {pool}: read {result.read} raw events (from cursors "
                f"{result.previous.cursors or 'start'} to raw end offsets {result.raw_seen}); "
                f"{wrote}; expired {result.expired}, still pending {result.pending}"
            )
            events = list(etl_materializations(session, spec, result, naming))
        yield from events

    return etl_pool


def etl_materializations(
    session: SparkSession, spec: Spec, result: EtlResult, naming: Naming = DEFAULT_NAMING
) -> Iterator[MaterializeResult | AssetCheckResult]:
    """What an ETL commit records in Dagster, from a run or from `zync run`."""
    pool = result.pool
    staging, done = naming.key("staging", pool), naming.key("done", pool)
    expired = expired_total(lambda: session, spec, pool)
    metadata = {
        **etl_metadata(result),
        "lag": sum(p.lag for p in input_lags(spec, pool, result.cursors)),
        "expired_total": expired,
    }
    yield MaterializeResult(asset_key=staging, metadata=metadata)
    yield MaterializeResult(asset_key=done, metadata=metadata)
    for check in run_checks(session, result):
        asset = done if check.name == "no_duplicate_done_records" else staging
        yield AssetCheckResult(
            asset_key=asset, check_name=check.name, passed=check.passed,
            metadata={"detail": check.detail},
        )  # fmt: skip
    yield dead_letter_check(staging, "no_expired_events", pool, expired)
    if gated(spec):
        yield stale_transactions_check(staging, spec, result)


# An open source transaction older than this is worth a look (a connector stopped between
# a transaction's events, or its END went missing): the asset check warns.
STALE_TRANSACTION_S = 15 * 60


def gated(spec: Spec) -> bool:
    """Whether a rule of the spec waits for source transactions or groups (a view's outputs
    come whole per pass, but nothing of it waits)."""
    return any(rule.gate is not None or rule.type == "txn" for rule in spec.transforms)


def stale_transactions_check(key: AssetKey, spec: Spec, result: EtlResult) -> AssetCheckResult:
    """WARN when a source transaction has been open longer than STALE_TRANSACTION_S."""
    age = pending_age_seconds(result.transactions.oldest_open)
    return AssetCheckResult(
        asset_key=key,
        check_name="no_stale_transactions",
        passed=age <= STALE_TRANSACTION_S,
        severity=AssetCheckSeverity.WARN,
        metadata={
            "open_transactions": result.transactions.open,
            "oldest_open_transaction_age_s": age,
            "bound_s": STALE_TRANSACTION_S,
            "inspect": f"zync etl {spec.path} --pending",
        },
    )
