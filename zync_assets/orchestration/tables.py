"""`table/<name>` per spec table: a lake table kept from its pool, after the pool gains data;
`table/<spec>_tables` per table pattern: all the tables it makes, one per topic.

A pattern's tables are one asset, not one each: a table that appears with a new topic
needs no new definition (no code change, no reload), and the asset's materializations
list each table's pass (a Markdown table in the UI) and its check names a failing one.

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
    AssetsDefinition,
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
from zync_assets.specs.tables import TableDef, TablePattern
from zync_assets.tables.apply import TableResult, compile_tables
from zync_assets.tables.expand import lake_tables
from zync_assets.tables.together import apply_tables, run_tables


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


def _table_asset_args(
    spec: Spec, named: dict[str, Any], deps: list[AssetKey], definition: object, naming: Naming,
    description: str,
) -> dict[str, Any]:  # fmt: skip
    """What a lake table's asset (or a pattern's) is made with."""
    return {
        **named,
        "deps": deps,
        "kinds": POOL_KINDS,
        "code_version": code_version(definition),
        "automation_condition": after_checked_upstream(),
        "freshness_policy": freshness_policy(spec.freshness),
        "description": description,
        # A run that carries a change to the output topic too sends it first: the
        # warehouse never waits for a MERGE into a lake table (Dagster's executors start
        # the ready step of highest priority; the others have 0).
        "op_tags": {"dagster/priority": "-1"},
        "check_specs": [AssetCheckSpec(APPLIES_CHECK, asset=named["key"])],
        "required_resource_keys": resource_keys(naming),
    }


def table_assets(spec: Spec, naming: Naming = DEFAULT_NAMING) -> list:
    named = [_table_asset(spec, table, naming) for table in spec.tables]
    return named + [
        _pattern_asset(spec, number, pattern, naming)
        for number, pattern in enumerate(spec.table_patterns, start=1)
    ]


def pattern_asset_name(spec: Spec, number: int) -> str:
    """The asset name of the spec's table pattern `number` (1: its first)."""
    return f"{spec.name}_tables" + ("" if number == 1 else f"_{number}")


def pattern_materialization(
    spec: Spec, number: int, results: list[TableResult], failures: dict[str, str],
    naming: Naming = DEFAULT_NAMING,
) -> MaterializeResult:  # fmt: skip
    """What a pass of a pattern's tables records: a row per table it applied or that
    failed, and its check (failing while a table fails, with the table and reason)."""
    key = naming.key("table", pattern_asset_name(spec, number))
    lines = ["| table | run | upserts | deletes | truncates | read |", "|---|---|---|---|---|---|"]
    lines += [
        f"| {r.table} | {r.run if r.run is not None else '—'} | {r.upserts} | {r.deletes} "
        f"| {r.truncates} | {r.read} |"
        for r in sorted(results, key=lambda r: r.table)
    ]
    lines += [f"| {name} | failed: {why} | | | | |" for name, why in sorted(failures.items())]
    applied = [r for r in results if r.run is not None]
    return MaterializeResult(
        asset_key=key,
        metadata={
            "tables": len(lake_tables(spec).of_pattern(number)),
            "applied": len(applied),
            "upserts": sum(r.upserts for r in applied),
            "deletes": sum(r.deletes for r in applied),
            "passes": MetadataValue.md("\n".join(lines)),
            "cursors": MetadataValue.json(
                {r.table: offsets_to_json(r.cursors) for r in applied}
            ),
        },
        check_results=[AssetCheckResult(
            asset_key=key, check_name=APPLIES_CHECK, passed=not failures,
            metadata={"failing": MetadataValue.json(failures)},
        )],
    )  # fmt: skip


def _pattern_asset(
    spec: Spec, number: int, pattern: TablePattern, naming: Naming
) -> AssetsDefinition:
    name = pattern_asset_name(spec, number)
    named = naming.attributes("table", name, tags={"zync/stage": "table"})
    template = pattern.template
    kind = "history (SCD2)" if template.scd2 else "current state (SCD1)"
    # In backticks: the UI renders a description as Markdown, which would eat `\.`.
    excluded = ", but " + ", ".join(f"`{e}`" for e in pattern.topics.exclude)
    excluded = excluded if pattern.topics.exclude else ""

    @asset(**_table_asset_args(
        spec, named, [naming.key("raw", pool) for pool in spec.raw_pools()], pattern, naming,
        f"Lake tables, one per topic matching `{pattern.topics.pattern}`{excluded}, named "
        f"`{template.name}`: the {kind} of each ({spec.path.name}).",
    ))  # fmt: skip
    def lake_tables_of_pattern(context: AssetExecutionContext) -> MaterializeResult:
        with zync_step(context, naming) as step:
            return _apply_pattern(context, step, spec, number, naming)

    return lake_tables_of_pattern


def _apply_pattern(
    context: AssetExecutionContext, step: ZyncStep, spec: Spec, number: int, naming: Naming
) -> MaterializeResult:
    """A pass of each table pattern `number` makes; a failing table is recorded (for
    `zync status` and the check) and the others go on."""
    found = lake_tables(spec)
    pattern = spec.table_patterns[number - 1]
    failures = {
        f"of {topic}": why for topic, why in found.refused.items() if pattern.topics.matches(topic)
    }
    results = []
    now = dt.datetime.now(dt.UTC)
    session = step.session()
    compiled = compile_tables(session, spec, found.of_pattern(number))
    for table, outcome in zip(
        compiled, apply_tables(session, compiled, now, step.registry()), strict=True
    ):
        what = f"table {table.table.name}"
        if isinstance(outcome, Exception):  # this table's: recorded, and the others go on
            failures[table.table.name] = explain(outcome)
            record_failure(what, failures[table.table.name], dt.datetime.now(dt.UTC))
            continue
        results.append(outcome)
        clear_failure(what)
    applied = sum(1 for r in results if r.run is not None)
    context.log.info(
        f"{len(results) + len(failures)} tables of {pattern.topics.pattern}: {applied} applied, "
        f"{len(failures)} failed"
    )
    return pattern_materialization(spec, number, results, failures, naming)


def _table_asset(spec: Spec, table: TableDef, naming: Naming) -> AssetsDefinition:
    kind = "history (SCD2)" if table.scd2 else "current state (SCD1)"
    named = naming.attributes("table", table.name, tags={"zync/stage": "table"})
    source = naming.key("staging" if table.from_staging else "raw", table.source_pool)

    keys = ", ".join(table.keys) or "the message key's fields"

    @asset(**_table_asset_args(
        spec, named, [source], table, naming,
        f"Lake table {table.name}: {kind} of topic {table.source}, keys {keys} "
        f"({spec.path.name}).",
    ))  # fmt: skip
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
