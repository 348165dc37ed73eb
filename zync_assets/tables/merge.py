"""The MERGE of one pass: what changes for the touched keys, and the statement that applies it.

SCD1 merges one row per touched key, the newest change known of it (new, or a delete
from the change log), which the MERGE applies only where it is newer than the stored row. SCD2 merges the difference between the touched keys' stored
versions and their rebuilt history, by (keys, __START_AT): versions to insert, to
update (a new end, untracked columns) and to delete (a version a late event split).
Either way MERGE rewrites only the files that hold touched keys.

It reads only the files that may hold them too, where it can tell: the touched keys'
range (`key_range`) bounds the MERGE's join and SCD2's read of the stored versions, so
Delta skips every file whose statistics lie outside it. Tables are clustered by their
keys, and real CDC touches recent keys mostly (new orders, open invoices): their range
is a few files of a large table. Random keys span the table, and it reads it all.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from zync_assets.lake.pools import pool_exists, table_changes_path, table_path
from zync_assets.spark.session import sql_literal
from zync_assets.tables import fold
from zync_assets.tables.changes import DELETE, POSITION, ROW, SEQUENCE, CompiledTable
from zync_assets.tables.columns import UNAVAILABLE, Columns

ACTION = "__ACTION"


Bounds = list[tuple[str, str, str]]  # (key, least, greatest), the values in SQL


def key_bounds(touched: DataFrame, keys: list[str]) -> Bounds:
    """Each key's least and greatest touched value (one job), for the keys of a type
    whose values are written here; [] when there is none, or no touched key."""
    types = dict(touched.dtypes)
    bounded = [k for k in keys if types[k] in _LITERALS]
    if not bounded:
        return []
    row = touched.agg(
        *(F.min(k).alias(f"lo{n}") for n, k in enumerate(bounded)),
        *(F.max(k).alias(f"hi{n}") for n, k in enumerate(bounded)),
    ).first()
    if row is None or row["lo0"] is None:
        return []
    return [
        (k, _literal(types[k], row[f"lo{n}"]), _literal(types[k], row[f"hi{n}"]))
        for n, k in enumerate(bounded)
    ]


def key_range(bounds: Bounds, alias: str = "") -> str:
    """A predicate that every touched key satisfies (TRUE without bounds)."""
    prefix = f"{alias}." if alias else ""
    ranges = [f"{prefix}`{k}` BETWEEN {lo} AND {hi}" for k, lo, hi in bounds]
    return " AND ".join(ranges) or "TRUE"


# The key types key_bounds bounds, and how it writes their values in SQL.
_LITERALS = {"tinyint", "smallint", "int", "bigint", "string", "date"}


def _literal(kind: str, value: object) -> str:
    if kind == "string":
        return sql_literal(str(value))
    if kind == "date":
        return f"DATE'{value}'"
    return str(int(value))  # type: ignore[call-overload]


def merge_source(
    spark: SparkSession, compiled: CompiledTable, columns: Columns, changes: DataFrame,
    pin: Callable[[DataFrame], DataFrame] = lambda frame: frame, bounded: bool = True,
    read: Callable[[str], DataFrame] | None = None,
) -> tuple[DataFrame, str]:  # fmt: skip
    """The MERGE's source rows, and the range of their keys over the target `t`
    (key_range; TRUE unless `bounded`). `pin` keeps a frame that the plan reads several
    times (the touched keys, SCD2's stored versions and folded events): without it each
    read computes the frame again, and an SCD2 source cost 12–19 s for 200 rows. `read`:
    how the change log's Delta table at a path is read (default: a Delta scan)."""
    table = compiled.table
    keys, data = list(table.keys), columns.data()
    logged = pool_exists(table_changes_path(table.name))  # made with the first delete
    touched = changes.select(*keys).distinct()
    if bounded or logged or table.scd2:  # read more than once: pinned
        touched = pin(touched)
    bounds = key_bounds(touched, keys) if bounded else []
    new = _with_position(changes.drop(ROW))
    if logged:
        log = (read or spark.read.format("delta").load)(table_changes_path(table.name))
        new = new.unionByName(_with_position(_logged(log, compiled, columns, touched)))
    if not table.scd2:
        # The newest known change per key; the MERGE applies it only where it is newer
        # than the stored row (so the table is not read here: one scan fewer).
        return _newest_per_key(new, keys, data).drop(fold.PRIORITY), key_range(bounds, "t")
    stored = spark.read.format("delta").load(table_path(table.name)).where(key_range(bounds))
    stored = pin(stored.join(touched, keys, "left_semi"))
    known = fold.table_as_scd2_events(stored, keys, data)
    events = fold.deduplicated(new.unionByName(_with_position(known)), keys)
    events = pin(fold.fill_unavailable(events, keys, data))
    tracked = [c for c in data if table.tracks(c)]
    versions = fold.scd2_versions(events, keys, data, tracked)
    return _differences(versions, stored, keys, data), key_range(bounds, "t")


def first_rows(compiled: CompiledTable, columns: Columns, changes: DataFrame) -> DataFrame:
    """The rows of an SCD1 table's first pass, into the table it has just created: per
    key, its newest change, as merge_source gives them, typed as the table's columns.
    There is nothing stored to join and no change log yet (no delete, no truncate), so
    these are exactly the rows its MERGE would insert, and an append writes them: no key
    range to find, no source to pin, no join (a snapshot's pass over each of a database's
    tables)."""
    keys, data = list(compiled.table.keys), columns.data()
    rows = _newest_per_key(_with_position(changes.drop(ROW)), keys, data).where(~F.col(DELETE))
    typed = {**columns.types, SEQUENCE: compiled.sequence_type}
    return rows.select(*(F.col(f"`{name}`").cast(kind).alias(name) for name, kind in typed.items()))


def _newest_per_key(events: DataFrame, keys: list[str], data: list[str]) -> DataFrame:
    """SCD1: per key, its newest change (a row or a delete), duplicates dropped and the
    columns it left out filled from its earlier events."""
    return fold.scd1_rows(
        fold.fill_unavailable(fold.deduplicated(events, keys), keys, data), keys, data
    )


def _logged(
    log: DataFrame, compiled: CompiledTable, columns: Columns, touched: DataFrame
) -> DataFrame:
    """What the change log (`log`, its rows) remembers of the touched keys."""
    keys = list(compiled.table.keys)
    return log.join(touched, keys, "left_semi").select(
        *keys,
        *columns.typed(skip=compiled.table.keys),
        columns.unavailable(),
        SEQUENCE,
        DELETE,
        F.lit(fold.FROM_LOG).alias(fold.PRIORITY),
    )


def _with_position(frame: DataFrame) -> DataFrame:
    if POSITION in frame.columns:
        return frame
    return frame.withColumn(POSITION, F.lit(None).cast("struct<partition: int, offset: bigint>"))


def _differences(
    rebuilt: DataFrame, stored: DataFrame, keys: list[str], data: list[str]
) -> DataFrame:
    """Rebuilt versions vs stored ones, by key and start: insert, update or delete."""
    stamp = [fold.END_AT, SEQUENCE]
    new = rebuilt.select(
        *keys, fold.START_AT, F.struct(*data, *stamp).alias("__new"),
        fold.comparable(rebuilt, [*data, *stamp]).alias("__new_cmp"),
    )  # fmt: skip
    old = stored.select(
        *keys, fold.START_AT, F.struct(*data, *stamp).alias("__old"),
        fold.comparable(stored, [*data, *stamp]).alias("__old_cmp"),
    )  # fmt: skip
    joined = new.join(old, [*keys, fold.START_AT], "full_outer")
    action = (
        F.when(F.col("__old").isNull(), F.lit("insert"))
        .when(F.col("__new").isNull(), F.lit("delete"))
        .when(~F.col("__new_cmp").eqNullSafe(F.col("__old_cmp")), F.lit("update"))
    )
    return joined.select(
        *keys,
        fold.START_AT,
        *(F.col(f"__new.{c}").alias(c) for c in [*data, *stamp]),
        action.alias(ACTION),
    ).where(F.col(ACTION).isNotNull())


def merge_sql(
    path: str, compiled: CompiledTable, columns: Columns, within: str = "TRUE",
    cuts: list[str] | None = None,
) -> str:  # fmt: skip
    """The MERGE statement over the source frame `{source}` and the range of its keys
    over the target, `within` (merge_source's). `cuts`: the pass's truncates' sequences,
    oldest first (SQL literals): the rows of keys the source does not name end at the
    first one after them (the source's own keys were ended by the fold)."""
    table = compiled.table
    on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in table.keys)
    if within != "TRUE":  # Delta skips the target's files outside it
        on += f" AND {within}"
    names = list(columns.types)
    if table.scd2:
        names += [fold.START_AT, fold.END_AT, SEQUENCE]
        on += f" AND t.{fold.START_AT} <=> s.{fold.START_AT}"
    sets = ", ".join(f"t.`{n}` = s.`{n}`" for n in names)
    cols = ", ".join(f"`{n}`" for n in names)
    values = ", ".join(f"s.`{n}`" for n in names)
    if table.scd2:
        return (
            f"MERGE INTO delta.`{path}` t USING {{source}} s ON {on} "
            f"WHEN MATCHED AND s.{ACTION} = 'delete' THEN DELETE "
            f"WHEN MATCHED AND s.{ACTION} = 'update' THEN UPDATE SET {sets} "
            f"WHEN NOT MATCHED AND s.{ACTION} = 'insert' THEN INSERT ({cols}) VALUES ({values})"
            + _truncated_versions(cuts or [])
        )
    # A column the newest change left out (Debezium's TOAST placeholder, fold.py) keeps
    # the stored value.
    sets = ", ".join(
        f"t.`{n}` = CASE WHEN array_contains(s.{UNAVAILABLE}, '{n}') THEN t.`{n}` ELSE s.`{n}` END"
        if n in columns.data()
        else f"t.`{n}` = s.`{n}`"
        for n in names
    )
    sets += f", t.{SEQUENCE} = s.{SEQUENCE}"
    cols += f", {SEQUENCE}"
    values += f", s.{SEQUENCE}"
    return (
        f"MERGE INTO delta.`{path}` t USING {{source}} s ON {on} "
        f"WHEN MATCHED AND s.{SEQUENCE} > t.{SEQUENCE} AND s.{DELETE} THEN DELETE "
        f"WHEN MATCHED AND s.{SEQUENCE} > t.{SEQUENCE} THEN UPDATE SET {sets} "
        f"WHEN NOT MATCHED AND NOT s.{DELETE} THEN INSERT ({cols}) VALUES ({values})"
        + (f" WHEN NOT MATCHED BY SOURCE AND t.{SEQUENCE} < {cuts[-1]} THEN DELETE" if cuts else "")
    )


def _truncated_versions(cuts: list[str]) -> str:
    """SCD2: the clause that ends each open version the source does not name at the first
    truncate after its start."""
    if not cuts:
        return ""
    start, end = f"t.{fold.START_AT}", f"t.{fold.END_AT}"
    first_after = " ".join(f"WHEN {start} < {cut} THEN {cut}" for cut in cuts)
    return (
        f" WHEN NOT MATCHED BY SOURCE AND {end} IS NULL AND {start} < {cuts[-1]} "
        f"THEN UPDATE SET {end} = CASE {first_after} END"
    )
