"""The local stack: Kafka (single-node KRaft) and Apicurio Registry from the jars in the
cache, then, on request, Dagster and the CDC services (PostgreSQL source and warehouse
clusters and a Kafka Connect worker for Debezium's connectors)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from zync_assets.core.errors import ZyncError
from zync_assets.core.locations import state_dir
from zync_assets.core.settings import CatalogSettings, RegistrySettings
from zync_assets.specs.model import load_spec
from zync_assets.stack import connect, postgres
from zync_assets.stack.dagster import dagster_service, dagster_url, launch_dagster
from zync_assets.stack.kafka import SecurePorts, kafka_service, launch_kafka
from zync_assets.stack.metastore import launch_metastore, metastore_service, metastore_url
from zync_assets.stack.pipeline_service import launch_pipeline, pipeline_service
from zync_assets.stack.process import Running, Service
from zync_assets.stack.registry import (
    is_secured,
    launch_registry,
    registry_service,
    registry_url,
    secured_registry_settings,
)
from zync_assets.stack.s3 import launch_s3, s3_endpoint, s3_service
from zync_assets.stack.spark_cluster import (
    ClusterPorts,
    cluster_services,
    launch_cluster,
    master_url,
)
from zync_assets.stack.spark_server import launch_spark_server, spark_service, spark_url


@dataclass(frozen=True)
class StackPorts:
    kafka: int = 9092
    registry: int = 8081
    controller: int | None = None  # default: kafka + 1
    management: int | None = None  # registry health/metrics; default: registry + 1
    secure: SecurePorts | None = None  # Kafka's SASL_SSL and mutual-TLS listeners, if wanted

    @property
    def kafka_controller(self) -> int:
        return self.controller or self.kafka + 1

    @property
    def registry_management(self) -> int:
        return self.management or self.registry + 1


@dataclass(frozen=True)
class CdcPorts:
    """Ports of the CDC services (`zync stack up --cdc`)."""

    source_db: int = 5433  # not 5432: leave a system PostgreSQL its usual port
    warehouse_db: int = 5434
    connect: int = 8083


def _services(home: Path) -> tuple[Service, Service]:
    return kafka_service(home), registry_service(home)


# --- The stack as a whole -----------------------------------------------------------------


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    running: Running | None
    secure: bool = False  # the registry: https with basic auth

    def line(self) -> str:
        if self.running is None:
            return f"{self.name:12} stopped"
        address = {
            "registry": registry_url(self.running.port, self.secure),
            "dagster": dagster_url(self.running.port),
            "connect": connect.connect_url(self.running.port),
            "pipeline": "zync run --follow",
            "spark": spark_url(self.running.port),
            "spark-master": master_url(self.running.port),
            "s3": s3_endpoint(self.running.port),
            "catalog": metastore_url(self.running.port),
        }.get(self.name, f"127.0.0.1:{self.running.port}")
        return (
            f"{self.name:12} running  pid {self.running.pid:<7} {address}  log {self.running.log}"
        )


def stack_up(
    ports: StackPorts,
    home: Path | None = None,
    dagster_port: int | None = None,
    cdc: CdcPorts | None = None,
    follow: list[Path] | None = None,
    spark_port: int | None = None,
    secure_registry: bool = False,
    cluster: ClusterPorts | None = None,
    s3_port: int | None = None,
    metastore_port: int | None = None,
) -> list[ServiceStatus]:
    """Start Kafka and the registry side by side (with the catalog's metastore, the S3 API
    server, the Spark Connect server, a Spark standalone cluster and the CDC services, if
    given their ports; then Dagster, if given a port) and wait for them; all or nothing. A service already running is left as it is. Kafka opens its secured
    listeners if `ports.secure` names them; the registry serves https with basic auth if
    `secure_registry`."""
    home = home or state_dir()
    secure = secure_registry
    if secure and cdc is not None:
        raise ZyncError(
            "--secure with --cdc is not supported yet: the Kafka Connect worker's converters "
            "do not carry the secured registry's credentials; start the CDC stack unsecured"
        )
    try:
        first: list[ServiceStatus] = []
        catalog = None
        if metastore_port is not None:  # before Spark: the server's sessions use it
            first = [ServiceStatus("catalog", launch_metastore(home, metastore_port)())]
            catalog = CatalogSettings(metastore_url(metastore_port))
        waits = [
            ("kafka", launch_kafka(home, ports.kafka, ports.kafka_controller, ports.secure)),
            ("registry", launch_registry(home, ports.registry, ports.registry_management, secure)),
        ]
        if s3_port is not None:  # before Spark: a server may write the lake there
            waits.append(("s3", launch_s3(home, s3_port)))
        if spark_port is not None:
            waits.append(("spark", launch_spark_server(home, spark_port, catalog)))
        statuses = first + [ServiceStatus(name, wait(), name == "registry" and secure)
                            for name, wait in waits]  # fmt: skip
        if cluster is not None:
            statuses += _cluster_statuses(launch_cluster(home, cluster)())
        if cdc is not None:  # the worker needs Kafka up
            statuses += cdc_up(home, cdc, f"127.0.0.1:{ports.kafka}")
        # The stack's own services use Kafka's PLAINTEXT listener on loopback, and the
        # registry as it was started.
        kafka = f"127.0.0.1:{ports.kafka}"
        registry = (
            secured_registry_settings(home, ports.registry)
            if secure
            else RegistrySettings(registry_url(ports.registry))
        )
        spark = spark_url(spark_port) if spark_port is not None else None
        waits = []
        if dagster_port is not None:  # its sensors need Kafka and the registry up first
            waits.append(("dagster", launch_dagster(home, dagster_port, kafka, registry, spark)))
        if follow:  # after Dagster's instance exists (it reports there), before its sensors
            # tick: it takes its pools' leases within seconds, so no sensor run races it
            waits.append(("pipeline", launch_pipeline(home, follow, kafka, registry,
                                                      _pools_of(follow))))  # fmt: skip
        return statuses + [ServiceStatus(name, wait()) for name, wait in waits]
    except ZyncError:
        stack_down(home)
        raise


def _cluster_statuses(started: list[Running]) -> list[ServiceStatus]:
    names = ["spark-master"] + [f"spark-worker-{n}" for n in range(1, len(started))]
    return [ServiceStatus(name, running) for name, running in zip(names, started, strict=True)]


def _pools_of(specs: list[Path]) -> list[str]:
    loaded = [load_spec(path) for path in specs]
    pools = sorted({pool for spec in loaded for pool in spec.raw_pools()})
    if not pools:
        raise ZyncError("--follow: the specs have no inputs")
    return pools


def cdc_up(home: Path, cdc: CdcPorts, kafka_bootstrap: str) -> list[ServiceStatus]:
    """Start the CDC services (PostgreSQL clusters, then the Connect worker) next to a
    running Kafka and registry, and wait for them. Those already running are left alone."""
    ports = {postgres.SOURCE: cdc.source_db, postgres.WAREHOUSE: cdc.warehouse_db}
    waits = [
        (postgres.service(home, cluster).name, postgres.launch_postgres(home, cluster, port))
        for cluster, port in ports.items()
    ]
    waits.append(("connect", connect.launch_connect(home, cdc.connect, kafka_bootstrap)))
    return [ServiceStatus(name, wait()) for name, wait in waits]


def cdc_down(home: Path) -> list[str]:
    """Stop the CDC services (Connect before the databases it reads and writes); the names
    of those that were running."""
    cdc = _cdc_services(home)
    return [service.name for service in (cdc[-1], *cdc[:-1]) if service.stop()]


def _cdc_services(home: Path) -> list[Service]:
    return [postgres.service(home, c) for c in postgres.CLUSTERS] + [connect.service(home)]


def _all_services(home: Path) -> list[Service]:
    """In the order they stop: each before what it uses."""
    cdc = _cdc_services(home)
    return [
        pipeline_service(home), dagster_service(home), spark_service(home),
        *cluster_services(home), cdc[-1], *cdc[:-1], metastore_service(home), s3_service(home),
        *_services(home),
    ]  # fmt: skip


def stack_down(home: Path | None = None) -> list[str]:
    """Stop every service; the names of those that were running."""
    stopped = []
    for service in _all_services(home or state_dir()):
        if service.stop():
            stopped.append(service.name)
    return stopped


def stack_status(home: Path | None = None) -> list[ServiceStatus]:
    """Every service, in the order they start: Kafka, the registry, Spark, the CDC services,
    Dagster, the pipeline."""
    home = home or state_dir()
    workers = [s for s in cluster_services(home)[:-1] if s.running() is not None]
    cluster = [cluster_services(home)[-1], *reversed(workers)]
    services = [*_services(home), s3_service(home), metastore_service(home), spark_service(home),
                *cluster,
                *_cdc_services(home)]  # fmt: skip
    services.append(dagster_service(home))
    services.append(pipeline_service(home))
    return [ServiceStatus(s.name, s.running(), s.name == "registry" and is_secured(home))
            for s in services]  # fmt: skip
