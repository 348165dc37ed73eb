"""A truncate of a mirrored table: a tombstone for each of its rows the mirror has sent.

A sink that upserts row by row (Debezium's JDBC sink) has no record for "every row is
gone": the mirror rule (specs/mirror.py) forwards row changes only, and Debezium's
truncate event (`op: t`, no key, no row) is no row change. So for each truncate on a
topic a mirror takes, this sends what the sink understands: a tombstone for every key
whose newest event before the truncate (and after the truncate before it, if any) made
a row. The keys come from the topic's whole history in the raw pool (snapshot.history),
so they are exact however many passes ago their rows were sent. The tombstones take the
truncate's place in the output order, and its source transaction.

A tombstone carries the source's message key, as the mirror's default SQL does; a
mirror whose SQL makes another key would need its tombstones made the same way, and is
refused a truncate here with a line that says so (etl/run.py reports it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from zync_assets.core.errors import ZyncError
from zync_assets.core.variants import as_variant
from zync_assets.etl.classify import Tally
from zync_assets.etl.compile import CompiledRule
from zync_assets.etl.gate import TXN, TXN_POS
from zync_assets.spark.session import looked_up, one_of
from zync_assets.specs.rules import MIRROR_SQL

History = Callable[[tuple[str, ...]], DataFrame]


@dataclass(frozen=True)
class TruncateOutputs:
    frame: DataFrame  # __topic, rule, key, value, __pos, __src, __tie, TXN
    per_topic: dict[str, int]

    def release(self) -> None:
        """Nothing is pinned: the frame is small and read once."""


def truncate_tombstones(
    classified: DataFrame, rules: list[CompiledRule], history: History, tally: list[Tally]
) -> TruncateOutputs | None:
    """The tombstones of this pass's truncates of mirrored topics (None: there are none).
    A truncate matches no rule (a mirror's `where` leaves it out): without such an event
    on a mirrored topic in the pass's `tally`, no Spark job looks for one."""
    mirrors = [r for r in rules if r.rule.type == "mirror" and r.rule.mirrored]
    out_of = {t: (r, out) for r in mirrors for t, out in r.rule.mirrored}
    if not any(row.status == "unmatched" and row.topic in out_of for row in tally):
        return None
    cuts = classified.where(
        one_of("kafka.topic", out_of) & (F.col("op") == "t")
    ).select(
        F.col("kafka").alias("__src"), F.coalesce(TXN_POS, "__pos").alias("__pos"), TXN
    )  # fmt: skip
    found = cuts.select("__src.topic").distinct().collect()
    if not found:
        return None
    topics = tuple(sorted(row["topic"] for row in found))
    for topic in topics:
        if out_of[topic][0].rule.sql != MIRROR_SQL:
            raise ZyncError(
                f"topic {topic} was truncated, and mirror rule {out_of[topic][0].number} "
                "makes its own keys (sql:), so zync cannot tell which rows the truncate "
                "removed: use the mirror's default sql for truncated tables"
            )
    frame = _tombstones(cuts, history(topics), out_of)
    per_topic = {r["__topic"]: r["count"] for r in frame.groupBy("__topic").count().collect()}
    return TruncateOutputs(frame, per_topic)


def _before(event: str, cut: str) -> Column:
    """Event `event` came before the truncate `cut`: earlier in its partition, or earlier in
    time in another."""
    same = F.col(f"{event}.partition") == F.col(f"{cut}.partition")
    return F.when(same, F.col(f"{event}.offset") < F.col(f"{cut}.offset")).otherwise(
        F.col(f"{event}.timestamp") < F.col(f"{cut}.timestamp")
    )


def _tombstones(
    cuts: DataFrame, events: DataFrame, out_of: dict[str, tuple[CompiledRule, str]]
) -> DataFrame:
    before = events.select("kafka", "key", "op").join(
        cuts, (F.col("kafka.topic") == F.col("__src.topic")) & _before("kafka", "__src")
    )
    # The truncate before this one, if any: what it removed is not this one's.
    earlier = (
        before.where(F.col("op") == "t")
        .groupBy("__src")
        .agg(F.max(F.struct("kafka.timestamp", "kafka.partition", "kafka.offset")).alias("__last"))
    )
    rows = before.where(F.col("op") != "t").join(earlier, "__src", "left")
    after_last = F.col("__last").isNull() | (
        F.struct("kafka.timestamp", "kafka.partition", "kafka.offset") > F.col("__last")
    )
    newest = Window.partitionBy("__src", F.to_json("key")).orderBy(
        F.col("kafka.timestamp").desc(), F.col("kafka.offset").desc()
    )
    live = (
        rows.where(after_last & F.col("key").isNotNull())
        .withColumn("__n", F.row_number().over(newest))
        .where((F.col("__n") == 1) & F.col("op").isin("c", "r", "u"))
    )
    source = F.col("__src.topic")
    rule_of = looked_up({t: r.number for t, (r, _) in out_of.items()}, source, F.lit(None))
    topic_of = looked_up({t: out for t, (_, out) in out_of.items()}, source, F.lit(None))
    return live.select(
        topic_of.alias("__topic"),
        rule_of.alias("rule"),
        as_variant(live, "key").alias("key"),
        F.lit(None).cast("variant").alias("value"),
        "__pos",
        "__src",
        TXN,
        F.to_json("key").alias("__tie"),  # one truncate's tombstones: in key order
    )
