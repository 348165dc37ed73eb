"""One configuration object: read once from the environment, put in force for the stages."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from zync_assets.core.config import LakeSettings, ZyncConfig, carried, current, in_force
from zync_assets.core.errors import ZyncError
from zync_assets.lake.pools import pool_path


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


def test_the_environment_gives_every_field(workdir: Path) -> None:
    config = ZyncConfig.from_env({
        "ZYNC_LAKE": "s3://bucket/lake/", "ZYNC_S3_ENDPOINT": "http://127.0.0.1:9000",
        "AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_REGION": "eu-west-1",
        "ZYNC_KAFKA_BOOTSTRAP": "broker:9093", "ZYNC_SCHEMA_REGISTRY_URL": "http://registry/",
        "ZYNC_SPARK_MASTER": "sc://spark:15002", "ZYNC_SENSOR_INTERVAL": "5s",
        "ZYNC_OUTAGE_RETRY": "30s",
    })  # fmt: skip
    assert config.lake.uri() == "s3a://bucket/lake"
    assert (config.lake.s3_endpoint, config.lake.aws_region) == (
        "http://127.0.0.1:9000",
        "eu-west-1",
    )
    assert config.kafka.bootstrap_servers == "broker:9093"
    assert config.registry.url == "http://registry"
    assert (config.spark_master, config.sensor_interval_s, config.outage_retry_s) == (
        "sc://spark:15002", 5, 30.0
    )  # fmt: skip
    assert "secret" not in repr(config.lake)  # a logged configuration shows no key


def test_defaults_are_the_local_stacks(workdir: Path) -> None:
    config = ZyncConfig.from_env({})
    assert config.lake.uri() == str(workdir / ".zync" / "lake")
    assert config.kafka.bootstrap_servers == "127.0.0.1:9092"
    assert config.spark_master == "local[*]"


def test_the_stages_read_the_configuration_in_force_else_the_environments(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZYNC_LAKE", str(workdir / "from-env"))
    assert pool_path("Raw") == str(workdir / "from-env" / "Raw")
    east = ZyncConfig(lake=LakeSettings(str(workdir / "east")))
    with in_force(east):
        assert pool_path("Raw") == str(workdir / "east" / "Raw")
        with in_force(east.with_lake(str(workdir / "west"))):  # the innermost wins
            assert pool_path("Raw") == str(workdir / "west" / "Raw")
        assert pool_path("Raw") == str(workdir / "east" / "Raw")
    assert pool_path("Raw") == str(workdir / "from-env" / "Raw")


def test_a_thread_a_stage_starts_keeps_the_configuration_only_when_carried(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZYNC_LAKE", str(workdir / "from-env"))
    seen: dict[str, str] = {}

    def look(name: str) -> None:
        seen[name] = current().lake.location

    with in_force(ZyncConfig(lake=LakeSettings(str(workdir / "east")))):
        threads = [
            threading.Thread(target=carried(look), args=("carried",)),
            threading.Thread(target=look, args=("bare",)),
        ]
        for thread in threads:
            thread.start()
            thread.join()
    assert seen == {"carried": str(workdir / "east"), "bare": str(workdir / "from-env")}


def test_only_a_configuration_can_be_put_in_force() -> None:
    with (
        pytest.raises(ZyncError, match="expected a ZyncConfig, got dict"),
        in_force({"lake": "/tmp"}),  # type: ignore[arg-type]
    ):
        pass


def test_resources_carry_a_given_configuration_with_its_secrets_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dagster import EnvVar

    from zync_assets.core.settings import KafkaSettings
    from zync_assets.orchestration.naming import Naming
    from zync_assets.orchestration.resources import (
        KafkaResource,
        LakeResource,
        SchemaRegistryResource,
        SparkResource,
        ZyncResources,
        zync_resources,
    )

    monkeypatch.setenv("ZYNC_KAFKA_SASL_PASSWORD", "pw")
    kafka = KafkaSettings("broker:9093", "SASL_SSL", "PLAIN", "user", "pw")
    config = ZyncConfig(lake=LakeSettings("/data/east"), kafka=kafka, spark_master="sc://s:1")
    resources = zync_resources(config, Naming(key_prefix=("east",)))
    assert set(resources) == {
        "east_zync_lake", "east_zync_kafka", "east_zync_schema_registry", "east_zync_spark"
    }  # fmt: skip
    lake, kafka_resource = resources["east_zync_lake"], resources["east_zync_kafka"]
    registry, spark = resources["east_zync_schema_registry"], resources["east_zync_spark"]
    assert isinstance(lake, LakeResource) and isinstance(kafka_resource, KafkaResource)
    assert isinstance(registry, SchemaRegistryResource) and isinstance(spark, SparkResource)
    assert kafka_resource.sasl_password == EnvVar("ZYNC_KAFKA_SASL_PASSWORD")
    made = ZyncResources(lake=lake, kafka=kafka_resource, registry=registry, spark=spark).config()
    assert made.lake.location == "/data/east" and made.spark_master == "sc://s:1"
    assert made.kafka.bootstrap_servers == "broker:9093" and made.kafka.sasl_username == "user"


def test_a_bad_discovery_interval_is_one_line_naming_the_variable(workdir: Path) -> None:
    assert ZyncConfig.from_env({"ZYNC_DISCOVERY_INTERVAL": "1m"}).discovery_interval_s == 60
    for text, says in (("soon", "ZYNC_DISCOVERY_INTERVAL: bad duration"),
                       ("100ms", "give at least 1s")):  # fmt: skip
        with pytest.raises(ZyncError, match=says):
            ZyncConfig.from_env({"ZYNC_DISCOVERY_INTERVAL": text})


def test_the_catalog_is_off_unless_a_metastore_is_given(workdir: Path) -> None:
    assert not ZyncConfig.from_env({}).catalog.enabled
    catalog = ZyncConfig.from_env({
        "ZYNC_METASTORE": "jdbc:postgresql://db:5432/metastore", "ZYNC_CATALOG_DATABASE": "lake_a",
    }).catalog  # fmt: skip
    assert (catalog.enabled, catalog.database, catalog.driver) == (
        True, "lake_a", "org.postgresql.Driver",
    )  # fmt: skip


def test_a_derby_metastore_puts_its_network_client_on_the_drivers_class_path() -> None:
    from zync_assets.core.settings import CatalogSettings
    from zync_assets.spark.catalog import metastore_conf

    derby = metastore_conf(CatalogSettings("jdbc:derby://127.0.0.1:1527/m;create=true"), "/lake")
    assert derby["spark.sql.catalogImplementation"] == "hive"
    assert derby["spark.hadoop.javax.jdo.option.ConnectionDriverName"] == (
        "org.apache.derby.jdbc.ClientDriver"
    )
    assert Path(derby["spark.driver.extraClassPath"]).name.startswith("derbyclient-")
    assert derby["spark.sql.warehouse.dir"] == "/lake/_catalog"  # not the working directory
    postgres = metastore_conf(CatalogSettings("jdbc:postgresql://db/m"), "/lake")
    assert "spark.driver.extraClassPath" not in postgres  # the user's driver jar, by spark.conf
