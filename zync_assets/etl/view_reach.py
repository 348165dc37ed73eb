"""The input rows a pass's changes reach through a view's joins (view_joins.JoinGraph).

Evaluating the view's SQL over these rows alone, once as they were and once as they
are, yields every output row the changes can alter, whole, and no row that is wrong:

- every output row built from a changed row is built from reached rows only: from each
  changed row the search follows every join to the rows with equal values, and from
  each row it reaches, every other join (a join tree: it only moves away);
- a reached row on the kept side of an outer join has all of its partners reached, so
  it is never padded with NULLs it should not have: the search also takes, along that
  join, every row with the same values as the rows it came from.

Rows reached on the inner side of a join may miss partners; that only leaves out
output rows no change touched, which stay as they were sent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from zync_assets.etl.view_joins import JoinGraph
from zync_assets.etl.view_state import newest
from zync_assets.spark.session import union_all

IMAGES = ["__topic", "__id", "key", "__old", "__new"]  # a reached row: before and after
CHANGED = -1  # `__via` of the changed rows themselves


@dataclass(frozen=True)
class Inputs:
    """What the search reads: the view's inputs, its committed row versions
    (view_state.committed_versions) and this pass's changed rows (IMAGES)."""

    graph: JoinGraph
    topics: dict[str, str]  # input name in the SQL -> topic
    committed: DataFrame
    changed: DataFrame
    pin: Callable[[DataFrame], DataFrame]


def reached_rows(inputs: Inputs) -> DataFrame:
    """Every row the changes reach (IMAGES; `__old`/`__new` NULL: no such row then)."""
    graph, topics, pin = inputs.graph, inputs.topics, inputs.pin
    frontier = inputs.changed.withColumn("__via", F.lit(CHANGED))
    seen = [frontier]
    ways = [(i, e, s) for i, e in enumerate(graph.edges) for s in (e.left, e.right)]
    possible = {(name, CHANGED) for name, _ in graph.tables}  # (input, __via) it may hold
    while any(_leads_on(possible, i, s) for i, _, s in ways):
        present = {(r["__topic"], r["__via"]) for r in frontier.select("__topic", "__via").distinct().collect()}  # fmt: skip
        found = {(name, via) for name, _ in graph.tables for t, via in present if t == topics[name]}
        pulled, possible = [], set()
        for index, edge, source in ways:
            if not _leads_on(found, index, source):
                continue  # no row here that came by another way: nothing new this way
            rows = frontier.where((F.col("__topic") == topics[source]) & (F.col("__via") != index))
            values = _values_of_images(rows, source, edge.values(source))
            target = edge.other(source)
            if target in edge.preserved:  # read twice below
                values = pin(values)
            pulled.append(_matching(inputs, target, edge.values(target), values, index))
            possible.add((target, index))
            if target in edge.preserved:  # its rows must see all their partners
                pulled.append(_matching(inputs, source, edge.values(source), values, index))
                possible.add((source, index))
        if not pulled:
            break
        known = union_all(seen).select("__topic", "__id", "__via")
        frontier = pin(union_all(pulled).join(known, ["__topic", "__id", "__via"], "left_anti"))
        seen.append(frontier)
    return union_all(seen).dropDuplicates(["__topic", "__id"]).select(*IMAGES)


def _leads_on(held: set[tuple[str, int]], index: int, source: str) -> bool:
    """Whether rows of input `source` that came by a way other than join `index` may be
    among `held` ((input, __via) pairs): only such rows are followed along that join."""
    return any(name == source and via != index for name, via in held)


def _values(frame: DataFrame, name: str, image: str, expressions: tuple[str, ...]) -> DataFrame:
    """`__id` and `__v` (the join's values of the row in `image`), where none is NULL
    (NULL equals nothing)."""
    rows = frame.select("__id", "key", F.col(image).alias("after")).alias(name)
    parts = [F.expr(e) for e in expressions]
    known = F.lit(True)
    for part in parts:
        known = known & part.isNotNull()
    return rows.where(known).select(
        "__id", F.struct(*(p.alias(f"v{i}") for i, p in enumerate(parts))).alias("__v")
    )


def _values_of_images(rows: DataFrame, name: str, expressions: tuple[str, ...]) -> DataFrame:
    """The join's values of reached rows, before and after: `__v`, distinct."""
    before = _values(rows, name, "__old", expressions).select("__v")
    after = _values(rows, name, "__new", expressions).select("__v")
    return before.union(after).distinct()


def _matching(
    inputs: Inputs, name: str, expressions: tuple[str, ...], values: DataFrame, via: int
) -> DataFrame:  # fmt: skip
    """The rows of input `name` whose join values were or are among `values` (IMAGES,
    and `__via`)."""
    topic = inputs.topics[name]
    wanted = F.broadcast(values)
    stored = inputs.committed.where(F.col("__topic") == topic).withColumnRenamed("value", "__old")
    # A stored version may match though the row has changed since: take the candidates'
    # current versions and ask again.
    candidates = _values(stored, name, "__old", expressions).join(wanted, "__v", "left_semi")
    ids = candidates.select(F.lit(topic).alias("__topic"), "__id")
    current = newest(stored, ids)
    still = _values(current, name, "__old", expressions).join(wanted, "__v", "left_semi")
    changed = inputs.changed.where(F.col("__topic") == topic)
    unchanged = (
        current.join(still, "__id", "left_semi")
        .join(changed.select("__id"), "__id", "left_anti")
        .select("__topic", "__id", "key", "__old", F.col("__old").alias("__new"))
    )
    hit = union_all([
        _values(changed, name, image, expressions).join(wanted, "__v", "left_semi").select("__id")
        for image in ("__old", "__new")
    ])  # fmt: skip
    return unchanged.unionByName(changed.join(hit, "__id", "left_semi")).withColumn(
        "__via", F.lit(via)
    )
