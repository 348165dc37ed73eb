"""`table/<name>` per spec table: a lake table kept from its pool, after the pool gains data.

(No `from __future__ import annotations`: Dagster reads the asset functions' type hints.)
"""

import datetime as dt
import json
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckResult,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AutomationCondition,
    MaterializeResult,
    asset,
)

from zync_assets.ingest.ranges import offsets_to_json
from zync_assets.orchestration.raw import raw_key
from zync_assets.orchestration.resources import SchemaRegistryResource, SparkResource
from zync_assets.orchestration.staging import staging_key
from zync_assets.orchestration.versions import POOL_KINDS, code_version
from zync_assets.spec import Spec
from zync_assets.stage_failures import clear_failure, explain, record_failure
from zync_assets.tables.apply import TableResult, run_tables
from zync_assets.tables.definition import TableDef


def table_key(name: str) -> AssetKey:
    return AssetKey(["table", name])


def table_metadata(result: TableResult) -> dict[str, Any]:
    return {
        "run": result.run if result.run is not None else "nothing new",
        "read": result.read,
        "upserts": result.upserts,
        "deletes": result.deletes,
        "ignored": result.ignored,
        "cursors": json.dumps(offsets_to_json(result.cursors)),
    }


# Whether the table's passes apply: fails while a pass fails (a column type that cannot be
# read, a changed column list), with the reason, and passes again once one commits.
APPLIES_CHECK = "applies"


def table_materialization(result: TableResult) -> MaterializeResult:
    """What a table's commit records in Dagster, from a run or from `zync run`."""
    key = table_key(result.table)
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


def table_assets(spec: Spec) -> list:
    return [_table_asset(spec, table) for table in spec.tables]


def _source_key(table: TableDef) -> AssetKey:
    return staging_key(table.source_pool) if table.from_staging else raw_key(table.source_pool)


def _table_asset(spec: Spec, table: TableDef):
    kind = "history (SCD2)" if table.scd2 else "current state (SCD1)"

    @asset(
        key=table_key(table.name),
        deps=[_source_key(table)],
        group_name="tables",
        kinds=POOL_KINDS,
        code_version=code_version(table),
        automation_condition=AutomationCondition.eager(),
        description=f"Lake table {table.name}: {kind} of topic {table.source}, keys "
        f"{', '.join(table.keys)} ({spec.path.name}).",
        tags={"zync/stage": "table"},
        # A run that carries a change to the output topic too sends it first: the
        # warehouse never waits for a MERGE into a lake table (Dagster's executors start
        # the ready step of highest priority; the others have 0).
        op_tags={"dagster/priority": "-1"},
        check_specs=[AssetCheckSpec(APPLIES_CHECK, asset=table_key(table.name))],
    )
    def lake_table(
        context: AssetExecutionContext,
        zync_spark: SparkResource,
        zync_schema_registry: SchemaRegistryResource,
    ) -> MaterializeResult:
        registry = zync_schema_registry.registry()
        what = f"table {table.name}"
        try:
            (result,) = run_tables(zync_spark.session(), spec, registry, only=table.name)
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
        return table_materialization(result)

    return lake_table
