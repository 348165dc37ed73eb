"""A Spark Connect server as a stack service: one warm Spark that the stack's Dagster runs
(and any CLI command with `ZYNC_SPARK_MASTER=sc://127.0.0.1:PORT`) share, instead of each
starting a JVM of its own.

It is started from PySpark's own distribution (`spark-submit` with the
SparkConnectServer class, whose jar PySpark ships) with the jars and properties a local
session gets: Delta, the Kafka source, Avro and zync's functions, resources/spark.conf.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pyspark

from zync_assets.core.settings import CatalogSettings
from zync_assets.jars import functions_jar
from zync_assets.lake.store import lake_uri, spark_conf_for_lake
from zync_assets.spark.catalog import metastore_conf
from zync_assets.spark.connect import server_answers
from zync_assets.spark.session import SPARK_LOG4J2, local_files_conf, spark_conf, spark_jars
from zync_assets.stack.java import find_java
from zync_assets.stack.process import Running, Service

SPARK_START_TIMEOUT_S = 120.0
_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def spark_url(port: int) -> str:
    return f"sc://127.0.0.1:{port}"


def spark_service(state: Path) -> Service:
    # SIGTERM to the group: spark-submit's JVM stops its jobs and the server.
    return Service("spark", state / "run", stop_timeout=30.0)


def server_command(port: int, warehouse: Path, catalog: CatalogSettings | None = None) -> list[str]:
    """`spark-submit --class SparkConnectServer` with zync's jars and Spark properties
    (and `catalog`'s metastore: its sessions read the lake's tables by name)."""
    lake = lake_uri()
    metastore = metastore_conf(catalog, lake) if catalog is not None else {}
    conf = spark_conf_for_lake(lake) | metastore | spark_conf()  # the server writes the lake
    if files := local_files_conf():  # its launcher opens the file system: zync's jar first
        class_path = [str(functions_jar()), conf.get("spark.driver.extraClassPath", "")]
        conf |= files | {"spark.driver.extraClassPath": ":".join(p for p in class_path if p)}
    java_options = f"-Dlog4j2.configurationFile={SPARK_LOG4J2}"
    if conf.get("spark.driver.extraJavaOptions"):
        java_options += " " + conf["spark.driver.extraJavaOptions"]
    conf.update(
        {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(port),
            "spark.sql.warehouse.dir": metastore.get("spark.sql.warehouse.dir", str(warehouse)),
            "spark.driver.extraJavaOptions": java_options,
        }
    )
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    command = [str(submit), "--master", "local[*]"]
    command += ["--class", _SERVER_CLASS, "--jars", ",".join(spark_jars())]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    return [*command, "spark-internal"]


def launch_spark_server(
    state: Path, port: int, catalog: CatalogSettings | None = None
) -> Callable[[], Running]:
    """Start the Spark Connect server (unless running); returns a call that waits until it
    accepts connections."""
    service = spark_service(state)
    if (running := service.running()) is not None:
        return lambda: running
    java = find_java(17, "Spark", "ZYNC_SPARK_JAVA_HOME")
    folder = state / "spark"
    folder.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "JAVA_HOME": str(Path(java).resolve().parent.parent),
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "PYSPARK_PYTHON": sys.executable,
    }
    command = server_command(port, folder / "warehouse", catalog)
    proc = service.launch(command, port, env=env, cwd=folder)
    url = spark_url(port)
    return lambda: service.wait_ready(
        proc, port, lambda: server_answers(url, 0.5), SPARK_START_TIMEOUT_S
    )
