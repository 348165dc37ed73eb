"""What `txn` rules yield: their SQL (group_sql.py), run once over the events of the
groups that completed in a pass (gate.py decides which did). A group's outputs take its
position (its completing event, or Debezium's END record) in the pass's numbering, and
follow each other by key, then value."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from zync_assets.core.errors import ZyncError
from zync_assets.core.events import EVENT_FIELDS
from zync_assets.core.variants import as_variant
from zync_assets.etl.compile import CompiledRule
from zync_assets.etl.gate import TXN, TXN_POS
from zync_assets.etl.group_sql import group_value, run_sql
from zync_assets.spark.session import pinned, union_all, unpin


@dataclass(frozen=True)
class GroupOutputs:
    """The outputs of a pass's `txn` rules (pinned: counted, then written), and how many
    each output topic gets."""

    frame: DataFrame  # __topic, rule, key, value, __pos, __src, __tie, TXN
    per_topic: dict[str, int]
    kept: DataFrame  # the pinned frame it is read from

    def release(self) -> None:
        unpin(self.kept)


def group_outputs(
    classified: DataFrame, rules: list[CompiledRule], spec_path: object
) -> GroupOutputs | None:
    """Run each `txn` rule's SQL over its complete groups; one job counts the outputs and
    checks that each names a group of the rule and one of its topics."""
    parts = [_rule_outputs(classified, r) for r in rules if r.rule.type == "txn"]
    if not parts:
        return None
    frame = pinned(union_all(parts))
    try:
        per_topic = _count(frame, rules, spec_path)
    except BaseException:
        unpin(frame)
        raise
    return GroupOutputs(frame.drop("__lost"), per_topic, frame)


def _count(frame: DataFrame, rules: list[CompiledRule], spec_path: object) -> dict[str, int]:
    per_topic: dict[str, int] = {}
    for row in frame.groupBy("rule", "__topic", "__lost").count().collect():
        rule = next(r for r in rules if r.number == row["rule"])
        where = f"{spec_path}: transforms[{rule.number}] sql"
        if row["__lost"]:
            raise ZyncError(
                f"{where}: yielded {row['count']} row(s) whose `txn` is not one of the complete "
                "groups it was given: yield each row's group as `txn`"
            )
        if row["__topic"] not in rule.rule.output_topics:
            raise ZyncError(
                f"{where}: yielded topic {row['__topic']!r}, not one of its `out` topics "
                f"({', '.join(rule.rule.output_topics)})"
            )
        per_topic[row["__topic"]] = per_topic.get(row["__topic"], 0) + row["count"]
    return per_topic


def _rule_outputs(classified: DataFrame, rule: CompiledRule) -> DataFrame:
    members = classified.where((F.col("__rule") == rule.number) & (F.col("__status") == "released"))
    events = members.select(group_value(rule.rule).alias("txn"), *EVENT_FIELDS)
    at = F.coalesce(TXN_POS, "__pos")
    groups = members.select(
        group_value(rule.rule).cast("string").alias("__group"),
        at.alias("__pos"),
        F.struct(
            *(at[f].alias(f) for f in ("topic", "partition", "offset")), at.ts.alias("timestamp")
        ).alias("__src"),
        F.coalesce(TXN, F.concat(F.lit("\u0000"), group_value(rule.rule))).alias(TXN),
    ).dropDuplicates(["__group"])
    yielded = run_sql(events, rule.rule)
    topic = F.col("topic") if "topic" in yielded.columns else F.lit(rule.rule.out)
    found = yielded.select(
        F.col("txn").cast("string").alias("__group"),
        topic.cast("string").alias("__topic"),
        as_variant(yielded, "key").alias("key"),
        as_variant(yielded, "value").alias("value"),
    ).join(groups, "__group", "left")
    return found.select(
        "__topic",
        F.lit(rule.number).alias("rule"),
        "key",
        "value",
        "__pos",
        "__src",
        F.concat_ws("\u0000", F.to_json("key"), F.to_json("value")).alias("__tie"),
        TXN,
        F.col("__pos").isNull().alias("__lost"),
    )
