"""The SQL of a `txn` rule: a query over `events`, one row per event of the rule's
complete groups,

    txn      the group: the rule's `group-by` value, or Debezium's `transaction.id`
             (an event without transaction metadata is a transaction of its own, named
             by where it is: `topic[partition]@offset`)
    kafka, key, value, op, before, after, source, ts_ms    the event, as rules see it

that yields zero or more rows per group with `txn` (which group each row belongs to),
`key`, `value` and, if the rule has several `out` topics, `topic`.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from zync_assets.specs.rules import Rule

EVENTS = "events"  # what the SQL reads
YIELDS = ("txn", "key", "value")  # what it must yield; `topic` too, with several outs


def group_value(rule: Rule) -> Column:
    """An event's group as the rule's SQL sees it (`txn`)."""
    if rule.group_by is not None:
        return F.expr(rule.group_by)
    where = F.format_string(
        "%s[%d]@%d", F.col("kafka.topic"), F.col("kafka.partition"), F.col("kafka.offset")
    )
    return F.coalesce(F.expr("try_variant_get(value, '$.transaction.id', 'string')"), where)


def run_sql(events: DataFrame, rule: Rule) -> DataFrame:
    """The rule's SQL over `events` (a CTE over a query parameter, not a temporary view:
    Spark Connect analyses a frame again at each action; see spark.select_over)."""
    escaped = rule.sql.replace("{", "{{").replace("}", "}}")
    query = f"WITH {EVENTS} AS (SELECT * FROM {{frame}}) SELECT * FROM ({escaped}) AS __yields"
    return events.sparkSession.sql(query, frame=events)


def check_yields(yielded: DataFrame, rule: Rule) -> str | None:
    """What is wrong with the columns the SQL yields, or None."""
    names = set(yielded.columns)
    wanted = set(YIELDS) | ({"topic"} if len(rule.output_topics) > 1 else set())
    if names == wanted or names == set(YIELDS) | {"topic"}:
        return None
    return (
        f"must yield {', '.join(sorted(wanted))} (`txn` names the group a row belongs to), "
        f"yields {', '.join(yielded.columns)}"
    )
