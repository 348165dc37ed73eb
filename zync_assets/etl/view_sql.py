"""The SQL of a `view` rule: a query over its inputs' current rows, each input a table
under the name the rule gives it, with columns

    key      VARIANT   the row's Kafka key (the source table's primary key)
    after    VARIANT   the row as its latest change left it (`after:id::bigint`)

that yields the view's columns, the rule's `key` among them."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession

from zync_assets.specs.rules import Rule

CURRENT_ROWS = "key variant, after variant"  # each input as the SQL sees it


def view_sql(spark: SparkSession, rows: dict[str, DataFrame], rule: Rule) -> DataFrame:
    """The rule's SQL with each input name bound to `rows[topic]` (`key`, `after`). The
    frames are query parameters, not temporary views (see spark.select_over)."""
    frames: dict[str, Any] = {}
    ctes = []
    for index, (name, topic) in enumerate(rule.relations):
        frames[f"__input{index}"] = rows[topic].select("key", "after")
        ctes.append(f"`{name}` AS (SELECT * FROM {{__input{index}}})")
    escaped = rule.sql.replace("{", "{{").replace("}", "}}")
    query = f"WITH {', '.join(ctes)} SELECT * FROM ({escaped}) AS __view"
    return spark.sql(query, **frames)


def check_view_columns(yielded: DataFrame, rule: Rule) -> str | None:
    """What is wrong with the columns the SQL yields, or None."""
    columns = yielded.columns
    if len(set(columns)) != len(columns):
        twice = sorted({c for c in columns if columns.count(c) > 1})
        return f"yields column {twice[0]!r} twice: name each column once (`AS <name>`)"
    missing = [c for c in rule.key if c not in columns]
    if missing:
        return (
            f"yields no column {missing[0]!r} of its key ({', '.join(rule.key)}); it yields "
            f"{', '.join(columns)}"
        )
    return None


def empty_rows(spark: SparkSession, rule: Rule) -> dict[str, DataFrame]:
    """Each input of the rule with no rows (to check its SQL before any data is read)."""
    empty = spark.createDataFrame([], CURRENT_ROWS)
    return {topic: empty for _, topic in rule.relations}
