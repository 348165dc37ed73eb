"""zync's own Dagster code location: every spec in `etl_specs/` (or `$ZYNC_SPECS`).

Load with `dagster dev -m zync_assets.definitions` (or workspace.yaml). It runs every
run in-process: one Spark session per run, not one per step. In a project of your own,
call `zync_assets.orchestration.definitions.build_zync_definitions` instead (README, "In
your own Dagster project"): this module reads the spec folder when imported.
"""

from __future__ import annotations

from dagster import in_process_executor

from zync_assets.orchestration.definitions import build_zync_definitions
from zync_assets.specs.model import find_specs, load_spec, spec_folder

# Not load_specs: a missing default folder is an empty location here, not an error.
defs = build_zync_definitions(
    [load_spec(p) for p in find_specs(spec_folder())], executor=in_process_executor
)
