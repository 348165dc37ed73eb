"""zync as a Dagster Component: in a `dg` project, a `defs.yaml` naming a folder of spec
files is all it takes.

    # src/<project>/defs/zync/defs.yaml
    type: zync_assets.orchestration.component.ZyncComponent
    attributes:
      specs: specs              # a folder of spec files, beside this defs.yaml (default)
      sensor_interval_s: 5      # optional: how often the sensors look (default 1)
      key_prefix: shop          # optional: every key (and sensor and job name) under it

It builds what `build_zync_definitions` builds (no executor, `zync_` resources, sensors
that select only zync's assets), so it sits beside the project's other components.

(No `from __future__ import annotations` here: Dagster reads the fields' type hints.)
"""

from dataclasses import dataclass

from dagster import Definitions
from dagster.components import Component, ComponentLoadContext, Resolvable

from zync_assets.core.errors import ZyncError
from zync_assets.orchestration.definitions import build_zync_definitions
from zync_assets.specs.model import load_specs


@dataclass
class ZyncComponent(Component, Resolvable):
    """zync's assets, checks and sensors for every spec file in a folder."""

    specs: str = "specs"
    sensor_interval_s: int | None = None
    key_prefix: str | None = None

    def build_defs(self, context: ComponentLoadContext) -> Definitions:
        folder = context.path / self.specs  # an absolute `specs` stays as it is
        if not folder.is_dir():
            raise ZyncError(
                f"{context.path / 'defs.yaml'}: specs folder {folder} does not exist: "
                "give `specs:` a folder of zync spec files, relative to the defs.yaml"
            )
        return build_zync_definitions(
            load_specs(folder), sensor_interval_s=self.sensor_interval_s, key_prefix=self.key_prefix
        )
