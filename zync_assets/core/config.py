"""One configuration object: where the lake is, and how to reach Kafka, the registry and Spark.

The front ends make it once — the CLI from the environment (`ZyncConfig.from_env`), a
Dagster project in Python (`build_zync_definitions(specs, config=...)`) — and put it in
force around the stage functions they call (`in_force`). The stages read the one in
force (`current`) instead of the environment, so one process can run two lakes: each
Dagster op puts its own definitions' configuration in force for its step.

Outside any `in_force` block `current()` is the environment's, what the CLI reads: a
library call of a stage function behaves as `zync` does.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, copy_context
from dataclasses import dataclass, field
from pathlib import Path
from typing import ParamSpec, TypeVar

from zync_assets.core.errors import ZyncError
from zync_assets.core.settings import (
    CatalogSettings,
    KafkaSettings,
    RegistrySettings,
    SinkSettings,
    catalog_settings,
    discovery_interval_seconds,
    kafka_settings,
    outage_retry_seconds,
    registry_settings,
    sensor_interval_seconds,
    sink_settings,
    spark_master,
)

S3_SCHEMES = ("s3a://", "s3://")
DEFAULT_LAKE = ".zync/lake"


@dataclass(frozen=True)
class LakeSettings:
    """The lake: a folder (made absolute against the working directory) or
    `s3a://bucket/prefix`, with the S3 API server's endpoint and keys for a bucket."""

    location: str = DEFAULT_LAKE
    s3_endpoint: str = ""  # empty: AWS S3 itself
    aws_access_key_id: str | None = field(default=None, repr=False)
    aws_secret_access_key: str | None = field(default=None, repr=False)
    aws_region: str = "us-east-1"

    def uri(self) -> str:
        """An absolute folder, or an `s3a://bucket/prefix` URL (no trailing slash)."""
        if self.location.startswith(S3_SCHEMES):
            return "s3a://" + self.location.split("://", 1)[1].rstrip("/")
        return str(Path(self.location).resolve())


@dataclass(frozen=True)
class ZyncConfig:
    """Everything zync's stages read that is not in a spec. Every field has the local
    stack's default, so `ZyncConfig(lake=LakeSettings("/data/lake"))` is a whole one."""

    lake: LakeSettings = field(default_factory=LakeSettings)
    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    registry: RegistrySettings = field(default_factory=RegistrySettings)
    # `local[*]` (a JVM in this process), a cluster's master URL, or `sc://host:port`.
    spark_master: str = "local[*]"
    # Spark properties read over zync's own (the package's defaults, then spark.conf).
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    sensor_interval_s: int = 1  # how often Dagster's sensors read the end offsets
    outage_retry_s: float = 300.0  # how long a continuous command rides out an outage
    # How often a running pipeline asks Kafka for new topics its patterns take.
    discovery_interval_s: float = 10.0
    # Where lake tables are registered by name (none by default): spark/catalog.py.
    catalog: CatalogSettings = field(default_factory=CatalogSettings)
    # The Kafka Connect worker whose sinks read the output topics (`zync status`).
    sinks: SinkSettings = field(default_factory=SinkSettings)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ZyncConfig:
        """The configuration the environment variables (and `resources/*.json`, then
        `~/.zync/*.json`) give: what `zync` uses. DESIGN.md names each variable."""
        env = os.environ if env is None else env
        lake = LakeSettings(
            location=env.get("ZYNC_LAKE") or DEFAULT_LAKE,
            s3_endpoint=env.get("ZYNC_S3_ENDPOINT", ""),
            aws_access_key_id=env.get("AWS_ACCESS_KEY_ID"),
            aws_secret_access_key=env.get("AWS_SECRET_ACCESS_KEY"),
            aws_region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1",
        )
        return cls(
            lake=lake,
            kafka=kafka_settings(env),
            registry=registry_settings(env),
            spark_master=spark_master(env),
            sensor_interval_s=sensor_interval_seconds(env),
            outage_retry_s=outage_retry_seconds(env),
            discovery_interval_s=discovery_interval_seconds(env),
            catalog=catalog_settings(env),
            sinks=sink_settings(env),
        )

    def with_lake(self, location: str) -> ZyncConfig:
        """This configuration with its lake at `location` (the same S3 settings)."""
        return dataclasses.replace(self, lake=dataclasses.replace(self.lake, location=location))


_IN_FORCE: ContextVar[ZyncConfig | None] = ContextVar("zync_config", default=None)


def current() -> ZyncConfig:
    """The configuration in force: the innermost `in_force`, else the environment's."""
    return _IN_FORCE.get() or ZyncConfig.from_env()


@contextmanager
def in_force(config: ZyncConfig) -> Iterator[ZyncConfig]:
    """Puts `config` in force for the stage functions called inside the block (this
    thread only: a thread a stage starts takes it along with `carried`)."""
    if not isinstance(config, ZyncConfig):
        raise ZyncError(f"expected a ZyncConfig, got {type(config).__name__}")
    token = _IN_FORCE.set(config)
    try:
        yield config
    finally:
        _IN_FORCE.reset(token)


P = ParamSpec("P")
R = TypeVar("R")


def carried(function: Callable[P, R]) -> Callable[P, R]:
    """`function`, to run in another thread under the configuration in force here (a
    new thread starts with none in force: it would read the environment's)."""
    context = copy_context()

    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        return context.run(function, *args, **kwargs)

    return run
