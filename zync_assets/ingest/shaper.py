"""Shapers: a Spark SQL select list that reshapes `key`/`value` of each envelope before commit.

Example shaper file (keep only the row image of a Debezium envelope):

    key,
    value:after AS value

The select list runs over the envelope (`kafka`, `key`, `value`); it may yield `key`
and/or `value` (anything else is refused, `kafka` above all: ingest and the ETL
cursors rely on it), and it must keep one output row per input row.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from zync_assets.core.errors import ZyncError
from zync_assets.core.variants import as_variant
from zync_assets.spark.session import analyzed_plan, select_over

SHAPEABLE = ("key", "value")


@dataclass(frozen=True)
class Shaper:
    select_list: str
    origin: str  # the file it came from, for error messages

    @classmethod
    def from_file(cls, path: str) -> Shaper:
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ZyncError(f"cannot read shaper {path}: {exc.strerror}") from exc
        lines = [line for line in text.splitlines() if not line.strip().startswith("--")]
        select_list = "\n".join(lines).strip().rstrip(";")
        if not select_list:
            raise ZyncError(f"shaper {path} is empty: write a select list such as `key, value`")
        return cls(select_list, path)

    def apply(self, envelopes: DataFrame) -> DataFrame:
        select_list = (
            "kafka AS __zync_kafka, key AS __zync_key, value AS __zync_value, "
            f"dead_letter AS __zync_dead_letter, {self.select_list}"
        )
        try:
            shaped = select_over(envelopes, select_list)
            return self._checked(shaped)  # `columns` analyses it (lazily, through Connect)
        except (ParseException, AnalysisException) as exc:
            first = str(exc).strip().splitlines()[0]
            raise ZyncError(f"shaper {self.origin} is not valid Spark SQL: {first}") from exc

    def _checked(self, shaped: DataFrame) -> DataFrame:
        outputs = shaped.columns[4:]
        if "kafka" in outputs:
            raise ZyncError(
                f"shaper {self.origin} changes `kafka`; a shaper may reshape key and value only"
            )
        others = [c for c in outputs if c not in SHAPEABLE]
        if others or len(set(outputs)) != len(outputs):
            raise ZyncError(
                f"shaper {self.origin} yields {', '.join(outputs)}; "
                "it must yield `key` and/or `value` (each once)"
            )
        plan = analyzed_plan(shaped)
        if "Generate " in plan or "Aggregate " in plan:
            raise ZyncError(
                f"shaper {self.origin} changes the number of rows (explode or aggregate); "
                "it must keep one row per message"
            )
        alive = F.col("__zync_dead_letter").isNull()  # dead letters keep NULL key/value
        shaped_columns = [
            F.when(alive, as_variant(shaped, n) if n in outputs else F.col(f"__zync_{n}")).alias(n)
            for n in SHAPEABLE
        ]
        return shaped.select(
            F.col("__zync_kafka").alias("kafka"),
            *shaped_columns,
            F.col("__zync_dead_letter").alias("dead_letter"),
        )
