"""Dagster resources: the lake, Kafka, the schema registry and Spark — one ZyncConfig.

`zync_resources(config, naming)` makes the four from a configuration; a field left None
means "as the environment / resources/*.json say" (read in the run's process, as the CLI
reads them), so zync's own code location needs no configuration in Python. Their keys
start with `zync_` (`<prefix>_zync_` under a key prefix), so that they sit beside a host
project's own `spark` or `kafka` resources, and two zync definitions each keep theirs.

Every asset, check and sensor of zync's runs its stage functions inside `zync_step`: the
definitions' configuration is in force for the step (core/config.py), so two lakes in
one process each get their own.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from dagster import ConfigurableResource, EnvVar
from dagster_pyspark import LazyPySparkResource
from pydantic import Field
from pyspark.sql import SparkSession

from zync_assets.core.config import LakeSettings, ZyncConfig, in_force
from zync_assets.core.settings import KafkaSettings, RegistrySettings
from zync_assets.kafka.registry import Registry
from zync_assets.orchestration.naming import DEFAULT_NAMING, Naming


def _given(resource: ConfigurableResource, settings: Any) -> dict[str, Any]:
    """The resource's fields that are set: they replace the settings' fields of their name."""
    return {
        name: value for name in (f.name for f in dataclasses.fields(settings))
        if name in type(resource).model_fields and (value := getattr(resource, name)) is not None
    }  # fmt: skip


class LakeResource(ConfigurableResource):
    """The lake: a folder or `s3a://bucket/prefix` (ZYNC_LAKE), and an S3 API server's
    endpoint and keys (ZYNC_S3_ENDPOINT, AWS_ACCESS_KEY_ID, …)."""

    location: str | None = None
    s3_endpoint: str | None = None
    aws_access_key_id: str | None = None
    aws_secret_access_key: str | None = None
    aws_region: str | None = None

    def settings(self, base: LakeSettings | None = None) -> LakeSettings:
        base = ZyncConfig.from_env().lake if base is None else base
        return dataclasses.replace(base, **_given(self, LakeSettings))


class KafkaResource(ConfigurableResource):
    """The brokers and their security (the ZYNC_KAFKA_* variables)."""

    bootstrap_servers: str | None = None
    security_protocol: str | None = None
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_ca: str | None = None
    ssl_cert: str | None = None
    ssl_key: str | None = None

    def settings(self, base: KafkaSettings | None = None) -> KafkaSettings:
        base = ZyncConfig.from_env().kafka if base is None else base
        return dataclasses.replace(base, **_given(self, KafkaSettings))


class SchemaRegistryResource(ConfigurableResource):
    """The Confluent-API schema registry (the ZYNC_SCHEMA_REGISTRY_* variables)."""

    url: str | None = None
    user: str | None = None
    password: str | None = None
    ca: str | None = None

    def settings(self, base: RegistrySettings | None = None) -> RegistrySettings:
        base = ZyncConfig.from_env().registry if base is None else base
        return dataclasses.replace(base, **_given(self, RegistrySettings))

    def registry(self) -> Registry:
        return Registry(self.settings())


class SparkResource(LazyPySparkResource):
    """dagster-pyspark's lazy SparkSession resource, made the way zync makes its sessions:
    Delta's extension and catalog, the jar cache and zync's functions, and for an `sc://`
    master Spark Connect's checks and retries. The session is the process's: on the Spark
    Connect server the master names (the stack sets ZYNC_SPARK_MASTER for its Dagster:
    runs share one warm Spark), else a local JVM per run (use the in-process executor).

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


@dataclass(frozen=True)
class ZyncResources:
    """One definitions' four resources, as a step gets them."""

    lake: LakeResource
    kafka: KafkaResource
    registry: SchemaRegistryResource
    spark: SparkResource

    def config(self) -> ZyncConfig:
        """The configuration they make: the environment's, with what they set over it."""
        base = ZyncConfig.from_env()
        conf = {k: str(v) for k, v in self.spark.spark_config.items()}
        return dataclasses.replace(
            base,
            lake=self.lake.settings(base.lake),
            kafka=self.kafka.settings(base.kafka),
            registry=self.registry.settings(base.registry),
            spark_master=conf.pop("spark.master", base.spark_master),
            spark_conf=conf,
        )


RESOURCE_NAMES = ("zync_lake", "zync_kafka", "zync_schema_registry", "zync_spark")


def resource_keys(naming: Naming = DEFAULT_NAMING) -> set[str]:
    """The keys a step of these definitions asks for."""
    return {naming.definition_name(name) for name in RESOURCE_NAMES}


def resources_of(context: Any, naming: Naming = DEFAULT_NAMING) -> ZyncResources:
    """The definitions' resources, from an op's, check's or sensor's context."""
    lake, kafka, registry, spark = (
        getattr(context.resources, naming.definition_name(name)) for name in RESOURCE_NAMES
    )
    return ZyncResources(lake=lake, kafka=kafka, registry=registry, spark=spark)


@dataclass(frozen=True)
class ZyncStep:
    """What a step of zync's works with: its definitions' configuration and Spark."""

    config: ZyncConfig
    resources: ZyncResources

    def session(self) -> SparkSession:
        return self.resources.spark.session()

    def registry(self) -> Registry:
        return Registry(self.config.registry)


@contextmanager
def zync_step(context: Any, naming: Naming = DEFAULT_NAMING) -> Iterator[ZyncStep]:
    """The definitions' resources, with their configuration in force for the block."""
    resources = resources_of(context, naming)
    with in_force(resources.config()) as config:
        yield ZyncStep(config, resources)


# The environment variable each secret is read from by the CLI: a configuration's secret
# that one of them holds goes into Dagster as EnvVar, which its UI shows by name only.
_SECRET_VARIABLES = {
    "ZYNC_KAFKA_SASL_PASSWORD", "ZYNC_SCHEMA_REGISTRY_PASSWORD", "AWS_SECRET_ACCESS_KEY",
}  # fmt: skip


def _secret(value: str | None, variable: str) -> Any:
    if value is not None and variable in _SECRET_VARIABLES and os.environ.get(variable) == value:
        return EnvVar(variable)
    return value


def zync_resources(
    config: ZyncConfig | None = None, naming: Naming = DEFAULT_NAMING
) -> dict[str, ConfigurableResource]:
    """The resources zync's steps ask for, by key. No `config`: each reads the environment
    of the process it runs in, as the CLI does."""
    resources: dict[str, ConfigurableResource]
    if config is None:
        resources = {
            "zync_lake": LakeResource(), "zync_kafka": KafkaResource(),
            "zync_schema_registry": SchemaRegistryResource(), "zync_spark": SparkResource(),
        }  # fmt: skip
    else:
        lake, kafka, registry = config.lake, config.kafka, config.registry
        resources = {
            "zync_lake": LakeResource(
                location=lake.uri(), s3_endpoint=lake.s3_endpoint,
                aws_access_key_id=lake.aws_access_key_id,
                aws_secret_access_key=_secret(lake.aws_secret_access_key, "AWS_SECRET_ACCESS_KEY"),
                aws_region=lake.aws_region,
            ),
            "zync_kafka": KafkaResource(
                bootstrap_servers=kafka.bootstrap_servers, security_protocol=kafka.security_protocol,
                sasl_mechanism=kafka.sasl_mechanism, sasl_username=kafka.sasl_username,
                sasl_password=_secret(kafka.sasl_password, "ZYNC_KAFKA_SASL_PASSWORD"),
                ssl_ca=kafka.ssl_ca, ssl_cert=kafka.ssl_cert, ssl_key=kafka.ssl_key,
            ),
            "zync_schema_registry": SchemaRegistryResource(
                url=registry.url, user=registry.user,
                password=_secret(registry.password, "ZYNC_SCHEMA_REGISTRY_PASSWORD"),
                ca=registry.ca,
            ),
            "zync_spark": SparkResource(
                spark_config={**config.spark_conf, "spark.master": config.spark_master}
            ),
        }  # fmt: skip
    return {naming.definition_name(name): resource for name, resource in resources.items()}
