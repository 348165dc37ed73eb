"""What every Spark session zync opens gets, locally or through Spark Connect: zync's
own SQL functions (Java classes in jvm/src) and PySpark's loggers kept quiet."""

from __future__ import annotations

import logging
from typing import Any

from py4j.java_gateway import JavaClass
from pyspark.sql import SparkSession
from pyspark.sql.types import BinaryType, LongType, StringType, VariantType

from zync_assets.core.errors import ZyncError
from zync_assets.jars import FUNCTIONS_JAR

# SQL name -> (Java class in jvm/src, return type).
ZYNC_FUNCTIONS = {
    "zync_variant_type": ("zync.spark.VariantTypeOf", StringType()),
    "zync_variant_avro": ("zync.spark.VariantToAvro", BinaryType()),
    "zync_avro_variant": ("zync.spark.AvroToVariant", VariantType()),
    "zync_avro_error": ("zync.spark.AvroToVariant$Error", StringType()),
    "zync_schema_id": ("zync.spark.AvroToVariant$SchemaId", LongType()),
    "zync_connect_json_variant": ("zync.spark.ConnectJsonToVariant", VariantType()),
    "zync_connect_json_error": ("zync.spark.ConnectJsonToVariant$Error", StringType()),
}


def register_functions(spark: SparkSession) -> None:
    for name, (java_class, returns) in ZYNC_FUNCTIONS.items():
        spark.udf.registerJavaFunction(name, java_class, returns)


def quiet_query_errors() -> None:
    """PySpark logs every failed analysis as a JSON blob with a JVM stack trace; zync
    turns those failures into one-line errors itself."""
    for name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def java_class(jvm: Any, name: str) -> JavaClass:
    """A class of zync's jar; py4j takes an unknown name for a package and fails later."""
    found = jvm
    for part in name.split("."):
        found = getattr(found, part)
    if not isinstance(found, JavaClass):
        raise ZyncError(
            f"zync's Spark functions ({FUNCTIONS_JAR}) have no {name}: they were built from "
            "older sources; rebuild them with jvm/build.sh (in a checkout: scripts/install.sh)"
        )
    return found
