"""A mirrored row whose TOASTed column Debezium left out: the column's value from before.

PostgreSQL does not log a TOASTed value an update leaves alone, so under the default
replica identity Debezium's `after` holds `__debezium_unavailable_value` in its place.
A sink that upserts the row would write the placeholder over the value. So before a
mirror sends such a row, each left-out column takes the newest value an earlier event of
the same key carried, found in the topic's history in the raw pool: the row goes out
whole. A column no earlier event carries keeps the placeholder (there is nothing else to
send; with a snapshot first, there always is one).

Only rows holding the placeholder, of the topics a pass has them for, are read against
history: an update that changes its TOASTed column, and every other row, costs nothing.
The history of every such topic is read in ONE scan of the raw pools, and only the
events of the keys in question are kept for the window that finds the values: a scan
per topic cost a whole database's mirror (ten TOASTed tables among 60) 16-19 s a pass
under load, the pool read again for each.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from zync_assets.core.debezium import UNAVAILABLE_PLACEHOLDER, is_unavailable
from zync_assets.core.variants import split_fields
from zync_assets.spark.session import union_all

History = Callable[[tuple[str, ...]], DataFrame]


def _holds_placeholder() -> Column:
    return F.coalesce(F.to_json("value").contains(UNAVAILABLE_PLACEHOLDER), F.lit(False))


def with_toasted_values(outputs: DataFrame, history: History) -> DataFrame:
    """A mirror's `outputs` (key, value = the row, `__src` = its event) with every left-out
    column filled in from the key's earlier events."""
    found = (
        outputs.where(_holds_placeholder())
        .groupBy(F.col("__src.topic").alias("topic"))
        .agg(F.expr("schema_of_variant_agg(value)").alias("schema"))
        .collect()
    )
    if not found:
        return outputs
    fields = list(dict.fromkeys(n for row in found for n, _ in split_fields(row["schema"])))
    toasted = outputs.where(_holds_placeholder())
    asked = toasted.select(F.col("__src.topic").alias("__topic"), F.to_json("key").alias("__kj"))
    past = history(tuple(row["topic"] for row in found))
    past = past.withColumns({"__topic": F.col("kafka.topic"), "__kj": F.to_json("key")}).join(
        F.broadcast(asked.distinct()), ["__topic", "__kj"], "left_semi"
    )
    return union_all([outputs.where(~_holds_placeholder()), _filled(toasted, past, fields)])


def _field(variant: str, name: str) -> Column:
    """Field `name` of an object, as the VARIANT it is (its type kept)."""
    return F.expr(f"variant_get({variant}, '$[\"{name}\"]')")


def _filled(rows: DataFrame, events: DataFrame, fields: list[str]) -> DataFrame:
    """`rows` with each field that holds the placeholder taken from the newest earlier
    event of its key (in `events`, the topics' history with `__topic` and `__kj`, the
    key's JSON) that carried a value for it; `fields`: those of every topic's rows (a
    field a row has not stays out of it)."""
    so_far = (
        Window.partitionBy("__topic", "__kj")
        .orderBy("kafka.partition", "kafka.offset")
        .rowsBetween(Window.unboundedPreceding, 0)
    )
    image = F.col("after")
    known = events.select(
        F.struct("kafka.topic", "kafka.partition", "kafka.offset").alias("__at"),
        *(
            F.last(
                F.when(~is_unavailable(image, f"$.{name}"), _field("after", name)),
                ignorenulls=True,
            )
            .over(so_far)
            .alias(f"__known_{i}")
            for i, name in enumerate(fields)
        ),
    )
    at = F.struct("__src.topic", "__src.partition", "__src.offset")
    joined = rows.join(known, at == known["__at"], "left")
    # A map of the fields, not a struct: a field the row leaves out (a JSON column's SQL
    # NULL, ingest's AvroVariantReader.Record) stays out, where a struct's NULL field would
    # become a variant null, the JSON document null.
    entries = F.create_map(*(
        part
        for i, name in enumerate(fields)
        for part in (
            F.lit(name),
            F.when(
                is_unavailable(F.col("value"), f"$.{name}") & F.col(f"__known_{i}").isNotNull(),
                F.col(f"__known_{i}"),
            ).otherwise(_field("value", name)),
        )
    ))  # fmt: skip
    value = F.to_variant_object(F.map_filter(entries, lambda _, v: v.isNotNull()))
    return joined.select(*(value.alias(c) if c == "value" else F.col(c) for c in rows.columns))
