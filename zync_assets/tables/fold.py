"""The rows a table holds for some keys, folded from all the change events known for them.

A pass touches only the keys its new events name. For those keys it gathers every
event it knows — the new events, the change log (deletes, and for SCD2 every event,
within the retention window), and for SCD2 the table's own versions read back as
events — drops duplicates (one event per key and sequence), and folds them in sequence
order. (SCD1 needs no read-back: its MERGE keeps a stored row newer than the fold's.) So the
result does not depend on the order events arrived in: a late event lands in its place.

Event frames have the table's columns plus SEQUENCE, DELETE, PRIORITY (which copy of a
duplicate wins: log > new > table) and POSITION (the last ingested of equal new events).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from zync_assets.tables.changes import DELETE, POSITION, SEQUENCE

START_AT = "__START_AT"
END_AT = "__END_AT"
PRIORITY = "__PRIORITY"
FROM_TABLE, FROM_NEW, FROM_LOG = 0, 1, 2


def _cols(names: list[str]) -> list[Column]:
    return [F.col(f"`{n}`") for n in names]


def deduplicated(events: DataFrame, keys: list[str]) -> DataFrame:
    """One event per key and sequence: duplicates (a redelivery, the table's own copy of an
    event it applied) are applied once."""
    order = Window.partitionBy(*_cols(keys), F.col(SEQUENCE)).orderBy(
        F.col(PRIORITY).desc(), F.col(f"{POSITION}.partition").desc_nulls_last(),
        F.col(f"{POSITION}.offset").desc_nulls_last(),
    )  # fmt: skip
    return events.withColumn("__n", F.row_number().over(order)).where("__n = 1").drop("__n")


def scd1_rows(events: DataFrame, keys: list[str], data: list[str]) -> DataFrame:
    """Per key, the event with the highest sequence: the row to hold, or a delete."""
    order = Window.partitionBy(*_cols(keys)).orderBy(F.col(SEQUENCE).desc())
    newest = events.withColumn("__n", F.row_number().over(order)).where("__n = 1")
    return newest.select(*_cols(keys), *_cols(data), SEQUENCE, DELETE, PRIORITY)


def scd2_versions(
    events: DataFrame, keys: list[str], data: list[str], tracked: list[str]
) -> DataFrame:
    """Per key, its history: a version starts at an insert after nothing or a delete, or at an
    update that changes a tracked column; an update of untracked columns only changes the
    open version in place. A delete ends the open version (__END_AT = its sequence); a new
    version ends the one before it."""
    by_key = Window.partitionBy(*_cols(keys)).orderBy(SEQUENCE)
    tracked_now = F.struct(*_cols(tracked)) if tracked else F.lit(True)
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
    )
