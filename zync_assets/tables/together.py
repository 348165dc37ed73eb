"""A pass over many lake tables: the new events of those that share a source pool read in one
scan and counted in one job, then each table merged on its own (apply.py).

A table's pass costs Spark a fixed price whatever its rows: planning a Delta scan of its
pool (Delta's file skipping is a job), a job to count its events and read their schemas,
a MERGE. Over a pattern's tables (a whole database's, say) the first two were paid once
per table; here they are paid once per pool and shape (the tables of a pattern share
their `sequence-by` and `apply-as-deletes`): one scan reads every table's range, one
job groups the counts by source topic. Each table then reads its own events from the
pinned rows, and commits alone: its cursors, run and attempt check are exactly those of
apply_table, so a kill or a rival writer costs what it costs a single table's pass.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from zync_assets.core.offsets import Offsets
from zync_assets.kafka.registry import Registry
from zync_assets.spark.session import one_of, pinned, sized_work, unpin
from zync_assets.specs.model import Spec
from zync_assets.tables.apply import (
    Due,
    Outcome,
    Summary,
    TableResult,
    apply_many,
    apply_table,
    caught_up,
    compile_tables,
    new_events,
    nothing_new,
    summary_columns,
    summary_of,
    table_state,
    upsert_keys,
)
from zync_assets.tables.changes import TOPIC, CompiledTable, change_events, pool_rows
from zync_assets.tables.state import TableState, source_ends

T = TypeVar("T")


@dataclass(frozen=True)
class _Waiting:
    """A table with new events: its state, and the pool's ends for its source."""

    compiled: CompiledTable
    state: TableState
    ends: Offsets


def apply_tables(
    spark: SparkSession, tables: list[CompiledTable], now: dt.datetime, registry: Registry | None,
    rewrite_below: int | None = None,
) -> list[Outcome]:  # fmt: skip
    """Each table's pass (as apply_table would make it), in the order given: its result,
    or the exception that stopped it (one table's failure stops no other's).
    `rewrite_below`: tables smaller than this many bytes are written whole by one shared
    job (tables/rewrite.py; default apply.REWRITE_BELOW_BYTES; 0: every table MERGEs)."""
    outcomes: dict[str, Outcome] = {}
    due: list[_Waiting] = []
    for compiled in tables:
        name = compiled.table.name
        try:
            state = table_state(name)
            ends = source_ends(compiled.spec, compiled.table)
            if ends is None or caught_up(state.cursors, ends):
                outcomes[name] = nothing_new(spark, name, state)
            else:
                due.append(_Waiting(compiled, state, ends))
        except Exception as exc:  # py4j, Spark and Delta errors alike: this table's
            outcomes[name] = exc
    for group in _groups(due):
        outcomes |= _apply_group(spark, group, now, registry, rewrite_below)
    return [outcomes[c.table.name] for c in tables]


def run_tables(
    spark: SparkSession, spec: Spec, registry: Registry | None = None, only: str | None = None,
    compiled: list[CompiledTable] | None = None, now: dt.datetime | None = None,
    rewrite_below: int | None = None,
) -> list[TableResult]:  # fmt: skip
    """One pass of each of the spec's tables (or table `only`), the first failure raised
    (once every table has had its pass). `registry`: where the sources' Avro schemas
    are, to type the columns (without it, from the values alone)."""
    compiled = compiled if compiled is not None else compile_tables(spark, spec)
    chosen = [c for c in compiled if only is None or c.table.name == only]
    outcomes = apply_tables(spark, chosen, now or dt.datetime.now(dt.UTC), registry, rewrite_below)
    results: list[TableResult] = []
    for outcome in outcomes:
        if isinstance(outcome, Exception):
            raise outcome
        results.append(outcome)
    return results


def _groups(due: list[_Waiting]) -> list[list[_Waiting]]:
    """The due tables that can be read together: of one source pool and shape, where the
    tables of one source topic stand at the same cursors and read to the same ends (so
    that they read the same events, and the counts grouped by topic are each one's);
    every other table alone."""
    shared: dict[tuple, list[_Waiting]] = defaultdict(list)
    for item in due:
        table = item.compiled.table
        shape = (table.source_pool, table.from_staging, table.sequence_by, table.apply_as_deletes)
        shared[shape].append(item)
    groups: list[list[_Waiting]] = []
    for members in shared.values():
        at: dict[str, set[str]] = defaultdict(set)  # topic -> its tables' cursors and ends
        for m in members:
            at[m.compiled.table.source].add(json.dumps([_cursor(m), m.ends], sort_keys=True))
        together = [m for m in members if len(at[m.compiled.table.source]) == 1]
        groups += [[m] for m in members if len(at[m.compiled.table.source]) > 1]
        if together:
            groups.append(together)
    return groups


def _cursor(item: _Waiting) -> dict[int, int]:
    """A table's cursors on its source topic."""
    return item.state.cursors.get(item.compiled.table.source, {})


def _apply_group(
    spark: SparkSession, group: list[_Waiting], now: dt.datetime, registry: Registry | None,
    rewrite_below: int | None,
) -> dict[str, Outcome]:  # fmt: skip
    if len(group) == 1:  # nothing to share: apply_table's own read
        compiled = group[0].compiled
        return {compiled.table.name: _outcome(apply_table, spark, compiled, now, registry, False,
                                              rewrite_below)}  # fmt: skip
    first = group[0].compiled
    cursors = {m.compiled.table.source: _cursor(m) for m in group}  # one per topic (_groups)
    ends = {topic: parts for m in group for topic, parts in m.ends.items()}
    with sized_work(spark, new_events(cursors, ends)):
        try:
            events = pinned(change_events(pool_rows(spark, first.table, cursors, ends), first,
                                          with_topic=True))  # fmt: skip
        except Exception as exc:  # the shared read's failure is each table's
            return {m.compiled.table.name: exc for m in group}
        try:
            # Tables no pass has committed yet (their state read above; no listing): the
            # ones whose keys a first pass counts (apply.py decides on bulk by the lake).
            new = [m.compiled.table.source for m in group if m.state.version is None]
            summaries = _outcome(_summaries, events, new)
            if isinstance(summaries, Exception):
                return {m.compiled.table.name: summaries for m in group}
            items = [
                Due(m.compiled, m.state,
                    events.where(F.col(TOPIC) == m.compiled.table.source).drop(TOPIC), m.ends,
                    summaries.get(m.compiled.table.source, summary_of({})), events)
                for m in group
            ]  # fmt: skip
            return apply_many(spark, items, now, registry, rewrite_below)
        finally:
            unpin(events)


def _summaries(events: DataFrame, new: list[str]) -> dict[str, Summary]:
    """Each source topic's Summary, in one job (a topic with no row in range: none, as
    apply.py's _summary of no rows); the upserts' distinct keys of the `new` tables'
    topics in a second, if any."""
    rows = events.groupBy(TOPIC).agg(*summary_columns()).collect()
    keys: dict[str, int] = {}
    if new:
        counted = upsert_keys(events.where(one_of(TOPIC, new))).groupBy(TOPIC)
        keys = {r[TOPIC]: r[1] for r in counted.agg(F.count_distinct("__H")).collect()}
    return {row[TOPIC]: summary_of(row.asDict(), keys.get(row[TOPIC], -1)) for row in rows}


def _outcome(call: Callable[..., T], *args: object) -> T | Exception:
    try:
        return call(*args)
    except Exception as exc:  # py4j, Spark and Delta errors alike: this table's
        return exc
