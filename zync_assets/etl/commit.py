"""An ETL pass's one Delta commit to its staging pool, written once per run (a Delta
transaction id); expired.py copies its expired events to the dead-letter table."""

from __future__ import annotations

from pyspark.sql import DataFrame

from zync_assets.core.staging_rows import KIND
from zync_assets.etl.state import app_id
from zync_assets.lake.delta_writes import append_once


def append_pass(
    frame: DataFrame, path: str, spec: str, pool: str, run: int, meta: str,
    merge_schema: bool = False,
) -> None:  # fmt: skip
    append_once(
        frame, path, app_id(spec, pool), run, meta, partition_by=KIND, merge_schema=merge_schema,
        conflict=f"another ETL wrote to staging pool {pool} while run {run} of {spec} was "
        "writing; this run wrote nothing: run it again",
    )  # fmt: skip
