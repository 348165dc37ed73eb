"""zync as a Dagster Component: in a `dg` project, a `defs.yaml` naming a folder of spec
files is all it takes.

    # src/<project>/defs/zync/defs.yaml
    type: zync_assets.orchestration.component.ZyncComponent
    attributes:
      specs: specs              # a folder of spec files, beside this defs.yaml (default)
      sensor_interval_s: 5      # optional: how often the sensors look (default 1)
      key_prefix: shop          # optional: every key (and sensor and job name) under it
      lake: s3a://lake/shop     # optional: the lake, Kafka, registry and Spark master, each
      kafka_bootstrap_servers: broker:9092       # over the environment's (ZYNC_LAKE, …);
      schema_registry_url: http://registry:8081  # secrets stay in the environment
      spark_master: sc://spark:15002

It builds what `build_zync_definitions` builds (no executor, `zync_` resources, sensors
that select only zync's assets), so it sits beside the project's other components.

(No `from __future__ import annotations` here: Dagster reads the fields' type hints.)
"""

import dataclasses
from dataclasses import dataclass

from dagster import Definitions
from dagster.components import Component, ComponentLoadContext, Resolvable

from zync_assets.core.config import ZyncConfig
from zync_assets.core.errors import ZyncError
from zync_assets.orchestration.definitions import build_zync_definitions
from zync_assets.specs.model import load_specs


@dataclass
class ZyncComponent(Component, Resolvable):
    """zync's assets, checks and sensors for every spec file in a folder."""

    specs: str = "specs"
    sensor_interval_s: int | None = None
    key_prefix: str | None = None
    lake: str | None = None
    kafka_bootstrap_servers: str | None = None
    schema_registry_url: str | None = None
    spark_master: str | None = None

    def config(self) -> ZyncConfig | None:
        """The environment's configuration with the fields given here over it; None (each
        run reads its own environment) when none is given."""
        given = (
            self.lake,
            self.kafka_bootstrap_servers,
            self.schema_registry_url,
            self.spark_master,
        )
        if all(value is None for value in given):
            return None
        config = ZyncConfig.from_env()
        return dataclasses.replace(
            config.with_lake(self.lake or config.lake.location),
            kafka=dataclasses.replace(
                config.kafka,
                bootstrap_servers=self.kafka_bootstrap_servers or config.kafka.bootstrap_servers,
            ),
            registry=dataclasses.replace(
                config.registry, url=self.schema_registry_url or config.registry.url
            ),
            spark_master=self.spark_master or config.spark_master,
        )

    def build_defs(self, context: ComponentLoadContext) -> Definitions:
        folder = context.path / self.specs  # an absolute `specs` stays as it is
        if not folder.is_dir():
            raise ZyncError(
                f"{context.path / 'defs.yaml'}: specs folder {folder} does not exist: "
                "give `specs:` a folder of zync spec files, relative to the defs.yaml"
            )
        return build_zync_definitions(
            load_specs(folder), config=self.config(), sensor_interval_s=self.sensor_interval_s,
            key_prefix=self.key_prefix,
        )  # fmt: skip
