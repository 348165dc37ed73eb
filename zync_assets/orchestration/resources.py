"""Dagster resources: Kafka, the schema registry and Spark, configured like the CLI.

Every field defaults to None, meaning "as the environment / resources/*.json say",
so the CLI and Dagster read one configuration. Their keys start with `zync_`, so that
they sit beside a host project's own `spark` or `kafka` resources.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dagster import ConfigurableResource
from dagster_pyspark import LazyPySparkResource
from pydantic import Field
from pyspark.sql import SparkSession

from zync_assets.core.settings import KafkaSettings, kafka_settings, registry_settings
from zync_assets.kafka.registry import Registry


class KafkaResource(ConfigurableResource):
    bootstrap_servers: str | None = None

    def settings(self) -> KafkaSettings:
        base = kafka_settings()
        if self.bootstrap_servers:
            return dataclasses.replace(base, bootstrap_servers=self.bootstrap_servers)
        return base


class SchemaRegistryResource(ConfigurableResource):
    url: str | None = None

    def registry(self) -> Registry:
        base = registry_settings()
        return Registry(dataclasses.replace(base, url=self.url) if self.url else base)


class SparkResource(LazyPySparkResource):
    """dagster-pyspark's lazy SparkSession resource, made the way zync makes its sessions:
    Delta's extension and catalog, the jar cache and zync's functions, and for an `sc://`
    master Spark Connect's checks and retries. The session is the process's: on the Spark
    Connect server `ZYNC_SPARK_MASTER` names (the stack sets it for its Dagster: runs share
    one warm Spark), else a local JVM per run (use the in-process executor).

    `spark_config`: Spark properties read over zync's own (the package's defaults, then the
    project's spark.conf); a `spark.master` in it wins over ZYNC_SPARK_MASTER."""

    spark_config: dict[str, Any] = Field(default_factory=dict)

    @property
    def spark_session(self) -> SparkSession:
        from zync_assets.spark.session import spark_session

        return spark_session("zync-dagster", conf={k: str(v) for k, v in self.spark_config.items()})

    @property
    def spark_context(self) -> Any:
        return self.spark_session.sparkContext

    def session(self) -> SparkSession:
        return self.spark_session


def zync_resources() -> dict[str, ConfigurableResource]:
    """The resources zync's assets, sensors and jobs ask for, by key."""
    return {
        "zync_spark": SparkResource(),
        "zync_kafka": KafkaResource(),
        "zync_schema_registry": SchemaRegistryResource(),
    }
