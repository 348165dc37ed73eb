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
from zync_assets.orchestration.resources import SparkResource


def maintenance_job(pools: list[str], name: str = "pool_maintenance") -> JobDefinition:
    paths = [p for pool in pools for p in (pool_path(pool), dead_letter_path(pool))]

    @op(name="maintain_pools", description="Compact, carry writer states, vacuum.")
    def maintain_pools_op(context: OpExecutionContext, zync_spark: SparkResource) -> None:
        from zync_assets.pipeline.maintenance import maintain_pools

        for done in maintain_pools(zync_spark.session(), paths):
            context.log.info(f"{done.describe()} ({done.seconds:.1f}s)")

    @job(name=name, description=f"Upkeep of pools {', '.join(pools)}.")
    def pool_maintenance() -> None:
        maintain_pools_op()

    return pool_maintenance


def maintenance_schedule(job_def: JobDefinition, pools: list[str]) -> ScheduleDefinition:
    def no_pipeline_keeps_them(_context: ScheduleEvaluationContext) -> bool:
        """`zync run --follow` keeps its own pools: run when some pool has no pipeline."""
        return any(pipeline_feeding(pool) is None for pool in pools)

    return ScheduleDefinition(
        job=job_def,
        cron_schedule="7 * * * *",  # hourly, off the hour's crowd
        default_status=DefaultScheduleStatus.RUNNING,
        should_execute=no_pipeline_keeps_them,
        description="Hourly upkeep of the pools under many small commits (skipped while "
        "`zync run --follow` feeds them all: it keeps them itself).",
    )
