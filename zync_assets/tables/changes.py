"""A pool's new rows → change events for a lake table: keys, sequence, delete or upsert, row.

A table's source is a topic: an input topic, read from its raw pool (Debezium
envelopes: the row image is `after`, or `before` for a delete), or an output topic,
read from its staging pool (the output record's value is the row). A pass reads the
source's rows from the table's cursors up to the pool's committed end.

The event columns (`kafka`, `key`, `value`, `op`, `before`, `after`, `source`,
`ts_ms`) are the ones rules see (etl/compile.py), so `sequence-by` and
`apply-as-deletes` are written as `where` conditions are.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, DataType, MapType, StructType, VariantType

from zync_assets.core.errors import ZyncError
from zync_assets.core.events import RAW_SCHEMA, event_columns
from zync_assets.core.offsets import Offsets
from zync_assets.core.staging_rows import OUTPUT, of_kind
from zync_assets.etl.bounds import above_cursors, below_ends
from zync_assets.lake.pools import pool_path
from zync_assets.specs.model import Spec
from zync_assets.specs.tables import TableDef
from zync_assets.tables.state import source_ends

SEQUENCE = "__SEQUENCE"
DELETE = "__DELETE"
ROW = "__ROW"
POSITION = "__POSITION"  # the event's place in its pool: the last of two equal events wins
TRUNCATE = "__TRUNCATE"  # Debezium's truncate (op t): every row before it is gone
TOPIC = "__TOPIC"  # an event's source topic, where one read serves several tables

RAW_DELETES = "op = 'd' OR value IS NULL"
STAGING_DELETES = "value IS NULL"
UPSERT_OPS = ("c", "r", "u")


@dataclass(frozen=True)
class CompiledTable:
    """A table's expressions, checked against Spark."""

    table: TableDef
    spec: Spec
    sequence: Column
    sequence_type: str  # its Spark SQL type, e.g. bigint or struct<...>
    deletes: Column


def compile_table(spark: SparkSession, spec: Spec, table: TableDef) -> CompiledTable:
    """The table's `sequence-by` and `apply-as-deletes`, analysed against the event schema;
    errors name the file, the table and the field."""
    events = _events(spark.createDataFrame([], RAW_SCHEMA), table)

    def fail(field: str, problem: str) -> ZyncError:
        return ZyncError(f"{spec.path}: tables[{table.name}] {field}: {problem}")

    def analysed(field: str, column: Column) -> DataType:
        try:
            return events.select(column.alias("x")).schema["x"].dataType
        except (ParseException, AnalysisException) as exc:
            raise fail(field, str(exc).strip().splitlines()[0]) from exc

    parts = [F.expr(text) for text in table.sequence_by]
    sequence = (
        parts[0] if len(parts) == 1 else F.struct(*(p.alias(f"s{i}") for i, p in enumerate(parts)))
    )
    sequence_type = analysed("sequence-by", sequence)
    if _unorderable(sequence_type):
        raise fail(
            "sequence-by", f"is {sequence_type.simpleString()}, which has no order: cast it, "
            "e.g. source:lsn::bigint",
        )  # fmt: skip
    default = STAGING_DELETES if table.from_staging else RAW_DELETES
    deletes = F.expr(table.apply_as_deletes or default)
    delete_type = analysed("apply-as-deletes", deletes)
    if not isinstance(delete_type, BooleanType):
        raise fail("apply-as-deletes", f"is {delete_type.simpleString()}, not a boolean condition")
    return CompiledTable(table, spec, sequence, sequence_type.simpleString(), deletes)


def _unorderable(data_type: DataType) -> bool:
    if isinstance(data_type, VariantType | MapType):
        return True
    if isinstance(data_type, StructType):
        return any(_unorderable(f.dataType) for f in data_type.fields)
    return False


def _events(rows: DataFrame, table: TableDef) -> DataFrame:
    """Raw or staging rows (kafka, key, value) with the event columns rules see."""
    if not table.from_staging:
        return rows.select(*event_columns())
    return rows.select(
        "kafka", "key", "value",
        F.lit(None).cast("string").alias("op"),
        F.lit(None).cast("variant").alias("before"),
        F.col("value").alias("after"),
        F.lit(None).cast("variant").alias("source"),
        F.lit(None).cast("bigint").alias("ts_ms"),
    )  # fmt: skip


@dataclass(frozen=True)
class NewRows:
    """The source rows one pass applies, and where the pass ends."""

    rows: DataFrame  # kafka, key, value
    ends: Offsets  # per source partition: the end offset this pass reads to


def new_rows(
    spark: SparkSession, spec: Spec, table: TableDef, cursors: Offsets, ends: Offsets | None = None
) -> NewRows | None:
    """The source's rows from `cursors` to the pool's committed end, or to `ends` where
    the caller read it (None: no pool yet)."""
    ends = source_ends(spec, table) if ends is None else ends
    if ends is None:
        return None
    return NewRows(pool_rows(spark, table, cursors, ends), ends)


def pool_rows(spark: SparkSession, table: TableDef, cursors: Offsets, ends: Offsets) -> DataFrame:
    """The rows (kafka, key, value) of table's source pool from `cursors` to `ends`, of
    every topic `ends` names (tables of one pool read together: tables/together.py)."""
    kind = of_kind(OUTPUT) if table.from_staging else F.col("dead_letter").isNull()
    return (
        spark.read.format("delta")
        .load(pool_path(table.source_pool))
        .where(kind & above_cursors(cursors, list(ends), ends=ends) & below_ends(ends))
        .select("kafka", "key", "value")
    )


def change_events(rows: DataFrame, compiled: CompiledTable, with_topic: bool = False) -> DataFrame:
    """Change events: the table's sequence, whether it deletes, the row image, its position
    (and, `with_topic`, its source topic as TOPIC).

    Events that neither delete nor carry a row (Debezium's message events) change no
    row; a truncate (TRUNCATE) ends every row before it (apply.py)."""
    table = compiled.table
    events = _events(rows, table)
    deleted = F.coalesce(compiled.deletes, F.lit(False))
    image = F.col("after") if table.from_staging else F.coalesce(F.col("after"), F.col("before"))
    row = F.when(deleted, F.coalesce(F.col("before"), F.col("after"))).otherwise(image)
    return events.select(
        compiled.sequence.alias(SEQUENCE),
        deleted.alias(DELETE),
        row.alias(ROW),
        F.col("key").alias("__KEY"),
        F.struct("kafka.partition", "kafka.offset").alias(POSITION),
        F.coalesce(F.col("op") == "t", F.lit(False)).alias(TRUNCATE),
        *([F.col("kafka.topic").alias(TOPIC)] if with_topic else []),
    )
