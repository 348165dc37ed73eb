"""The shared job's plan: every rewritten table's new version, change feed and change-log
rows from ONE frame, whatever the number of tables (rewrite.py writes and commits them).

Tables differ in columns, so their rows travel as VARIANT objects: per row, the table's
index `__T`, its key (a VARIANT object of the typed key columns, and its JSON to group by),
and its data columns as a map name → VARIANT. Three sources meet in one shuffle,
partitioned by table (so each table's rows land in one task, and one file):

  stored   the table's rows (priority 0), read from its files
  events   the pass's change events of every table (priority 1), one scan of the pool's
           pinned events: the key and the columns are picked per table with constant
           arrays indexed by `__T` (a plan per table would make every task of the job
           carry every table's plan)
  log      what the change log remembers of deleted keys (priority 2)

Per table and key, one aggregation folds them as merge.py's MERGE source and
rewrite-by-MERGE would (fold.py's rules: one event per sequence, the log's copy first,
then the newest position; a column left out as Debezium's TOAST placeholder takes the
newest earlier event's value, else the stored one; a newer sequence wins, a late event
loses), and gives the key's rows: its row of the new version, its change-feed rows
(`insert`, `update_preimage`/`update_postimage`, `delete`), and its change-log rows.
The writer (zync.spark.TableFiles.writeRows) reads each column back from the VARIANT as
the table's type; a value that does not fit fails the job (apply.py then MERGEs each
table alone, and names the column).

A `bulk` table (new, and its events insert each key once: a snapshot's `r` events) has
nothing to fold: its rows are its events' row images as they are, written by the same job
from the same scan, with no shuffle and no change-feed files (Delta reads a commit that
only adds files as inserts). The fold costs a row a map of its columns, a shuffle and a
sort; a snapshot is all rows.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from zync_assets.core.debezium import UNAVAILABLE_PLACEHOLDER
from zync_assets.spark.session import sql_literal, union_all
from zync_assets.tables.changes import DELETE, POSITION, ROW, SEQUENCE, TOPIC, TRUNCATE
from zync_assets.tables.columns import typed_sql

# Priorities, as fold.py's: which copy of an event with the same key and sequence wins.
FROM_TABLE, FROM_NEW, FROM_LOG = 0, 1, 2
OUTPUT, CHANGE, SEQ, ROW_OUT = "output", "change", "seq", "row"  # the frame writeRows takes
_FIELDS = "map<string,variant>"
_NO_FIELDS = f"CAST(map() AS {_FIELDS})"


@dataclass(frozen=True)
class Table:
    """A table of the shared plan: its pool topic, typed keys and data columns (in table
    order), JSON columns, stored rows (None: none), change-log rows (None: none) and, when
    the pass appends its deletes to the change log, that output's index and the run."""

    topic: str
    keys: dict[str, str]
    data: list[str]
    documents: frozenset[str]
    stored: DataFrame | None
    log_stored: DataFrame | None
    log_output: int  # -1: the pass appends nothing to the change log
    run: int
    bulk: bool = False  # new, and each key inserted once: its events' row images as they are


def planned_rows(
    spark: SparkSession, tables: list[Table], events: DataFrame, now: dt.datetime
) -> DataFrame:
    """The frame TableFiles.writeRows writes: (output, change, seq, row), output `i` being
    table i's new version and change feed, and tables[i].log_output its change log's new
    rows; each output's rows together in a partition (a folded table's in one partition)."""
    bulk = _bulk(tables, events, spark.sparkContext.defaultParallelism)
    if all(t.bulk for t in tables):
        assert bulk is not None
        return bulk.sortWithinPartitions(OUTPUT)
    planned = _planned(spark, tables, events, now)
    if bulk is None:
        return planned.sortWithinPartitions(OUTPUT)
    return planned.unionByName(bulk).sortWithinPartitions(OUTPUT)


def _planned(
    spark: SparkSession, tables: list[Table], events: DataFrame, now: dt.datetime
) -> DataFrame:
    """The rows of the tables that are not bulk, folded."""
    sources = [_events(tables, events)]
    for index, table in enumerate(tables):
        if table.log_stored is not None:
            sources.append(_logged(index, table))
        if table.stored is not None:
            sources.append(_stored(index, table))
    # One task reads all the small sources (a task per table's file would each carry the
    # whole union's plan), then one shuffle gathers each table's rows in one partition.
    folded = sum(not t.bulk for t in tables)
    partitions = max(1, min(spark.sparkContext.defaultParallelism, folded))
    shaped = union_all(sources).coalesce(partitions).select(*_shaped(tables))
    grouped = (
        shaped.repartition(partitions, "__T")
        .groupBy("__T", "__J")
        .agg(
            # the key's events and change-log entries; its stored row; whether the pass names it
            F.collect_list(
                F.expr(
                    f"CASE WHEN p <> {FROM_TABLE} THEN struct(p, seq, part, off, d, f, l, r) END"
                )
            ).alias("__E"),
            F.first(
                F.expr(f"CASE WHEN p = {FROM_TABLE} THEN struct(seq, f) END"), ignorenulls=True
            ).alias("__old"),
            F.expr(f"max(p = {FROM_NEW})").alias("__named"),
            F.expr("any_value(__K)").alias("__K"),
        )
    )
    return _folded(grouped, tables, now)


def _bulk(tables: list[Table], events: DataFrame, partitions: int) -> DataFrame | None:
    """The bulk tables' rows: each insert's row image and sequence (None: no bulk table).
    Coalesced to `partitions` tasks, so that a table has a file per task at most."""
    if not any(t.bulk for t in tables):
        return None
    topics = _topic_tables(tables, bulk=True)
    return (
        events.where(f"{_APPLIES} AND NOT {DELETE} AND map_contains_key({topics}, {TOPIC})")
        .coalesce(partitions)
        .select(
            F.explode(F.expr(f"element_at({topics}, {TOPIC})")).alias(OUTPUT),
            F.lit(None).cast("string").alias(CHANGE),
            F.col(SEQUENCE).alias(SEQ),
            F.col(ROW).alias(ROW_OUT),
        )
    )


def _topic_tables(tables: list[Table], bulk: bool) -> str:
    """A SQL map: each topic → the indexes of its tables (a topic may feed several) that
    are bulk (or not)."""
    readers: dict[str, list[int]] = defaultdict(list)
    for index, table in enumerate(tables):
        if table.bulk == bulk:
            readers[table.topic].append(index)
    return "map(" + ", ".join(
        f"{sql_literal(topic)}, array({', '.join(map(str, members))})" for topic, members in readers.items()
    ) + ")"  # fmt: skip


def _strings(names: list[str] | frozenset[str]) -> str:
    return f"CAST(array({', '.join(sql_literal(n) for n in names)}) AS array<string>)"


def _per_table(values: list[str]) -> str:
    """An expression of row's table: values[__T] (SQL texts)."""
    return f"element_at(array({', '.join(values)}), __T + 1)"


def _key(keys: dict[str, str], typed: bool) -> str:
    """A table's key as a VARIANT object: from an event's row image (`typed`: read as the
    columns' types), or from a table's own key columns."""
    fields = ", ".join(
        f"{sql_literal(name)}, {typed_sql(name, kind, key=True) if typed else f'`{name}`'}"
        for name, kind in keys.items()
    )
    return f"to_variant_object(named_struct({fields}))"


_COLUMNS = ["__T", "__K", "seq", "p", "part", "off", "d", "r", "sf"]  # a source's columns
# An event that changes a row (apply.py's _applies).
_APPLIES = f"{SEQUENCE} IS NOT NULL AND NOT {TRUNCATE} AND ({DELETE} OR {ROW} IS NOT NULL)"


def _events(tables: list[Table], events: DataFrame) -> DataFrame:
    """The pass's events that change a row (apply.py's _applies), of every table to fold."""
    topics = _topic_tables(tables, bulk=False)
    by_shape: dict[str, list[int]] = defaultdict(list)  # tables of one key shape share a CASE
    for index, table in enumerate(tables):
        if not table.bulk:
            by_shape[_key(table.keys, typed=True)].append(index)
    key = "CASE " + " ".join(
        f"WHEN __T IN ({', '.join(map(str, members))}) THEN {shape}"
        for shape, members in by_shape.items()
    ) + " END"  # fmt: skip
    return (
        events.where(f"{_APPLIES} AND map_contains_key({topics}, {TOPIC})")
        .select(F.explode(F.expr(f"element_at({topics}, {TOPIC})")).alias("__T"), "*")
        .selectExpr(
            "__T",
            f"{key} AS __K",
            f"{SEQUENCE} AS seq",
            f"{FROM_NEW} AS p",
            f"{POSITION}.partition AS part",
            f"{POSITION}.offset AS off",
            f"{DELETE} AS d",
            f"{ROW} AS r",
            f"CAST(NULL AS {_FIELDS}) AS sf",
        )
    )


def _logged(index: int, table: Table) -> DataFrame:
    """What table `index`'s change log remembers (its deletes)."""
    assert table.log_stored is not None
    return table.log_stored.selectExpr(
        f"{index} AS __T", f"{_key(table.keys, typed=False)} AS __K", f"{SEQUENCE} AS seq",
        f"{FROM_LOG} AS p", "CAST(NULL AS int) AS part", "CAST(NULL AS bigint) AS off",
        f"{DELETE} AS d", f"{ROW} AS r", f"CAST(NULL AS {_FIELDS}) AS sf",
    )  # fmt: skip


def _stored(index: int, table: Table) -> DataFrame:
    """Table `index`'s stored rows: their data columns as a map (a NULL column left out)."""
    assert table.stored is not None
    fields = ", ".join(f"{sql_literal(n)}, CAST(`{n}` AS variant)" for n in table.data)
    values = f"map({fields})" if fields else _NO_FIELDS  # a NULL is left out as it is written
    return table.stored.selectExpr(
        f"{index} AS __T", f"{_key(table.keys, typed=False)} AS __K", f"{SEQUENCE} AS seq",
        f"{FROM_TABLE} AS p", "CAST(NULL AS int) AS part", "CAST(NULL AS bigint) AS off",
        "false AS d", "CAST(NULL AS variant) AS r", f"{values} AS sf",
    )  # fmt: skip


def _shaped(tables: list[Table]) -> list:
    """Every source's rows with their table's data columns as a map (`f`: an event's from
    its row image, each column's field or NULL) and the columns its row image left out as
    Debezium's TOAST placeholder (`l`), and the key's JSON (`__J`) to group by."""
    columns = _per_table([_strings(t.data) for t in tables])
    image = f"coalesce(try_variant_get(r, '$', '{_FIELDS}'), {_NO_FIELDS})"
    field = f"try_element_at({image}, c)"
    placeholder = sql_literal(UNAVAILABLE_PLACEHOLDER)
    left_out = (
        f"coalesce(try_variant_get({field}, '$', 'string') = {placeholder} OR "
        f"try_variant_get({field}, '$', 'binary') = CAST({placeholder} AS binary), false)"
    )
    return [
        F.col("__T"), F.col("__K"), F.expr("to_json(__K)").alias("__J"), *_COLUMNS[2:7],
        F.expr(f"CASE WHEN p = {FROM_NEW} THEN r END").alias("r"),
        F.expr(f"coalesce(sf, map_from_arrays({columns}, transform({columns}, c -> {field})))")
        .alias("f"),
        F.expr(f"CASE WHEN r IS NOT NULL THEN filter({columns}, c -> {left_out}) END").alias("l"),
    ]  # fmt: skip


# Events in the order the fold reads them: by sequence, then priority, then position (so
# of the events with one sequence, the last is the one that counts).
_ORDER = " ".join(
    f"WHEN {a} < {b} THEN -1 WHEN {a} > {b} THEN 1"
    for a, b in [("l.seq", "r.seq"), ("l.p", "r.p"), ("coalesce(l.part, -1)", "coalesce(r.part, -1)"),
                 ("coalesce(l.off, -1)", "coalesce(r.off, -1)")]
)  # fmt: skip


def _folded(grouped: DataFrame, tables: list[Table], now: dt.datetime) -> DataFrame:
    """Per table and key, its rows (fold.py's SCD1 rules, then rewrite's images)."""
    newest_first = (
        f"array_sort(filter(__E, e -> e.p <> {FROM_TABLE}), (l, r) -> CASE {_ORDER} ELSE 0 END)"
    )
    steps = [
        {"__ordered": newest_first},  # the key's events and change-log entries in order
        {  # one event per sequence (fold.deduplicated)
            "__once": "filter(__ordered, (e, i) -> i = size(__ordered) - 1 OR NOT (get(__ordered, i + 1).seq <=> e.seq))",
        },
        {  # the newest; the newest value each column had in a row image (fold.fill_unavailable)
            "__new": "get(__once, size(__once) - 1)",
            "__known": (
                f"aggregate(__once, {_NO_FIELDS}, (acc, e) -> IF(e.d, acc, map_concat("
                "map_filter(acc, (k, v) -> NOT map_contains_key(e.f, k) OR array_contains(e.l, k)), "
                "map_filter(e.f, (k, v) -> NOT array_contains(e.l, k)))))"
            ),
        },
        {  # the newest's columns, those it left out from the events before it
            "__wins": "__named AND __new IS NOT NULL AND (__old IS NULL OR coalesce(__new.seq > __old.seq, false))",
            "__del": "coalesce(__new.d, false)",
            "__still": "filter(__new.l, c -> NOT map_contains_key(__known, c))",
            "__fresh": (
                "transform_values(__new.f, (k, v) -> IF(array_contains(__new.l, k) AND "
                "map_contains_key(__known, k), try_element_at(__known, k), v))"
            ),
        },
        {  # a column still left out keeps the stored value (merge.py's TOAST rule)
            "__after": (
                "IF(__wins, transform_values(__fresh, (k, v) -> IF(__had AND array_contains(__still, k), "
                "try_element_at(__old.f, k), v)), __old.f)"
            ),
            "__aseq": "IF(__wins, __new.seq, __old.seq)",
        },
    ]
    frame = grouped.withColumn("__had", F.expr("__old IS NOT NULL"))
    for step in steps:  # a key the pass does not name keeps its row: nothing to fold
        frame = frame.select(
            "*", *(F.expr(f"CASE WHEN __named THEN {sql} END").alias(n) for n, sql in step.items())
        )
    log_output = _per_table([str(t.log_output) for t in tables])
    run = _per_table([str(t.run) for t in tables])

    def image(change: str, seq: str, fields: str, output: str = "__T") -> str:
        return f"named_struct('o', {output}, 'c', {change}, 'seq', {seq}, 'f', {fields})"

    upsert, gone = "__wins AND NOT __del", "__wins AND __del AND __had"
    images = [
        (f"({upsert}) OR (NOT __wins AND __had)", image("CAST(NULL AS string)", "__aseq", "__after")),
        (f"{upsert} AND NOT __had", image("'insert'", "__aseq", "__after")),
        (f"{upsert} AND __had", image("'update_preimage'", "__old.seq", "__old.f")),
        (f"{upsert} AND __had", image("'update_postimage'", "__aseq", "__after")),
        (gone, image("'delete'", "__old.seq", "__old.f")),
    ]  # fmt: skip
    micros = round(now.timestamp() * 1_000_000)
    stamp = f"CAST(timestamp_micros({micros}) AS variant)"
    logged = image(
        "CAST(NULL AS string)", "e.seq",
        f"map('__DELETE', CAST(true AS variant), '{ROW}', e.r, '__LOGGED_AT', {stamp}, "
        f"'__RUN', CAST(CAST({run} AS bigint) AS variant))",
        output=log_output,
    )  # fmt: skip
    kept = image("CAST(NULL AS string)", "__old.seq", "__old.f")
    rows = (
        f"CASE WHEN NOT __named THEN array(IF(__had, {kept}, NULL)) ELSE concat(array("
        + ", ".join(f"IF({when}, {row}, NULL)" for when, row in images)
        + f"), transform(filter(__E, e -> e.p = {FROM_NEW} AND e.d AND {log_output} >= 0), "
        f"e -> {logged})) END"
    )
    # A NULL in the map is a VARIANT null in the row, which reads back as NULL but in a
    # VARIANT column: an output with a column whose VARIANT null is a value (a JSON
    # column's document `null`, a change log's row image) leaves its NULLs out instead.
    cleans = "array(" + ", ".join(
        ["true" if t.documents else "false" for t in tables]
        + ["true" for t in tables if t.log_output >= 0]
    ) + ")"  # fmt: skip
    fields = (
        f"CASE WHEN element_at({cleans}, __i.o + 1) THEN map_filter(__i.f, (k, v) -> v IS NOT "
        "NULL) ELSE __i.f END"
    )
    return (
        frame.select("__K", F.explode(F.expr(rows)).alias("__i"))
        .where("__i IS NOT NULL")
        .select(
            F.col("__i.o").alias(OUTPUT),
            F.col("__i.c").alias(CHANGE),
            F.col("__i.seq").alias(SEQ),
            F.expr(
                f"to_variant_object(map_concat(try_variant_get(__K, '$', '{_FIELDS}'), {fields}))"
            ).alias(ROW_OUT),
        )
    )
