"""The event: a raw pool row as rules, views and lake tables see it, and the raw row's
schema. An event, as rules see it (`where` directly; `left`/`right`/`in` in `join-on` and `sql`):

    kafka    struct<topic, partition, offset, timestamp>
    key      VARIANT     the Kafka key (e.g. {"ID": 100})
    value    VARIANT     the Debezium envelope
    op       string      value:op           ('c', 'r', 'u', 'd')
    before   VARIANT     value:before       row image before the change
    after    VARIANT     value:after        row image after the change
    source   VARIANT     value:source       connector metadata (db, table, lsn, ...)
    ts_ms    bigint      value:ts_ms

Fields of a row image are reached with Spark's variant path syntax and a cast:
`after:ID::bigint`, `left.after:customer::string`, `in.before:status::string`.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

EVENT_FIELDS = ("kafka", "key", "value", "op", "before", "after", "source", "ts_ms")
RAW_SCHEMA = (
    "kafka struct<topic: string, partition: int, offset: bigint, timestamp: timestamp>, "
    "key variant, value variant"
)


def event_columns() -> list[Column]:
    """The event fields, computed from a raw row's kafka/key/value."""
    return [
        F.col("kafka"),
        F.col("key"),
        F.col("value"),
        F.expr("variant_get(value, '$.op', 'string')").alias("op"),
        F.expr("variant_get(value, '$.before')").alias("before"),
        F.expr("variant_get(value, '$.after')").alias("after"),
        F.expr("variant_get(value, '$.source')").alias("source"),
        F.expr("try_variant_get(value, '$.ts_ms', 'bigint')").alias("ts_ms"),
    ]


def event_struct() -> Column:
    return F.struct(*(F.col(name) for name in EVENT_FIELDS))
