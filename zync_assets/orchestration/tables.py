"""`table/<name>` per spec table: a lake table kept from its pool, after the pool gains data.

(No `from __future__ import annotations`: Dagster reads the asset functions' type hints.)
"""

import datetime as dt
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckResult,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    MaterializeResult,
    MetadataValue,
    asset,
)

from zync_assets.core.offsets import offsets_to_json
from zync_assets.orchestration.conditions import after_checked_upstream, freshness_policy
from zync_assets.orchestration.naming import DEFAULT_NAMING, Naming
from zync_assets.orchestration.resources import ZyncStep, resource_keys, zync_step
from zync_assets.orchestration.versions import POOL_KINDS, code_version
from zync_assets.pipeline.failures import clear_failure, explain, record_failure
from zync_assets.specs.model import Spec
from zync_assets.specs.tables import TableDef
from zync_assets.tables.apply import TableResult, run_tables


def table_key(name: str) -> AssetKey:
    """A lake table's key as zync's own code location names it."""
    return DEFAULT_NAMING.key("table", name)


def table_metadata(result: TableResult) -> dict[str, Any]:
    return {
        "run": result.run if result.run is not None else "nothing new",
        "read": result.read,
        "upserts": result.upserts,
        "deletes": result.deletes,
        "ignored": result.ignored,
        "cursors": MetadataValue.json(offsets_to_json(result.cursors)),
    }


# Whether the table's passes apply: fails while a pass fails (a column type that cannot be
# read, a changed column list), with the reason, and passes again once one commits.
APPLIES_CHECK = "applies"


def table_materialization(
    result: TableResult, naming: Naming = DEFAULT_NAMING
) -> MaterializeResult:
    """What a table's commit records in Dagster, from a run or from `zync run`."""
    key = naming.key("table", result.table)
    return MaterializeResult(
        asset_key=key,
        metadata=table_metadata(result),
        check_results=[AssetCheckResult(asset_key=key, check_name=APPLIES_CHECK, passed=True)],
    )


def table_failed(name: str, message: str) -> AssetCheckEvaluation:
    """A failed pass of table `name`, as `zync run` reports it (a Dagster run fails)."""
    return AssetCheckEvaluation(
        asset_key=table_key(name), check_name=APPLIES_CHECK, passed=False,
        metadata={"error": message},
    )  # fmt: skip


def table_assets(spec: Spec, naming: Naming = DEFAULT_NAMING) -> list:
    return [_table_asset(spec, table, naming) for table in spec.tables]


def _table_asset(spec: Spec, table: TableDef, naming: Naming):
    kind = "history (SCD2)" if table.scd2 else "current state (SCD1)"
    named = naming.attributes("table", table.name, tags={"zync/stage": "table"})
    source = naming.key("staging" if table.from_staging else "raw", table.source_pool)

    @asset(
        **named,
        deps=[source],
        kinds=POOL_KINDS,
        code_version=code_version(table),
        automation_condition=after_checked_upstream(),
        freshness_policy=freshness_policy(spec.freshness),
        description=f"Lake table {table.name}: {kind} of topic {table.source}, keys "
        f"{', '.join(table.keys)} ({spec.path.name}).",
        # A run that carries a change to the output topic too sends it first: the
        # warehouse never waits for a MERGE into a lake table (Dagster's executors start
        # the ready step of highest priority; the others have 0).
        op_tags={"dagster/priority": "-1"},
        check_specs=[AssetCheckSpec(APPLIES_CHECK, asset=named["key"])],
        required_resource_keys=resource_keys(naming),
    )
    def lake_table(context: AssetExecutionContext) -> MaterializeResult:
        with zync_step(context, naming) as step:
            return _apply(context, step, spec, table, naming)

    return lake_table


def _apply(
    context: AssetExecutionContext, step: ZyncStep, spec: Spec, table: TableDef, naming: Naming
) -> MaterializeResult:
    """Brings lake table `table` up to date with its source pool."""
    what = f"table {table.name}"
    try:
        (result,) = run_tables(step.session(), spec, step.registry(), only=table.name)
    except Exception as exc:  # recorded for `zync status`; the run fails with it
        record_failure(what, explain(exc), dt.datetime.now(dt.UTC))
        raise
    clear_failure(what)
    if result.run is None:
        context.log.info(f"table {table.name}: nothing new in {table.source_pool}")
    else:
        context.log.info(
            f"table {table.name}: run {result.run} applied {result.upserts} upserts and "
            f"{result.deletes} deletes of {result.read} events ({result.ignored} change no row)"
        )
    return table_materialization(result, naming)
