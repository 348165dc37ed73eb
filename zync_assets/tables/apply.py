"""One pass of a lake table: the source pool's new events → one MERGE, with the new cursors.

state    the table's run and cursors, from its newest commit (tables/state.py)
read     the source's rows from the cursors to the pool's committed end (changes.py)
type     the table's columns, widened or added as the events ask (columns.py); a change
         that cannot widen stops the pass before anything is written
log      deletes (SCD1) or every event (SCD2) appended to the table's change log, once
         per run (Delta txn): what later passes must remember about keys (late events)
merge    the touched keys' rows, folded from everything known about them (fold.py), in ONE
         MERGE whose commit also records the new cursors and run (txn zync-table/<name>);
         a table's first pass with neither deletes nor truncates appends its rows instead,
         with the same txn and record (nothing is stored to merge with)

A crash between log and merge is harmless: the run is retried with the same number, the
log append is then a no-op, and the fold drops the duplicates.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TypeVar

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from zync_assets.core.config import current
from zync_assets.core.errors import ConcurrentWriter, ZyncError, innermost_cause
from zync_assets.core.offsets import Offsets
from zync_assets.kafka.registry import Registry
from zync_assets.lake.delta_writes import CONCURRENT_WRITE, append_once
from zync_assets.lake.pools import (
    pool_exists,
    table_bytes,
    table_changes_path,
    table_path,
)
from zync_assets.spark.catalog import register_table
from zync_assets.spark.session import pinned, pins, session_conf, sized_work, sql_literal, unpin
from zync_assets.specs.model import Spec
from zync_assets.specs.tables import TableDef
from zync_assets.tables import fold
from zync_assets.tables.changes import (
    DELETE,
    POSITION,
    ROW,
    SEQUENCE,
    TOPIC,
    TRUNCATE,
    CompiledTable,
    change_events,
    compile_table,
    new_rows,
)
from zync_assets.tables.columns import (
    UNAVAILABLE,
    Columns,
    ColumnTypeError,
    observed,
    plan_columns,
    variant_schemas,
)
from zync_assets.tables.declared import NOTHING_DECLARED, Declared, declared
from zync_assets.tables.expand import lake_tables
from zync_assets.tables.keys import with_message_keys
from zync_assets.tables.merge import first_rows, merge_source, merge_sql
from zync_assets.tables.rewrite import (
    REWRITE_BELOW_BYTES,
    Rewrite,
    can_rewrite,
    discard_attempt,
    read_stored,
    rewrite_tables,
)
from zync_assets.tables.state import (
    TableState,
    app_id,
    changes_app_id,
    read_table_state,
    source_ends,
    table_metadata,
)

T = TypeVar("T")
_log = logging.getLogger(__name__)
LOGGED_AT = "__LOGGED_AT"
PRUNE_EVERY = 50  # runs between prunings of the change log's expired entries
# A MERGE into a table smaller than this rewrites the files it touches instead of giving
# them deletion vectors: a vector is a file and a commit action more, where rewriting a
# file of a few MiB costs milliseconds (the tables stage of 12 small tables took 0.92
# times as long: bench/small_merge_bench.py); a large table's vectors save rewriting
# most of it (bench/tables_bench.py).
DELETION_VECTORS_FROM_BYTES = 8 * 2**20
# A MERGE into a table smaller than this reads all of it rather than first finding the
# touched keys' range (merge.py's key_bounds): a Spark job and its planning, about 0.2 s
# of a small table's pass, to skip files a table of a few MiB hardly has.
KEY_RANGE_FROM_BYTES = 8 * 2**20
TABLE_PROPERTIES = {
    "delta.enableChangeDataFeed": "true",
    "delta.enableDeletionVectors": "true",
    "delta.enableTypeWidening": "true",
}


@dataclass(frozen=True)
class TableResult:
    table: str
    run: int | None  # None: nothing committed
    previous: TableState = field(default_factory=TableState)
    read: int = 0  # source events this pass read
    upserts: int = 0
    deletes: int = 0
    ignored: int = 0  # events that change no row (no row image, no delete: a message)
    truncates: int = 0  # Debezium's truncates: each ends every row before it
    cursors: Offsets = field(default_factory=dict)
    note: str = ""


Outcome = TableResult | Exception  # a table's result, or what stopped its pass


def describe_table(result: TableResult) -> str:
    """One line for a terminal: what a table pass applied."""
    if result.run is None:
        return f"table {result.table}: {result.note or 'nothing new'}"
    truncated = f", {result.truncates} truncates" if result.truncates else ""
    return (
        f"table {result.table}: run {result.run}: applied {result.upserts} upserts and "
        f"{result.deletes} deletes{truncated} of {result.read} events ({result.ignored} "
        "change no row)"
    )


def compile_tables(
    spark: SparkSession, spec: Spec, tables: list[TableDef] | None = None
) -> list[CompiledTable]:
    """The spec's tables (or `tables` of it), checked against Spark: tables of one shape
    (a pattern's, say) share one analysis of their expressions."""
    analysed: dict[tuple, CompiledTable] = {}
    compiled = []
    for table in lake_tables(spec).tables if tables is None else tables:
        shape = (table.sequence_by, table.apply_as_deletes, table.from_staging)
        if shape not in analysed:
            analysed[shape] = compile_table(spark, spec, table)
        compiled.append(replace(analysed[shape], table=table))
    return compiled


def declared_types(compiled: CompiledTable, registry: Registry | None) -> Declared:
    """The column types a raw Avro source's schemas declare (none for other sources)."""
    table = compiled.table
    if registry is None or table.from_staging:
        return NOTHING_DECLARED
    if compiled.spec.formats([table.source])[table.source].value != "avro":
        return NOTHING_DECLARED
    return declared(registry.versions(f"{table.source}-value"), envelope=True)


def apply_table(
    spark: SparkSession, compiled: CompiledTable, now: dt.datetime, registry: Registry | None,
    rebuild: bool = False, rewrite_below: int | None = None,
) -> TableResult:  # fmt: skip
    """One pass of a table: its source's new events, applied in one commit. `rebuild`: the
    table is built anew from the source's first event instead (rebuild_table)."""
    table = compiled.table
    state = table_state(table.name, rebuild)
    # Caught up is known from commit files: a table of a pattern whose pool took other
    # topics' events costs no Spark call.
    ends = source_ends(compiled.spec, table)
    found = None if ends is None or caught_up(state.cursors, ends) else new_rows(
        spark, compiled.spec, table, state.cursors, ends
    )  # fmt: skip
    if found is None:
        return nothing_new(spark, table.name, state)
    # A pass of a few events runs without Spark's code generation and shuffle fan-out
    # (spark.sized_work), as ETL passes do.
    with sized_work(spark, new_events(state.cursors, found.ends)):
        events = pinned(change_events(found.rows, compiled))
        try:
            due = Due(compiled, state, events, found.ends)
            outcome = apply_many(spark, [due], now, registry, rewrite_below, rebuild)[table.name]
        finally:
            unpin(events)
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


def table_state(name: str, rebuild: bool = False) -> TableState:
    """Table `name`'s run and cursors from its newest commit (a new table's: none); for a
    rebuild, from the first event, with the run numbers going on (so no old writer's
    commit lands)."""
    path = table_path(name)
    state = read_table_state(path, name) if pool_exists(path) else TableState()
    return TableState(run=state.run, version=state.version) if rebuild else state


def nothing_new(spark: SparkSession, name: str, state: TableState) -> TableResult:
    """The result of a pass that found no new event for table `name`."""
    if state.run:  # a table made before the catalog, or while it was down
        _register(spark, name, table_path(name), state.run)
    return TableResult(name, None, state, cursors=state.cursors, note="nothing new")


@dataclass(frozen=True)
class Due:
    """A table's pass to make: its events (pinned: read more than once), its source's
    change events from the state's cursors to `ends`; `summary`: theirs, if already counted
    (tables/together.py counts many tables' in one job)."""

    compiled: CompiledTable
    state: TableState
    events: DataFrame
    ends: Offsets
    summary: Summary | None = None
    pool_events: DataFrame | None = None  # the events of its group's tables, with TOPIC


def new_events(cursors: Offsets, ends: Offsets) -> int:
    """How many source events lie between the table's cursors and the pool's ends (at
    most: a pool's offsets may have gaps)."""
    return sum(
        end - cursors.get(topic, {}).get(part, 0)
        for topic, parts in ends.items()
        for part, end in parts.items()
    )


def rebuild_table(
    spark: SparkSession, spec: Spec, name: str, registry: Registry | None,
    now: dt.datetime | None = None,
) -> TableResult:  # fmt: skip
    """Table `name` of `spec` built anew from its whole source pool, in place: the table and
    its change log are replaced (CREATE OR REPLACE: their history stays readable with
    time travel) with the spec's columns, and one pass applies every source event. A
    pipeline's pass of the table racing it commits first or writes nothing (Delta's
    conflict check), so the table is exactly once either way."""
    found = lake_tables(spec)
    chosen = found.named(name)
    if chosen is None:
        have = ", ".join(t.name for t in found.tables) or "none"
        raise ZyncError(f"{spec.path}: no table {name!r} (its tables: {have})")
    compiled = compile_table(spark, spec, chosen)
    return apply_table(spark, compiled, now or dt.datetime.now(dt.UTC), registry, rebuild=True)


def _rebuild(compiled: CompiledTable) -> str:
    """The command that builds the table anew from its source pool."""
    return f"`zync table rebuild {compiled.spec.path} {compiled.table.name}`"


def check_selection(compiled: CompiledTable, state: TableState, current: dict[str, str]) -> None:
    """Refuse a pass whose spec keeps other columns than the stored rows were built with:
    their rows would lack a newly kept column's values, or keep a column the spec drops."""
    table = compiled.table
    dropped = [c for c in current if not table.keeps(c)]
    recorded = state.details.get("columns")
    if not dropped and (recorded is None or recorded == table.selection()):
        return
    what = f"holds column {dropped[0]}, which" if dropped else "was built with other columns:"
    raise ColumnTypeError(
        f"table {table.name} {what} the spec's column-list / except-column-list now leaves "
        f"out or adds: nothing was written; run {_rebuild(compiled)} to build it anew from "
        f"pool {table.source_pool} with the spec's columns"
    )


def unreadable_column(
    events: DataFrame, compiled: CompiledTable, columns: Columns
) -> ColumnTypeError | None:
    """Which column's value could not be read as the column's type (the first, with an
    example), for a pass that failed on it; None when none is found."""
    typed = [(n, k) for n, k in columns.types.items() if k != "variant"]
    if not typed:
        return None
    probes = []
    for name, kind in typed:
        value = f"variant_get({ROW}, '$.{name}')"
        bad = F.expr(
            f"try_variant_get({ROW}, '$.{name}', '{kind}') IS NULL AND {value} IS NOT NULL "
            f"AND NOT is_variant_null({value})"
        )
        example = F.expr(f"concat(to_json({value}), ' (', schema_of_variant({value}), ')')")
        probes.append(F.max(F.when(bad, example)).alias(name))
    found = events.select(*probes).first()
    if found is None:
        return None
    for name, kind in typed:
        if found[name] is not None:
            return ColumnTypeError(
                f"table {compiled.table.name}: column {name} is {kind}, but an event holds "
                f"{found[name]}, which cannot be read as {kind}: nothing was written. Leave "
                f"the column out (except-column-list: [{name}]) and run {_rebuild(compiled)}"
            )
    return None


def caught_up(cursors: Offsets, ends: Offsets) -> bool:
    return all(
        cursors.get(topic, {}).get(part, 0) >= end for topic, parts in ends.items()
        for part, end in parts.items()
    )  # fmt: skip


@dataclass(frozen=True)
class _Planned:
    """A table's pass up to its write: its tables made and typed, its rows folded, its
    commit's run, attempt and metadata decided."""

    compiled: CompiledTable
    state: TableState
    events: DataFrame
    ends: Offsets
    now: dt.datetime
    columns: Columns
    cuts: list[str]
    run: int
    attempt: str
    meta: str
    logs: bool  # the change log takes this pass's deletes (or, SCD2, every event)
    created: bool  # by this pass
    rebuild: bool
    counts: dict[str, int]
    size: int | None  # the table's bytes before the pass (None: not known)
    retyped: bool  # a column's type was widened by this pass
    pool_events: DataFrame | None  # Due.pool_events
    # A new table whose events only insert, each key once (a snapshot's `r` events): its
    # rows are the events' row images as they are, no fold (rewrite_plan.py's bulk rows).
    bulk: bool = False

    @property
    def name(self) -> str:
        return self.compiled.table.name

    @cached_property
    def changes(self) -> DataFrame:
        """The events that change a row, typed as the table's columns (a MERGE's: the
        shared job types them as it writes), with a delete of each key they name at each
        truncate."""
        changes = _typed_events(self.events, self.columns)
        if self.cuts:
            changes = _truncated(changes, self.events, self.compiled.table.keys)
        return changes


def apply_many(
    spark: SparkSession, items: list[Due], now: dt.datetime, registry: Registry | None,
    rewrite_below: int | None = None, rebuild: bool = False,
) -> dict[str, Outcome]:  # fmt: skip
    """Each table's pass over its events: the small ones (below `rewrite_below` bytes,
    default REWRITE_BELOW_BYTES; 0: none) written whole by one shared Spark job and
    committed one by one from the driver (rewrite.py), the others each MERGEd; per table,
    its result or what stopped it."""
    below = REWRITE_BELOW_BYTES if rewrite_below is None else rewrite_below
    outcomes: dict[str, Outcome] = {}
    planned: list[_Planned] = []
    for item in items:
        found = _outcome(_plan, spark, item, now, registry, rebuild)
        if isinstance(found, _Planned):
            planned.append(found)
        else:
            outcomes[item.compiled.table.name] = found
    whole = [p for p in planned if _rewrites(spark, p, below)]
    merged = [p for p in planned if p not in whole]
    if whole:
        try:
            failed = rewrite_tables(spark, [_rewrite(spark, p) for p in whole], now)
        except Exception as exc:  # the shared job's failure: each table MERGEs alone, to say whose
            _log.warning("the shared write of %d tables failed, each is merged alone: %s",
                         len(whole), innermost_cause(exc))  # fmt: skip
            for p in whole:
                discard_attempt(spark, p.compiled.table.name, p.run, p.attempt)
            merged, failed = merged + whole, {}
        for p in whole:
            if p.name in failed:
                stopped = failed[p.name]
                outcomes[p.name] = stopped if stopped is not None else _outcome(_finish, spark, p)
    for p in merged:
        outcomes[p.name] = _outcome(_merged, spark, p)
    return outcomes


def _rewrites(spark: SparkSession, planned: _Planned, below: int) -> bool:
    """Whether the pass writes the table whole (rewrite.py) rather than MERGEs into it."""
    small = planned.created or (planned.size is not None and planned.size < below)
    return (
        small and below > 0 and can_rewrite(spark) and not planned.compiled.table.scd2
        and not planned.cuts and not planned.rebuild
    )  # fmt: skip


def _rewrite(spark: SparkSession, p: _Planned) -> Rewrite:
    """Table `p`'s pass, planned for rewrite.py's shared job."""
    table = p.compiled.table
    path, log_path = table_path(table.name), table_changes_path(table.name)
    version, schema, stored = read_stored(spark, path)
    if p.retyped:  # its files still hold the old types: Delta reads them as the new ones
        stored = spark.read.format("delta").option("versionAsOf", version).load(path)
    log_schema, log_stored = "", None
    if pool_exists(log_path):  # made with the table's first delete
        _, log_schema, log_stored = read_stored(spark, log_path)
    events = p.pool_events
    if events is None:  # a table read alone: its events are its topic's
        events = p.events.withColumn(TOPIC, F.lit(table.source))
    stored_columns = {f["name"] for f in json.loads(schema)["fields"]}
    return Rewrite(
        table.name, path, table.source, version, schema,
        {k: p.columns.types[k] for k in table.keys},
        {c: p.columns.types[c] for c in p.columns.data() if c in stored_columns},
        p.columns.documents, None if p.created else stored, events, app_id(table.name), p.run,
        p.attempt, p.meta, log_stored, p.logs, log_path, changes_app_id(table.name), log_schema,
        p.bulk,
    )  # fmt: skip


def _plan(
    spark: SparkSession, item: Due, now: dt.datetime, registry: Registry | None, rebuild: bool
) -> _Planned | TableResult:
    compiled, state, events, ends = item.compiled, item.state, item.events, item.ends
    found = declared_types(compiled, registry)
    path = table_path(compiled.table.name)
    created = not rebuild and not pool_exists(path)  # by this pass, below (_ensure_tables)
    counts, schemas, distinct_keys = item.summary or _summary(events, created)
    if (rebuild or created) and counts["upserts"] + counts["deletes"] == 0:
        # Nothing to type the table's keys from yet (say, only Debezium messages): the
        # table is made by the first pass with a row change; these events are read again.
        return TableResult(
            compiled.table.name, None, state, cursors=state.cursors, note="no row changes yet",
            **counts,
        )  # fmt: skip
    compiled = with_message_keys(compiled, state, schemas["__key_schema"])
    table = compiled.table
    stored = {} if rebuild else _stored_columns(spark, path)
    current = {k: v for k, v in stored.items() if not k.startswith("__")}
    check_selection(compiled, state, current)
    seen = observed(schemas, table.keys)
    columns = plan_columns(table, current, seen, found.types, found.documents)
    cuts = _cut_points(events, compiled.sequence_type) if counts["truncates"] else []
    run, attempt = state.run + 1, uuid.uuid4().hex
    logs = table.scd2 or bool(counts["deletes"] or cuts)  # SCD1 remembers only its deletes
    _ensure_tables(spark, compiled, columns, replace=rebuild, logs=logs, have=stored)
    if run % PRUNE_EVERY == 0:
        _prune_log(spark, table, now)
    meta = table_metadata(
        table.name, run, attempt, ends, columns=table.selection(), keys=list(table.keys),
        **counts,
    )  # fmt: skip
    size = None if state.version is None else table_bytes(path, state.version)
    retyped = any(current.get(name, kind) != kind for name, kind in columns.types.items())
    # Keyed as its messages are (a spec's own keys may repeat where the Kafka keys do not).
    bulk = created and not item.compiled.table.keys and not logs and not table.scd2 and (
        distinct_keys == counts["upserts"]
    )  # fmt: skip
    return _Planned(
        compiled, state, events, ends, now, columns, cuts, run, attempt, meta, logs, created,
        rebuild, counts, size, retyped, item.pool_events, bulk,
    )  # fmt: skip


def _merged(spark: SparkSession, p: _Planned) -> TableResult:
    """Table `p`'s pass written the MERGE way (or, for a new table's first rows, appended)."""
    try:
        if p.logs:
            _log_changes(p.changes, p.compiled, p.run, p.now)
        if p.created and not p.logs:  # SCD1, no delete, no truncate: rows into an empty table
            _append_first(p.compiled, p.columns, p.changes, p.run, p.meta)
        else:
            _merge(spark, p.compiled, p.columns, p.changes, p.run, p.meta, p.cuts, p.size)
    except Exception as exc:
        if "INVALID_VARIANT_CAST" not in str(exc):
            raise
        raise unreadable_column(p.events.where(_applies()), p.compiled, p.columns) or exc from exc
    return _finish(spark, p)


def _finish(spark: SparkSession, p: _Planned) -> TableResult:
    """Table `p`'s pass after its commit: whether it was this attempt's, the catalog's name."""
    table = p.compiled.table
    path = table_path(table.name)
    committed = read_table_state(path, table.name)
    if committed.attempt != p.attempt:
        raise ConcurrentWriter(
            f"another writer applied run {p.run} of table {table.name} first; this pass wrote "
            "nothing (its events are applied by that run)"
        )
    _register(spark, table.name, path, p.run)
    counts = p.counts
    return TableResult(
        table.name, p.run, p.state, counts["read"], counts["upserts"], counts["deletes"],
        counts["ignored"], counts["truncates"], cursors=p.ends,
    )  # fmt: skip


def _outcome(call: Callable[..., T], *args: object) -> T | Exception:
    try:
        return call(*args)
    except Exception as exc:  # py4j, Spark and Delta errors alike: this table's
        return exc


def _register(spark: SparkSession, name: str, path: str, run: int) -> None:
    """The table in the catalog (if the lake has one), after its commit (once a process:
    spark/catalog.py): a catalog that is down costs the table its name for a while,
    never its rows."""
    catalog = current().catalog
    if not catalog.enabled:
        return
    try:
        register_table(spark, catalog, name, path)
    except ZyncError as exc:
        raise ZyncError(
            f"table {name}: run {run} applied, but not registered in the catalog: {exc}; the "
            "next pass registers it"
        ) from exc


def _cut_points(events: DataFrame, sequence_type: str) -> list[str]:
    """The truncates' sequences, oldest first, as SQL literals of the sequence's type (the
    MERGE ends the rows no event of the pass names with them)."""
    found = (
        events.where(F.col(TRUNCATE) & F.col(SEQUENCE).isNotNull())
        .select(SEQUENCE, F.to_json(F.struct(F.col(SEQUENCE).alias("v"))).alias("json"))
        .distinct()
        .orderBy(SEQUENCE)
        .collect()
    )
    quoted = (sql_literal(row["json"]) for row in found)
    # The MERGE is formatted with its source frame (`{source}`): braces are doubled.
    braced = (text.replace("{", "{{").replace("}", "}}") for text in quoted)
    return [f"from_json({text}, 'struct<v: {sequence_type}>').v" for text in braced]


def _truncated(changes: DataFrame, events: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """`changes` and, for each key they name, a delete at each truncate: so the fold ends
    the key's rows before a truncate, and the rows after it stay (the keys no event
    names are ended by the MERGE itself: merge.py)."""
    cuts = events.where(F.col(TRUNCATE) & F.col(SEQUENCE).isNotNull()).select(SEQUENCE)
    deletes = (
        changes.select(*keys).distinct().crossJoin(cuts.distinct())
        .withColumn(DELETE, F.lit(True))
        .withColumn(fold.PRIORITY, F.lit(fold.FROM_NEW))
        .withColumn(UNAVAILABLE, F.array().cast("array<string>"))
    )  # fmt: skip
    return changes.unionByName(deletes, allowMissingColumns=True)


def _applies() -> Column:
    """Whether an event changes a row: it has a sequence, and deletes or carries a row image.
    (Debezium's message events carry none; its tombstone has no `source`, so no sequence
    taken from there alone; a truncate changes every row before it, not one: _truncated.)"""
    return F.col(SEQUENCE).isNotNull() & ~F.col(TRUNCATE) & (F.col(DELETE) | F.col(ROW).isNotNull())


# What a table's new events hold: counts (read, upserts, deletes, ignored, truncates),
# the schemas of their variants (__row_schema, __key_schema), and how many distinct Kafka
# keys their upserts have (the upserts' count when no key repeats: _Planned.bulk).
Summary = tuple[dict[str, int], dict[str, str | None], int]


def summary_columns() -> list[Column]:
    """The aggregates of a Summary, to compute over one table's events or, grouped by
    source, over many tables' (tables/together.py)."""
    return [
        F.count(F.lit(1)).alias("read"),
        F.count(F.when(_applies() & F.col(DELETE), 1)).alias("deletes"),
        F.count(F.when(_applies() & ~F.col(DELETE), 1)).alias("upserts"),
        F.count(F.when(~_applies() & ~F.col(TRUNCATE), 1)).alias("ignored"),
        F.count(F.when(F.col(TRUNCATE), 1)).alias("truncates"),
        *variant_schemas(),
    ]


def summary_of(found: dict, distinct_keys: int = -1) -> Summary:
    """A Summary from a row of summary_columns() (as a dict; other keys are left out), and
    the upserts' distinct keys (-1: not counted)."""
    counts = {k: found.get(k) or 0 for k in ("read", "deletes", "upserts", "ignored", "truncates")}
    schemas = {k: found.get(k) for k in ("__row_schema", "__key_schema")}
    return counts, schemas, distinct_keys


def upsert_keys(events: DataFrame) -> DataFrame:
    """The events' upserts' Kafka keys as hashes (`__H`), to count the distinct ones: a
    collision can only count fewer, so as many as the upserts proves that no key repeats
    (a VARIANT is not comparable; its JSON is). Counted apart from the Summary's other
    aggregates, which a distinct count would copy each event for, its row image too."""
    upserts = events.where(_applies() & ~F.col(DELETE))
    return upserts.withColumn("__H", F.xxhash64(F.to_json("__KEY")))


def _summary(events: DataFrame, new: bool) -> Summary:
    """What the events hold, in one Spark job; of a `new` table's, a second counts their
    distinct keys."""
    row = events.select(*summary_columns()).first()
    assert row is not None
    if not new:
        return summary_of(row.asDict())
    keys = upsert_keys(events).select(F.count_distinct("__H")).first()
    return summary_of(row.asDict(), keys[0] if keys is not None else -1)


def _stored_columns(spark: SparkSession, path: str) -> dict[str, str]:
    """The table's columns (its __ columns too) and their types ({}: no table yet)."""
    if not pool_exists(path):
        return {}
    schema = spark.read.format("delta").load(path).schema
    return {f.name: f.dataType.simpleString() for f in schema.fields}


def _typed_events(events: DataFrame, columns: Columns) -> DataFrame:
    """The events that change a row, with the table's typed columns."""
    return events.where(_applies()).select(
        *columns.typed(), columns.unavailable(), SEQUENCE, DELETE, ROW, POSITION,
        F.lit(fold.FROM_NEW).alias(fold.PRIORITY),
    )  # fmt: skip


def _metadata_columns(compiled: CompiledTable) -> dict[str, str]:
    seq = compiled.sequence_type
    if compiled.table.scd2:
        return {fold.START_AT: seq, fold.END_AT: seq, SEQUENCE: seq}
    return {SEQUENCE: seq}


def _ensure_tables(
    spark: SparkSession, compiled: CompiledTable, columns: Columns, replace: bool = False,
    logs: bool = True, have: dict[str, str] | None = None,
) -> None:  # fmt: skip
    """Create the table, or add and widen its columns (`have`: its columns, if read
    already); and its change log, once a pass `logs` (an SCD1 table's first delete: until
    then it has nothing to remember, and a new table costs one CREATE less); `replace`:
    replace both with empty ones (a rebuild)."""
    table = compiled.table
    path = table_path(table.name)
    wanted = columns.types | _metadata_columns(compiled)
    if replace and pool_exists(path):
        _empty(spark, path, wanted)
    elif not pool_exists(path):
        props = ", ".join(f"'{k}' = '{v}'" for k, v in TABLE_PROPERTIES.items())
        _create(spark, table.name, path, (
            f"CREATE TABLE IF NOT EXISTS delta.`{path}` ({_ddl(wanted)}) USING delta "
            f"CLUSTER BY ({', '.join(table.keys)}) TBLPROPERTIES ({props})"
        ))  # fmt: skip
    else:
        have = have or _stored_columns(spark, path)
        added = {k: v for k, v in wanted.items() if k not in have}
        if added:
            spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ({_ddl(added)})")
        for name, kind in wanted.items():
            if name in have and have[name] != kind:
                spark.sql(f"ALTER TABLE delta.`{path}` ALTER COLUMN `{name}` TYPE {kind}")
    log = table_changes_path(table.name)
    keys = {k: columns.types[k] for k in table.keys}
    logged = keys | {SEQUENCE: compiled.sequence_type, DELETE: "boolean", ROW: "variant",
                     LOGGED_AT: "timestamp", "__RUN": "bigint"}  # fmt: skip
    if replace and pool_exists(log):
        _empty(spark, log, logged)
    elif logs and not pool_exists(log):
        _create(
            spark,
            table.name,
            log,
            f"CREATE TABLE IF NOT EXISTS delta.`{log}` ({_ddl(logged)}) USING delta",
        )


def _create(spark: SparkSession, name: str, path: str, statement: str) -> None:
    """Run a CREATE TABLE IF NOT EXISTS of table `name` or its change log at `path`. Two
    writers creating it at once (two pipelines' first pass) both pass IF NOT EXISTS, and
    Delta refuses the second commit of version 0 — or, seen once in a full suite run,
    refuses the loser's "non-empty location" while the winner's first commit lands. Either
    way that pass writes nothing and says so; a non-empty folder that never becomes a
    table keeps Delta's own error."""
    try:
        spark.sql(statement)
    except CONCURRENT_WRITE as exc:
        raise _created_beside(name) from exc
    except AnalysisException as exc:
        if exc.getCondition() != _NON_EMPTY_LOCATION or not _created_by_another(path):
            raise
        raise _created_beside(name) from exc


_NON_EMPTY_LOCATION = "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION"


def _created_by_another(path: str, patience_s: float = 10.0) -> bool:
    """Whether a table appears at `path` within `patience_s` (the racing winner's commit)."""
    deadline = time.monotonic() + patience_s
    while not pool_exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _created_beside(name: str) -> ConcurrentWriter:
    return ConcurrentWriter(
        f"another writer created table {name} at the same time; this pass wrote "
        "nothing: the next one applies its events"
    )


def _empty(spark: SparkSession, path: str, columns: dict[str, str]) -> None:
    """Replace the Delta table at `path` with an empty one of `columns`, in one commit (its
    properties and clustering stay; its earlier versions stay readable)."""
    empty = spark.createDataFrame([], _ddl(columns))
    empty.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)


def _ddl(columns: dict[str, str]) -> str:
    return ", ".join(f"`{name}` {kind}" for name, kind in columns.items())


def _log_rows(changes: DataFrame, compiled: CompiledTable, run: int, now: dt.datetime) -> DataFrame:
    """What later passes must remember: deletes (SCD1), or every event (SCD2)."""
    table = compiled.table
    logged = changes if table.scd2 else changes.where(F.col(DELETE))
    return logged.select(
        *table.keys, SEQUENCE, DELETE, ROW,
        F.lit(now).cast("timestamp").alias(LOGGED_AT), F.lit(run).cast("bigint").alias("__RUN"),
    )  # fmt: skip


def _log_changes(changes: DataFrame, compiled: CompiledTable, run: int, now: dt.datetime) -> None:
    """The pass's change-log rows (_log_rows) appended, once per run."""
    table = compiled.table
    append_once(
        _log_rows(changes, compiled, run, now), table_changes_path(table.name),
        changes_app_id(table.name), run,
        conflict=f"another writer applied run {run} of table {table.name} at the same time",
    )  # fmt: skip


def _prune_log(spark: SparkSession, table: TableDef, now: dt.datetime) -> None:
    """Forget what is older than the table's deleted-keys-retention window."""
    if not pool_exists(table_changes_path(table.name)):
        return  # no delete yet: nothing to forget
    horizon = now - dt.timedelta(seconds=table.retention_s)
    spark.sql(
        f"DELETE FROM delta.`{table_changes_path(table.name)}` WHERE {LOGGED_AT} < "
        f"TIMESTAMP '{horizon.strftime('%Y-%m-%d %H:%M:%S')}+00:00'"
    )


def _append_first(
    compiled: CompiledTable, columns: Columns, changes: DataFrame, run: int, meta: str
) -> None:
    """The first pass of a table it created: its rows appended in one commit, with the
    same Delta txn (zync-table/<name>, the run) and metadata a MERGE commits, so a rival
    pass of the same run writes nothing (Delta skips a txn version it has) and loses the
    attempt check after it."""
    name = compiled.table.name
    append_once(
        first_rows(compiled, columns, changes), table_path(name), app_id(name), run,
        metadata=meta,
        conflict=f"another writer changed table {name} while run {run} wrote its first rows; "
        "this pass wrote nothing: the next one applies its events",
    )  # fmt: skip


def _merge(
    spark: SparkSession, compiled: CompiledTable, columns: Columns, changes: DataFrame,
    run: int, meta: str, cuts: list[str], size: int | None = None,
) -> None:  # fmt: skip
    """The pass's MERGE into the table, of `size` bytes before it (None: not known)."""
    table = compiled.table
    vectors = size is None or size >= DELETION_VECTORS_FROM_BYTES
    settings = {
        "spark.databricks.delta.write.txnAppId": app_id(table.name),
        "spark.databricks.delta.write.txnVersion": str(run),
        "spark.databricks.delta.commitInfo.userMetadata": meta,
        "spark.databricks.delta.skipRecordingEmptyCommits": "false",
        # The MERGE's source is pinned already (a local checkpoint: stable between its
        # two scans), so Delta's own copy of it is a job for nothing: one of a pass's 13.
        "spark.databricks.delta.merge.materializeSource": "none",
        "spark.databricks.delta.merge.deletionVectors.persistent": str(vectors).lower(),
    }
    try:
        with pins() as pin, session_conf(spark, settings):
            bounded = size is None or size >= KEY_RANGE_FROM_BYTES
            rows, within = merge_source(spark, compiled, columns, changes, pin, bounded)
            statement = merge_sql(table_path(table.name), compiled, columns, within, cuts)
            spark.sql(statement, source=pin(rows)).collect()
    except CONCURRENT_WRITE as exc:
        raise ConcurrentWriter(
            f"another writer changed table {table.name} while run {run} merged; this pass "
            "wrote nothing: the next one applies its events"
        ) from exc
