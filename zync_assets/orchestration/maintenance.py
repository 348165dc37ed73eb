"""Dagster's `pool_maintenance` job: compaction, carried states and vacuum, hourly.

Sensor-driven runs commit a few times a minute; this keeps their pools as fast as
`zync run --follow`'s own upkeep keeps its pools (see zync_assets/pipeline/maintenance.py).
"""

from dagster import (
    DefaultScheduleStatus,
    JobDefinition,
    OpExecutionContext,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    job,
    op,
)

from zync_assets.lake.lease import pipeline_feeding
from zync_assets.lake.pools import dead_letter_path, pool_path
from zync_assets.orchestration.naming import DEFAULT_NAMING, Naming
from zync_assets.orchestration.resources import resource_keys, zync_step


def maintenance_job(pools: list[str], naming: Naming = DEFAULT_NAMING) -> JobDefinition:
    @op(
        name=naming.definition_name("maintain_pools"),
        description="Compact, carry writer states, vacuum.",
        required_resource_keys=resource_keys(naming),
    )
    def maintain_pools_op(context: OpExecutionContext) -> None:
        from zync_assets.pipeline.maintenance import maintain_pools

        with zync_step(context, naming) as step:
            paths = [p for pool in pools for p in (pool_path(pool), dead_letter_path(pool))]
            for done in maintain_pools(step.session(), paths):
                context.log.info(f"{done.describe()} ({done.seconds:.1f}s)")

    @job(
        name=naming.definition_name("pool_maintenance"),
        description=f"Upkeep of pools {', '.join(pools)}.",
    )
    def pool_maintenance() -> None:
        maintain_pools_op()

    return pool_maintenance


def maintenance_schedule(
    job_def: JobDefinition, pools: list[str], naming: Naming = DEFAULT_NAMING
) -> ScheduleDefinition:
    def no_pipeline_keeps_them(context: ScheduleEvaluationContext) -> bool:
        """`zync run --follow` keeps its own pools: run when some pool has no pipeline."""
        with zync_step(context, naming):
            return any(pipeline_feeding(pool) is None for pool in pools)

    return ScheduleDefinition(
        job=job_def,
        cron_schedule="7 * * * *",  # hourly, off the hour's crowd
        default_status=DefaultScheduleStatus.RUNNING,
        should_execute=no_pipeline_keeps_them,
        required_resource_keys=resource_keys(naming),
        description="Hourly upkeep of the pools under many small commits (skipped while "
        "`zync run --follow` feeds them all: it keeps them itself).",
    )
