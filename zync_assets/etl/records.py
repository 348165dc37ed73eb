"""The records one ETL pass writes to its staging pool: output records, numbered densely
per output topic in source order (order.py), and one done record per consumed event."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from zync_assets.core.events import event_struct
from zync_assets.core.staging_rows import DONE, KIND, OUTPUT
from zync_assets.core.variants import as_variant
from zync_assets.etl import classify as cl
from zync_assets.etl.compile import CompiledRule, select_outputs
from zync_assets.etl.gate import TXN, TXN_POS
from zync_assets.etl.order import moved_outputs, output_offset, with_effective_position
from zync_assets.spark.session import looked_up, union_all
from zync_assets.specs.rules import MIRROR_SQL

SOURCE_TYPE = "struct<topic: string, partition: int, offset: bigint>"

# classification status -> the done record's status; the statuses that consume an event
DONE_STATUS = {
    "paired": "done",
    "released": "done",
    "unmatched": "unmatched",
    "expired": "expired",
}


def output_records(
    classified: DataFrame, pairs: list[cl.Pairs], rules: list[CompiledRule], run: int,
    next_offsets: dict[str, int], yielded: list[DataFrame] | None = None,
    mirrored: Callable[[DataFrame], DataFrame] = lambda rows: rows,
) -> DataFrame | None:  # fmt: skip
    """Output records of this pass (None: no rule produced any), numbered per output topic;
    `yielded`: the outputs of `txn` and `view` rules (groups.py, views.py); `mirrored`:
    what a mirror's rows go through before they are numbered (mirror_toast.py)."""
    produced = []
    carry = ["__pos", "__src", TXN]
    for found in pairs:
        frame = found.frame.select(
            "left", "right", "__pos", F.col("left.kafka").alias("__src"), TXN
        )
        produced.append((found.rule, select_outputs(frame, found.rule.rule.sql, carry)))
    for rule in rules:
        if rule.rule.type not in ("stateless", "mirror"):
            continue
        frame = classified.where(
            (F.col("__rule") == rule.number) & (F.col("__status") == "released")
        ).select(
            event_struct().alias("in"),
            F.coalesce(TXN_POS, "__pos").alias("__pos"),  # a transaction's: its END's
            F.col("kafka").alias("__src"),
            TXN,
        )
        rows = select_outputs(frame, rule.rule.sql, carry)
        if rule.rule.type == "mirror" and rule.rule.sql == MIRROR_SQL:  # the value is `after`
            rows = mirrored(rows)
        produced.append((rule, rows))
    parts = [
        out.select(
            _output_topic(rule).alias("__topic"),
            F.lit(rule.number).alias("rule"),
            as_variant(out, "key").alias("key"),
            as_variant(out, "value").alias("value"),
            *carry,
            F.lit(None).cast("string").alias("__tie"),  # one output per event or pair
        )
        for rule, out in produced
    ]
    parts += yielded or []
    if not parts:
        return None
    outputs = union_all(parts)
    moved = moved_outputs(classified)
    whole = any(r.rule.transactional for r in rules)
    return _number(with_effective_position(outputs, moved), run, next_offsets, whole)


def _output_topic(rule: CompiledRule) -> Column:
    """The topic a rule's output goes to: its `out`, or a mirror's for the event's topic."""
    if rule.rule.type != "mirror":
        return F.lit(rule.rule.out)
    return looked_up(dict(rule.rule.mirrored), F.col("__src.topic"), F.lit(None).cast("string"))


def _number(outputs: DataFrame, run: int, next_offsets: dict[str, int], whole: bool) -> DataFrame:
    """Output records in the staging pool's layout. With gated or `txn` rules, a `txn`
    column too: each output's source transaction or group (scoped), so that to-kafka
    never splits one across Kafka transactions (tokafka/cuts.py)."""
    offset = output_offset(next_offsets)
    transaction = [F.col(TXN).alias("txn")] if whole else []
    return outputs.select(
        F.lit(OUTPUT).alias(KIND),
        F.struct(
            F.col("__topic").alias("topic"),
            F.lit(0).alias("partition"),
            offset.cast("long").alias("offset"),
            F.col("__src.timestamp").alias("timestamp"),
        ).alias("kafka"),
        "key",
        "value",
        F.lit(None).cast("string").alias("status"),
        F.col("rule").cast("int"),
        F.lit(run).cast("long").alias("run"),
        F.struct(
            F.col("__src.topic").alias("topic"),
            F.col("__src.partition").alias("partition"),
            F.col("__src.offset").alias("offset"),
        ).alias("source"),
        *transaction,
    )


def done_records(classified: DataFrame, run: int) -> DataFrame:
    consumed = classified.where(F.col("__status").isin(list(DONE_STATUS)))
    status = F.lit(None).cast("string")
    for name, label in DONE_STATUS.items():
        status = F.when(F.col("__status") == name, F.lit(label)).otherwise(status)
    expired = F.col("__status") == "expired"  # an expired event keeps its payload for the DLQ
    return consumed.select(
        F.lit(DONE).alias(KIND),
        "kafka",
        F.when(expired, F.col("key")).alias("key"),
        F.when(expired, F.col("value")).alias("value"),
        status.alias("status"),
        F.when(F.col("__rule") > 0, F.col("__rule")).cast("int").alias("rule"),
        F.lit(run).cast("long").alias("run"),
        F.lit(None).cast(SOURCE_TYPE).alias("source"),
    )


def outputs_per_topic(summary: list[cl.Tally], rules: list[CompiledRule]) -> dict[str, int]:
    by_number = {r.number: r for r in rules}
    per_topic: dict[str, int] = {}
    for row in summary:
        rule = by_number.get(row.rule)
        if rule is None or rule.rule.type in ("txn", "view"):  # they yield what their SQL yields
            continue
        counted = (row.status == "paired" and row.topic == rule.rule.left) or (
            row.status == "released"
        )
        out = dict(rule.rule.mirrored).get(row.topic) if rule.rule.mirrored else rule.rule.out
        if counted and out is not None:
            per_topic[out] = per_topic.get(out, 0) + row.n
    return per_topic
