"""Where to-kafka may end a Kafka transaction: never inside a source transaction.

ETL writes each output of a gated rule with its source transaction (`txn`,
etl/records.py), all of one source transaction in one staging commit. The outputs of a
source transaction to one topic span offsets [first, last]; spans that overlap are
merged. A Kafka transaction may end before offset `c` only if no span holds both `c - 1`
and `c`; a chunk (`--transaction-size`) that would end inside a span is extended to the
span's end, so a read_committed consumer sees a source transaction whole or not at all.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


@dataclass(frozen=True)
class Cuts:
    """Merged, sorted, disjoint spans [first, last] of source transactions' outputs."""

    spans: tuple[tuple[int, int], ...] = ()

    def allowed(self, cut: int) -> int:
        """The first offset ≥ `cut` before which a Kafka transaction may end."""
        i = bisect.bisect_left(self.spans, (cut, cut)) - 1  # the last span starting < cut
        if i >= 0 and self.spans[i][1] >= cut:
            return self.spans[i][1] + 1
        return cut


def merged(spans: Iterable[tuple[int, int]]) -> Cuts:
    """Cuts from [first, last] spans in any order (single-record spans may be left out)."""
    out: list[tuple[int, int]] = []
    for first, last in sorted(spans):
        if out and first <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
    return Cuts(tuple(out))


def transaction_cuts(staging: DataFrame, topic: str, start: int) -> Cuts:
    """The cuts for `topic`'s outputs from `start` on; none (and no Spark job) in a pool
    that no gated rule wrote to (it has no `txn` column)."""
    if "txn" not in staging.columns:
        return Cuts()
    rows = (
        staging.where(
            (F.col("kind") == "output")
            & (F.col("kafka.topic") == topic)
            & (F.col("kafka.offset") >= start)
            & F.col("txn").isNotNull()
        )
        .groupBy("txn")
        .agg(F.min("kafka.offset").alias("first"), F.max("kafka.offset").alias("last"))
        .where(F.col("last") > F.col("first"))
        .collect()
    )
    return merged((r["first"], r["last"]) for r in rows)
