"""What `view` rules yield: the difference between their SQL over their inputs' current
rows and what they last sent.

A view's SQL reads each input (by the name its rule gives it) as a table of the source
table's current rows, one row per Kafka key:

    key      VARIANT   the row's Kafka key (the source table's primary key)
    after    VARIANT   the row as its latest change left it (`after:id::bigint`)

and yields the view's columns; the rule's `key` names the ones that key its rows. Its
output topic is an upsert stream: a row that is new or changed is sent with its key and
value, a row that is gone is sent as a tombstone (a NULL value). So the table an upserting
sink builds from it equals the SQL over the source tables as of the end of the pass
(with `gate: transaction`, at a source transaction boundary).

Each change sets its row: a create, snapshot read or update to its `after`, a delete or
a tombstone to nothing; a truncate deletes every row of its table before it; a record
without an envelope (no `op`) is the row itself. Within a pass the latest change of a
key wins. The state lives in the staging pool, committed with the pass's outputs and
done records (kind `view`, `status` the view's output topic): one row per key a pass
changed, its `value` the row (NULL: deleted). What the view last sent is its own
output records. A re-sent change sets a row to what it already is: no output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from zync_assets.core.debezium import is_unavailable
from zync_assets.core.errors import ZyncError
from zync_assets.core.staging_rows import KIND, OUTPUT, VIEW, of_kind
from zync_assets.etl.classify import COORDS, WAITING_STATES, coords, position
from zync_assets.etl.compile import CompiledRule
from zync_assets.etl.gate import TXN, TXN_POS
from zync_assets.etl.records import SOURCE_TYPE
from zync_assets.etl.view_joins import JoinGraph, join_graph
from zync_assets.etl.view_reach import Inputs, reached_rows
from zync_assets.etl.view_sql import empty_rows, view_sql
from zync_assets.etl.view_state import committed_versions, newest, row_id
from zync_assets.lake.pools import pool_exists
from zync_assets.spark.session import one_of, pinned, union_all, unpin


@dataclass(frozen=True)
class ViewOutputs:
    """The outputs of a pass's view rules and the row versions to commit with them
    (both pinned: counted, then written), and how many outputs each topic gets."""

    frame: DataFrame  # __topic, rule, key, value, __pos, __src, __tie, TXN
    state: DataFrame  # the staging pool's layout, kind `view`
    per_topic: dict[str, int]
    kept: list[DataFrame]

    def release(self) -> None:
        _release(self.kept)


def row_image() -> Column:
    """The row a change leaves (NULL: none). Truncates are handled apart (`_versions`)."""
    return (
        F.when(F.col("value").isNull(), F.lit(None).cast("variant"))
        .when(F.col("op").isin("c", "r", "u"), F.col("after"))
        .when(F.col("op").isNull(), F.col("value"))  # no envelope: the record is the row
        .otherwise(F.lit(None).cast("variant"))
    )


History = Callable[[tuple[str, ...]], DataFrame]  # topics -> all their raw events
Held = Callable[[tuple[str, ...]], int]  # topics -> at most how many rows a view holds

# A view that holds at most this many row versions is evaluated whole at each pass (its
# SQL over every current row, the difference against all it sent) rather than over the
# rows its changes reach (view_reach): the search is 21-25 Spark jobs more than the whole
# view's 12-15, which on a small view cost more than the rows they spare. One change over
# 1,000 / 20,000 / 100,000 rows held: whole / search 0.80 / 0.82 / 1.11
# (bench/view_path_bench.py).
WHOLE_VIEW_ROWS = 20_000


def view_outputs(
    spark: SparkSession, classified: DataFrame, rules: list[CompiledRule], run: int, path: str,
    spec_path: object, rebuild: frozenset[str] = frozenset(), history: History | None = None,
    held: Held | None = None,
) -> ViewOutputs | None:  # fmt: skip
    """Run each view rule over this pass's changes of its inputs; None: no view rule.
    A view in `rebuild` (its output topic) is made again from `history`: every event of
    its inputs in the raw pools but those still pending; its rows from before go.
    `held`: at most how many rows a view over the topics holds (None: not known), which
    decides whether it is evaluated whole (WHOLE_VIEW_ROWS)."""
    views = [r for r in rules if r.rule.type == "view"]
    if not views:
        return None
    previous = _staging(spark, path)
    taken = [v.number for v in views]
    outputs, states, kept = [], [], list[DataFrame]()
    try:
        for rule in views:
            if rule.rule.out in rebuild:
                assert history is not None
                changes = pinned(_rebuilt_changes(history(rule.topics), classified))
            else:
                changes = pinned(_changes(classified, rule, taken))
            kept.append(changes)
            small = held is not None and held(rule.topics) <= WHOLE_VIEW_ROWS
            made = _one_view(spark, rule, changes, previous, rule.rule.out in rebuild, run,
                             spec_path, kept, small)  # fmt: skip
            if made is not None:
                outputs.append(made[0])
                states.append(made[1])
        if not outputs:
            _release(kept)
            return None
        frame = pinned(union_all(outputs))
        kept.append(frame)
        per_topic = {
            row["__topic"]: row["count"] for row in frame.groupBy("__topic").count().collect()
        }
    except BaseException:
        _release(kept)
        raise
    return ViewOutputs(frame, union_all(states), per_topic, kept)


def _one_view(
    spark: SparkSession, rule: CompiledRule, changes: DataFrame, previous: DataFrame | None,
    again: bool, run: int, spec_path: object, kept: list[DataFrame], small: bool = False,
) -> tuple[DataFrame, DataFrame] | None:  # fmt: skip
    """One view's outputs and row versions for this pass (None: no change of its inputs);
    `again`: rebuilt from `changes` alone, its rows from before dropped; `small`: the
    view is evaluated whole, not over the rows its changes reach. The frames it pins go
    to `kept`."""
    truncated = _tally(changes, rule, spec_path)
    if truncated is None and not again:
        return None
    pin = _pinner(kept)
    if not again and not truncated and not small and previous is not None:
        graph = _join_graph(spark, rule)
        if graph is not None:
            return _reached_view(spark, rule, graph, changes, previous, run, spec_path, pin)
    # The whole view: its SQL over every current row (the committed rows read once).
    held = None if previous is None else pin(_current_rows_before(previous, rule))
    before = None if again else held
    versions = _versions(changes, before, bool(truncated), rule, run)
    if again and held is not None:
        versions = versions.unionByName(_dropped(held, versions, rule, run))
    state = pin(versions)
    yielded = pin(_evaluate(spark, _current_rows(before, state), rule))
    _check_keys(yielded, rule, spec_path)
    diff = _difference(yielded, _last_sent(previous, rule))
    return _as_outputs(diff, changes, rule, run), state


def _reached_view(
    spark: SparkSession, rule: CompiledRule, graph: JoinGraph, changes: DataFrame,
    previous: DataFrame, run: int, spec_path: object, pin: Callable[[DataFrame], DataFrame],
) -> tuple[DataFrame, DataFrame]:  # fmt: skip
    """A view of equi-joins: its SQL over only the rows the changes reach (view_reach),
    as they were and as they are; what differs from what it sent goes out."""
    # Read once: the search below looks rows up in it several times.
    committed = pin(
        committed_versions(previous, rule).select("kafka", "key", "value", "run", "__topic", "__id")
    )
    ids = changes.where(F.col("key").isNotNull()).select(
        F.col("kafka.topic").alias("__topic"), row_id().alias("__id")
    )
    held = pin(newest(committed, ids))  # the changed rows as committed
    state = pin(_versions(changes, held, False, rule, run))
    changed = pin(
        state.select(F.col("kafka.topic").alias("__topic"), row_id().alias("__id"), "key",
                     F.col("value").alias("__new"))
        .join(held.select("__topic", "__id", F.col("value").alias("__old")),
              ["__topic", "__id"], "left")
    )  # fmt: skip
    reached = reached_rows(Inputs(graph, _topics(graph, rule), committed, changed, pin))

    def evaluated(image: str) -> DataFrame:
        rows = reached.where(F.col(image).isNotNull())
        return _evaluate(spark, rows.select("__topic", "key", F.col(image).alias("value")), rule)

    was, now = evaluated("__old"), pin(evaluated("__new"))
    _check_keys(now, rule, spec_path)
    keys = was.select("__key").union(now.select("__key"))
    diff = _difference(now, _last_sent(previous, rule, keys))
    return _as_outputs(diff, changes, rule, run), state


# Per process, by SQL and inputs: a long-lived pipeline analyses each view's joins once.
_GRAPHS: dict[tuple[str, tuple[tuple[str, str], ...]], JoinGraph | None] = {}


def _join_graph(spark: SparkSession, rule: CompiledRule) -> JoinGraph | None:
    """The view's joins (view_joins), if Spark reads each join's two sides as the same
    types (else its own coercion could match what a lookup by value would not)."""
    known = (rule.rule.sql, rule.rule.relations)
    if known not in _GRAPHS:
        graph = join_graph(rule.rule.sql, [name for name, _ in rule.rule.relations])
        _GRAPHS[known] = graph if graph is not None and _same_types(spark, graph, rule) else None
    return _GRAPHS[known]


def _topics(graph: JoinGraph, rule: CompiledRule) -> dict[str, str]:
    """Each input's topic by the name the SQL reads it under."""
    relations = dict(rule.rule.relations)
    return {name: relations[table] for name, table in graph.tables}


def _same_types(spark: SparkSession, graph: JoinGraph, rule: CompiledRule) -> bool:
    empty = empty_rows(spark, rule.rule)
    topics = _topics(graph, rule)

    def types(name: str, expressions: tuple[str, ...]) -> list[object]:
        frame = empty[topics[name]].alias(name).select(*(F.expr(e) for e in expressions))
        return [field.dataType for field in frame.schema]

    try:
        return all(
            types(e.left, e.left_values) == types(e.right, e.right_values) for e in graph.edges
        )
    except PySparkException:  # not Spark's SQL after all: evaluate the view whole
        return False


def _pinner(kept: list[DataFrame]) -> Callable[[DataFrame], DataFrame]:
    def pin(frame: DataFrame) -> DataFrame:
        kept.append(pinned(frame))
        return kept[-1]

    return pin


def _release(kept: list[DataFrame]) -> None:
    for each in kept:
        unpin(each)


def _tally(changes: DataFrame, rule: CompiledRule, spec_path: object) -> bool | None:
    """Whether the pass truncates an input of the view; None: it changes none of them.
    A change without a Kafka key has no row to set: the pass stops, naming it."""
    rows = (
        changes.groupBy("__truncate", F.col("key").isNull().alias("__keyless"))
        .agg(F.count("*").alias("n"), F.min(F.struct("kafka")).alias("first"))
        .collect()
    )
    for row in rows:
        if row["__keyless"] and not row["__truncate"]:
            where = row["first"]["kafka"]
            raise ZyncError(
                f"{spec_path}: transforms[{rule.number}]: {row['n']} change(s) of view input "
                f"{where['topic']} have no Kafka key (first: partition {where['partition']} "
                f"offset {where['offset']}); a view keeps rows by their key: give the source "
                "table a primary key (or a message key), or read the topic with another rule"
            )
    if not rows:
        return None
    return any(row["__truncate"] for row in rows)


def _staging(spark: SparkSession, path: str) -> DataFrame | None:
    return spark.read.format("delta").load(path) if pool_exists(path) else None


def _changes(classified: DataFrame, rule: CompiledRule, views: list[int]) -> DataFrame:
    """The pass's changes of the view's inputs, with their row image and source order.
    Views may share inputs: an event is routed to the first of them, and each reads it."""
    taken = classified.where(
        one_of("kafka.topic", rule.topics)
        & F.col("__rule").isin(views)
        & (F.col("__status") == "released")
    )
    return taken.select(
        "kafka",
        "key",
        row_image().alias("__row"),
        (F.col("op") == "t").alias("__truncate"),
        F.coalesce(TXN_POS, "__pos").alias("__at"),  # a transaction's: its END's
        F.col("__pos"),
    )


def _rebuilt_changes(events: DataFrame, classified: DataFrame) -> DataFrame:
    """All events of a view's inputs as changes, but those this pass leaves pending."""
    pending = classified.where(F.col("__status").isin(*WAITING_STATES)).select(*coords())
    keep = events.select("*", *coords()).join(pending, [f"__{c}" for c in COORDS], "left_anti")
    return keep.select(
        "kafka",
        "key",
        row_image().alias("__row"),
        (F.col("op") == "t").alias("__truncate"),
        position().alias("__at"),
        position().alias("__pos"),
    )


def _dropped(held: DataFrame, rebuilt: DataFrame, rule: CompiledRule, run: int) -> DataFrame:
    """A delete of each row the view held (`_current_rows_before`) that its rebuild does
    not hold."""
    held = held.where(F.col("value").isNotNull())
    again = rebuilt.select(F.col("kafka.topic").alias("__topic"), row_id().alias("__again"))
    gone = held.join(
        again, (F.col("kafka.topic") == F.col("__topic")) & (F.col("__id") == F.col("__again")),
        "left_anti",
    )  # fmt: skip
    return gone.select(
        F.lit(VIEW).alias(KIND), "kafka", "key", F.lit(None).cast("variant").alias("value"),
        F.lit(rule.rule.out).alias("status"), F.lit(rule.number).cast("int").alias("rule"),
        F.lit(run).cast("long").alias("run"), F.lit(None).cast(SOURCE_TYPE).alias("source"),
    )  # fmt: skip


def _versions(
    changes: DataFrame, held: DataFrame | None, truncated: bool, rule: CompiledRule, run: int
) -> DataFrame:
    """The row versions this pass commits: per key the latest change's row, and a delete
    for each row a later truncate of its table removed; `held`: the committed rows."""
    last = _latest(changes.where(~F.col("__truncate")), held)
    truncates = (
        changes.where(F.col("__truncate"))
        .groupBy(F.col("kafka.topic").alias("__topic"))
        .agg(F.max(F.struct("__pos", "kafka")).alias("__t"))
        .select(
            "__topic", F.col("__t.__pos").alias("__t_pos"), F.col("__t.kafka").alias("__t_kafka")
        )
    )
    kept = last.join(truncates, F.col("kafka.topic") == F.col("__topic"), "left")
    survives = F.col("__t_pos").isNull() | (F.col("__pos") > F.col("__t_pos"))
    versions = kept.select(
        F.when(survives, F.col("kafka")).otherwise(F.col("__t_kafka")).alias("kafka"),
        "key",
        F.when(survives, F.col("__row")).alias("value"),
    )
    if truncated and held is not None:  # earlier rows a truncate removed, unless set again
        earlier = held.select("kafka.topic", "key", "__id")
        gone = (
            earlier.join(truncates, F.col("topic") == F.col("__topic"))
            .join(
                last.select(F.col("kafka.topic").alias("topic"), "__id"),
                ["topic", "__id"],
                "left_anti",
            )
            .select(
                F.col("__t_kafka").alias("kafka"), "key", F.lit(None).cast("variant").alias("value")
            )
        )
        versions = versions.unionByName(gone)
    return versions.select(
        F.lit(VIEW).alias(KIND),
        "kafka",
        "key",
        "value",
        F.lit(rule.rule.out).alias("status"),
        F.lit(rule.number).cast("int").alias("rule"),
        F.lit(run).cast("long").alias("run"),
        F.lit(None).cast(SOURCE_TYPE).alias("source"),
    )


ROW_FIELDS = "map<string, variant>"


def _latest(keyed: DataFrame, held: DataFrame | None) -> DataFrame:
    """Per key, its latest change in the pass: kafka, key, __id, __row, __pos. A column the
    change left out (Debezium's TOAST placeholder: unchanged, not sent) takes its value
    from the key's newest earlier change that carried it, in this pass or before."""
    changes = F.array_sort(
        F.collect_list(F.struct("__pos", "kafka", "key", "__row")),
        lambda a, b: (
            F.when(a["__pos"] < b["__pos"], -1).when(a["__pos"] > b["__pos"], 1).otherwise(0)
        ),
    )
    grouped = (
        keyed.withColumn("__id", row_id())
        .groupBy(F.col("kafka.topic").alias("__topic"), "__id")
        .agg(changes.alias("__changes"))
    )
    start = F.lit(None).cast(ROW_FIELDS)
    if held is not None:
        committed = held.select(
            F.col("kafka.topic").alias("__topic"), "__id", _fields(F.col("value")).alias("__before")
        )
        grouped = grouped.join(committed, ["__topic", "__id"], "left")
        start = F.col("__before")
    filled = F.aggregate("__changes", start, lambda known, c: _filled(c["__row"], known))
    last = F.element_at("__changes", -1)
    left_out = F.exists(F.map_values(_fields(last["__row"])), lambda v: is_unavailable(v, "$"))
    return grouped.select(
        last["kafka"].alias("kafka"),
        last["key"].alias("key"),
        "__id",
        F.when(F.coalesce(left_out, F.lit(False)), F.to_variant_object(filled))
        .otherwise(last["__row"])
        .alias("__row"),
        last["__pos"].alias("__pos"),
    )


def _fields(row: Column) -> Column:
    return F.try_variant_get(row, "$", ROW_FIELDS)


def _filled(row: Column, known: Column) -> Column:
    """A row's fields, each placeholder replaced by the value in `known` (if any)."""
    fields = F.transform_values(
        _fields(row),
        lambda name, v: F.when(
            is_unavailable(v, "$") & known[name].isNotNull(), known[name]
        ).otherwise(v),
    )
    return F.when(row.isNull(), F.lit(None).cast(ROW_FIELDS)).otherwise(fields)


def _current_rows_before(previous: DataFrame, rule: CompiledRule) -> DataFrame:
    """Each input row of the view as the committed passes left it (deleted rows too)."""
    return newest(committed_versions(previous, rule)).drop("__topic")


def _current_rows(held: DataFrame | None, state: DataFrame) -> DataFrame:
    """Each input's current rows after this pass: kafka.topic, key, value (not NULL)."""
    now = state.select("kafka", "key", "value", row_id().alias("__id"))
    if held is not None:
        before = held.select("kafka", "key", "value", "__id")
        changed = now.select(F.col("kafka.topic").alias("__topic"), F.col("__id").alias("__now"))
        untouched = before.join(
            changed,
            (F.col("kafka.topic") == F.col("__topic")) & (F.col("__id") == F.col("__now")),
            "left_anti",
        )
        now = untouched.unionByName(now)
    return now.where(F.col("value").isNotNull()).withColumn("__topic", F.col("kafka.topic"))


def _evaluate(spark: SparkSession, current: DataFrame, rule: CompiledRule) -> DataFrame:
    """The rule's SQL over `current` (`__topic`, `key`, `value`): `__key` and `__value`
    (JSON of the key and of the whole row, to compare) besides `key` and `value`."""
    rows = {
        topic: current.where(F.col("__topic") == topic).select("key", F.col("value").alias("after"))
        for _, topic in rule.rule.relations
    }
    yielded = view_sql(spark, rows, rule.rule)
    columns = yielded.columns  # compile_rules checked that the key is among them
    key = F.struct(*(F.col(c) for c in rule.rule.key))
    value = F.struct(*(F.col(f"`{c}`") for c in columns))
    return yielded.select(
        F.to_variant_object(key).alias("key"), F.to_variant_object(value).alias("value")
    ).select("key", "value", row_id().alias("__key"), F.to_json("value").alias("__value"))


def _check_keys(yielded: DataFrame, rule: CompiledRule, spec_path: object) -> None:
    twice = yielded.groupBy("__key").count().where(F.col("count") > 1).limit(1).collect()
    if twice:
        raise ZyncError(
            f"{spec_path}: transforms[{rule.number}] key: the view yields {twice[0]['count']} "
            f"rows with key {twice[0]['__key']}; its key ({', '.join(rule.rule.key)}) must name "
            "one row: add the columns that tell them apart (e.g. each joined table's key)"
        )


def _last_sent(
    previous: DataFrame | None, rule: CompiledRule, keys: DataFrame | None = None
) -> DataFrame | None:
    """The view's rows as its output records left them: per key the latest, unless a
    tombstone; `keys` (`__key`): of those keys only, looked up first."""
    if previous is None:
        return None
    mine = previous.where(of_kind(OUTPUT) & (F.col("kafka.topic") == rule.rule.out))
    mine = mine.select(
        "key", "value", row_id().alias("__key"), F.col("kafka.offset").alias("__offset")
    )
    if keys is not None:
        mine = mine.join(F.broadcast(keys.distinct()), "__key", "left_semi")
    newest_first = Window.partitionBy("__key").orderBy(F.col("__offset").desc())
    return (
        mine.withColumn("__n", F.row_number().over(newest_first))
        .where((F.col("__n") == 1) & F.col("value").isNotNull())
        .select("key", "__key", F.to_json("value").alias("__value"))
    )


def _difference(yielded: DataFrame, sent: DataFrame | None) -> DataFrame:
    """Upserts of new or changed rows, tombstones of rows gone: key, value."""
    if sent is None:
        return yielded.select("key", "value", "__key")
    old = sent.select(
        F.col("key").alias("__old_key"), "__key", F.col("__value").alias("__old_value")
    )
    both = yielded.join(old, "__key", "full_outer")
    changed = (
        F.col("__value").isNull()
        | F.col("__old_value").isNull()
        | (F.col("__value") != F.col("__old_value"))
    )
    return both.where(changed).select(
        F.coalesce("key", "__old_key").alias("key"), F.col("value"), "__key"
    )


def _as_outputs(diff: DataFrame, changes: DataFrame, rule: CompiledRule, run: int) -> DataFrame:
    """The difference as output records of the pass: all at the position of its last
    change, in key order, and one unit for to-kafka (one Kafka transaction): the view as
    of the pass's end, never half of the way there."""
    last = changes.agg(F.max(F.struct("__at", "kafka")).alias("__last"))
    at = F.col("__last.__at")
    src = F.col("__last.kafka")
    return diff.crossJoin(last).select(
        F.lit(rule.rule.out).alias("__topic"),
        F.lit(rule.number).alias("rule"),
        "key",
        "value",
        at.alias("__pos"),
        F.struct(
            src.topic.alias("topic"), src.partition.alias("partition"),
            src.offset.alias("offset"), src.timestamp.alias("timestamp"),
        ).alias("__src"),
        F.col("__key").alias("__tie"),
        F.lit(f"view {rule.rule.out}\u0000run {run}").alias(TXN),
    )  # fmt: skip
