"""The rows a table holds for some keys, folded from all the change events known for them.

A pass touches only the keys its new events name. For those keys it gathers every
event it knows — the new events, the change log (deletes, and for SCD2 every event,
within the retention window), and for SCD2 the table's own versions read back as
events — drops duplicates (one event per key and sequence), and folds them in sequence
order. (SCD1 needs no read-back: its MERGE keeps a stored row newer than the fold's.) So the
result does not depend on the order events arrived in: a late event lands in its place.

Event frames have the table's columns plus SEQUENCE, DELETE, PRIORITY (which copy of a
duplicate wins: log > new > table), POSITION (the last ingested of equal new events) and
UNAVAILABLE (the columns Debezium left out as unchanged TOASTed values: each takes the
key's previous value, from the events folded or, for SCD1, from the stored row).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import VariantType

from zync_assets.tables.changes import DELETE, POSITION, SEQUENCE
from zync_assets.tables.columns import UNAVAILABLE

START_AT = "__START_AT"
END_AT = "__END_AT"
PRIORITY = "__PRIORITY"
FROM_TABLE, FROM_NEW, FROM_LOG = 0, 1, 2


def _cols(names: list[str]) -> list[Column]:
    return [F.col(f"`{n}`") for n in names]


def comparable(frame: DataFrame, names: list[str], prefix: str = "") -> Column:
    """The columns `names` of `frame` as one struct that `=` and `<=>` can compare: a
    VARIANT (a json column, a nested record) compares as its JSON text, which Spark's
    comparisons need (they refuse VARIANT)."""
    types = {f.name: f.dataType for f in frame.schema.fields}
    fields = []
    for name in names:
        column = F.col(f"{prefix}`{name}`")
        if isinstance(types.get(name), VariantType):
            column = F.to_json(column)
        fields.append(column.alias(name))
    return F.struct(*fields)


def deduplicated(events: DataFrame, keys: list[str]) -> DataFrame:
    """One event per key and sequence: duplicates (a redelivery, the table's own copy of an
    event it applied) are applied once."""
    order = Window.partitionBy(*_cols(keys), F.col(SEQUENCE)).orderBy(
        F.col(PRIORITY).desc(), F.col(f"{POSITION}.partition").desc_nulls_last(),
        F.col(f"{POSITION}.offset").desc_nulls_last(),
    )  # fmt: skip
    return events.withColumn("__n", F.row_number().over(order)).where("__n = 1").drop("__n")


def fill_unavailable(events: DataFrame, keys: list[str], data: list[str]) -> DataFrame:
    """Each column an event left out (Debezium's TOAST placeholder) takes the value of the
    key's newest earlier event that carried it. A column no earlier event here carries
    stays in UNAVAILABLE, holding the placeholder: SCD1's MERGE keeps the stored value for
    it (merge.py), and with nothing stored the placeholder is all there is to keep."""
    if not data:
        return events
    earlier = (
        Window.partitionBy(*_cols(keys)).orderBy(SEQUENCE).rowsBetween(Window.unboundedPreceding, 0)
    )
    left_out = {c: F.array_contains(F.col(UNAVAILABLE), c) for c in data}
    known = {
        c: F.last(
            F.when(~left_out[c] & ~F.col(DELETE), F.struct(F.col(f"`{c}`").alias("v"))),
            ignorenulls=True,
        ).over(earlier)
        for c in data
    }
    marked = events.select("*", *(known[c].alias(f"__known_{i}") for i, c in enumerate(data)))
    found = {c: F.col(f"__known_{i}") for i, c in enumerate(data)}
    still = F.array_compact(
        F.array(*(F.when(left_out[c] & found[c].isNull(), F.lit(c)) for c in data))
    )
    return marked.select(
        *(
            F.when(left_out[c] & found[c].isNotNull(), found[c]["v"])
            .otherwise(F.col(f"`{c}`"))
            .alias(c)
            if c in data
            else F.col(f"`{c}`")
            for c in events.columns
            if c != UNAVAILABLE
        ),
        still.cast("array<string>").alias(UNAVAILABLE),
    )


def scd1_rows(events: DataFrame, keys: list[str], data: list[str]) -> DataFrame:
    """Per key, the event with the highest sequence: the row to hold, or a delete."""
    order = Window.partitionBy(*_cols(keys)).orderBy(F.col(SEQUENCE).desc())
    newest = events.withColumn("__n", F.row_number().over(order)).where("__n = 1")
    return newest.select(*_cols(keys), *_cols(data), SEQUENCE, DELETE, PRIORITY, UNAVAILABLE)


def scd2_versions(
    events: DataFrame, keys: list[str], data: list[str], tracked: list[str]
) -> DataFrame:
    """Per key, its history: a version starts at an insert after nothing or a delete, or at an
    update that changes a tracked column; an update of untracked columns only changes the
    open version in place. A delete ends the open version (__END_AT = its sequence); a new
    version ends the one before it."""
    by_key = Window.partitionBy(*_cols(keys)).orderBy(SEQUENCE)
    tracked_now = comparable(events, tracked) if tracked else F.lit(True)
    marked = events.select(
        "*",
        F.lag(DELETE).over(by_key).alias("__prev_delete"),
        F.lag(tracked_now).over(by_key).alias("__prev_tracked"),
    )
    starts = ~F.col(DELETE) & (
        F.col("__prev_delete").isNull() | F.col("__prev_delete")
        | ~F.col("__prev_tracked").eqNullSafe(tracked_now)
    )  # fmt: skip
    numbered = marked.withColumn(
        "__version",
        F.sum(starts.cast("int")).over(by_key.rowsBetween(Window.unboundedPreceding, 0)),
    )
    upsert = ~F.col(DELETE)
    groups = (
        numbered.where("__version > 0")
        .groupBy(*_cols(keys), "__version")
        .agg(
            F.min(SEQUENCE).alias(START_AT),
            F.max_by(F.struct(*_cols(data)), F.when(upsert, F.col(SEQUENCE))).alias("__data"),
            F.max(F.when(upsert, F.col(SEQUENCE))).alias(SEQUENCE),
            F.min(F.when(F.col(DELETE), F.col(SEQUENCE))).alias("__deleted_at"),
        )
    )
    next_start = F.lead(START_AT).over(Window.partitionBy(*_cols(keys)).orderBy(START_AT))
    return groups.select(
        *_cols(keys),
        *(F.col(f"__data.`{c}`").alias(c) for c in data),
        START_AT,
        F.coalesce(F.col("__deleted_at"), next_start).alias(END_AT),
        SEQUENCE,
    )


def table_as_scd2_events(rows: DataFrame, keys: list[str], data: list[str]) -> DataFrame:
    """Stored versions as events: an upsert at each version's start and at its last update,
    and a delete at its end where no version of the key starts there."""
    columns = [*keys, *data]
    starts = rows.select(*_cols(keys), F.col(START_AT).alias("__starts"))
    upserts = rows.select(*_cols(columns), F.col(START_AT).alias(SEQUENCE)).unionByName(
        rows.where(~F.col(SEQUENCE).eqNullSafe(F.col(START_AT))).select(*_cols(columns), SEQUENCE)
    )
    ended = rows.where(F.col(END_AT).isNotNull()).select(
        *_cols(columns), F.col(END_AT).alias(SEQUENCE)
    )
    same_key = [ended[k].eqNullSafe(starts[k]) for k in keys]
    deletes = ended.join(starts, [*same_key, ended[SEQUENCE] == starts["__starts"]], "left_anti")
    return (
        upserts.withColumn(DELETE, F.lit(False))
        .unionByName(deletes.withColumn(DELETE, F.lit(True)))
        .withColumn(PRIORITY, F.lit(FROM_TABLE))
        .withColumn(UNAVAILABLE, F.array().cast("array<string>"))
    )
