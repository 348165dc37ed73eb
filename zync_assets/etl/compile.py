"""Rules → Spark expressions, checked against the event schema (core/events.py) before any
data is read."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType

from zync_assets.core.errors import ZyncError
from zync_assets.core.events import EVENT_FIELDS, RAW_SCHEMA, event_columns, event_struct
from zync_assets.etl.group_sql import check_yields, group_value, run_sql
from zync_assets.etl.view_sql import check_view_columns, empty_rows, view_sql
from zync_assets.spark.session import select_over
from zync_assets.specs.model import Spec
from zync_assets.specs.rules import Rule


@dataclass(frozen=True)
class CompiledRule:
    rule: Rule
    topics: tuple[str, ...]
    where: Column  # over the event's fields

    @property
    def number(self) -> int:
        return self.rule.number

    def join_keys(self) -> tuple[Column, Column]:
        """Join keys as strings, so `after:ID` (variant) meets `after:InvoiceID::bigint`."""
        assert self.rule.join_on is not None
        left, right = self.rule.join_on
        return F.expr(left).cast("string"), F.expr(right).cast("string")


def select_outputs(frame: DataFrame, select_list: str, carry: list[str]) -> DataFrame:
    """`SELECT <carry>, <select_list> FROM frame`: the rule's own SQL, plus columns to keep."""
    return select_over(frame, f"{', '.join(carry)}, {select_list}")


class _Checker:
    """Analyses every expression of a spec against empty frames of the event schema."""

    def __init__(self, spark: SparkSession, spec: Spec) -> None:
        raw = spark.createDataFrame([], RAW_SCHEMA)
        self.events = raw.select(*event_columns())
        self.spec = spec

    def _fail(self, rule: Rule, field: str, exc: Exception) -> ZyncError:
        message = str(exc).strip().splitlines()[0]
        return ZyncError(f"{self.spec.path}: transforms[{rule.number}] {field}: {message}")

    def where(self, rule: Rule) -> Column:
        condition = F.expr(rule.where) if rule.where else F.lit(True)
        try:
            data_type = self.events.select(condition.alias("w")).schema["w"].dataType
        except (ParseException, AnalysisException) as exc:
            raise self._fail(rule, "where", exc) from exc
        if not isinstance(data_type, BooleanType):
            raise ZyncError(
                f"{self.spec.path}: transforms[{rule.number}] where: is {data_type.simpleString()}, "
                "not a boolean condition"
            )
        return condition

    def join_on(self, compiled: CompiledRule) -> None:
        pairs = self.events.select(event_struct().alias("left"), event_struct().alias("right"))
        left, right = compiled.join_keys()
        for side, key in (("left", left), ("right", right)):
            try:
                pairs.select(key)
            except (ParseException, AnalysisException) as exc:
                raise self._fail(compiled.rule, f"join-on ({side} side)", exc) from exc

    def group_by(self, compiled: CompiledRule) -> None:
        """A `txn` rule's group-by (a value per event) and complete-when (an aggregate
        over a group, true when it is complete)."""
        rule = compiled.rule
        if rule.group_by is not None:
            try:  # beside a plain column, an aggregate fails (it needs a GROUP BY)
                self.events.select(F.expr(rule.group_by), F.col("kafka"))
            except (ParseException, AnalysisException) as exc:
                raise self._fail(rule, "group-by", exc) from exc
        if rule.complete_when is None or rule.gate:
            return
        try:
            kind = self.events.agg(F.expr(rule.complete_when).alias("c")).schema["c"].dataType
        except (ParseException, AnalysisException) as exc:
            raise self._fail(rule, "complete-when", exc) from exc
        if not isinstance(kind, BooleanType):
            raise ZyncError(
                f"{self.spec.path}: transforms[{rule.number}] complete-when: is "
                f"{kind.simpleString()}, not a boolean aggregate over the group (e.g. "
                "bool_or(value:done::boolean))"
            )

    def group_sql(self, compiled: CompiledRule) -> None:
        events = self.events.select(group_value(compiled.rule).alias("txn"), *EVENT_FIELDS)
        try:
            yielded = run_sql(events, compiled.rule)
        except (ParseException, AnalysisException) as exc:
            raise self._fail(compiled.rule, "sql", exc) from exc
        problem = check_yields(yielded, compiled.rule)
        if problem is not None:
            raise ZyncError(f"{self.spec.path}: transforms[{compiled.number}] sql: {problem}")

    def view(self, rule: Rule) -> None:
        spark = self.events.sparkSession
        try:
            yielded = view_sql(spark, empty_rows(spark, rule), rule)
        except (ParseException, AnalysisException) as exc:
            raise self._fail(rule, "sql", exc) from exc
        problem = check_view_columns(yielded, rule)
        if problem is not None:
            raise ZyncError(f"{self.spec.path}: transforms[{rule.number}] sql: {problem}")

    def sql(self, rule: Rule) -> None:
        names = ("left", "right") if rule.type == "denorm" else ("in",)
        frame = self.events.select(*(event_struct().alias(n) for n in names))
        try:
            columns = select_outputs(frame, rule.sql, ["1 AS __probe"])
        except (ParseException, AnalysisException) as exc:
            raise self._fail(rule, "sql", exc) from exc
        produced = [c for c in columns.columns if c != "__probe"]
        if sorted(produced) != ["key", "value"]:
            raise ZyncError(
                f"{self.spec.path}: transforms[{rule.number}] sql: must yield exactly `key` and "
                f"`value` (e.g. `in.key AS key, in.after AS value`), yields {', '.join(produced)}"
            )


def compile_rules(spark: SparkSession, spec: Spec) -> list[CompiledRule]:
    """The spec's rules, each checked against Spark; errors name file, rule and field."""
    checker = _Checker(spark, spec)
    compiled = []
    for rule in spec.transforms:
        item = CompiledRule(rule, rule.topics, checker.where(rule))
        if rule.type == "denorm":
            checker.join_on(item)
        if rule.type == "txn":
            checker.group_by(item)
            checker.group_sql(item)
        elif rule.type == "view":
            checker.view(rule)
        else:
            checker.sql(rule)
        compiled.append(item)
    return compiled
