"""Where to-kafka may end a Kafka transaction: never inside a source transaction.

ETL writes each output of a gated or `txn` rule with its source transaction or group
(`txn`, etl/records.py), all of one transaction in one staging commit, possibly to several
output topics of the pool. A Kafka transaction sends, per topic, the records from where
the topic stands up to an end; ends are chosen so that every source transaction has all
its records on one side of them in every topic: when a topic's part takes a record of a
source transaction, every topic's end moves past that transaction's last record there,
until nothing moves (a closure: what it pulls in may pull in more). A read_committed
consumer — of one topic or of all of them — then sees a source transaction whole or not
at all.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from zync_assets.core.staging_rows import OUTPUT, of_kind

Piece = tuple[str, str, int, int]  # txn, topic, first offset, last offset


@dataclass(frozen=True)
class Cuts:
    """The source transactions of several records: for each, its [first, last] per topic."""

    lasts: dict[str, dict[str, int]] = field(default_factory=dict)  # txn -> topic -> last
    starts: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # sorted (first, txn)

    def ends(self, positions: Mapping[str, int], wanted: Mapping[str, int]) -> dict[str, int]:
        """The smallest ends (exclusive), per topic, at least `wanted`, that split no source
        transaction, for a Kafka transaction that starts at `positions` (ends that
        themselves split none: whatever starts below a position was sent whole)."""
        ends = {topic: max(wanted.get(topic, at), at) for topic, at in positions.items()}
        taken = {t: bisect.bisect_left(s, (positions.get(t, 0),)) for t, s in self.starts.items()}
        moved = True
        while moved:
            moved = False
            for topic, starts in self.starts.items():
                i = taken[topic]
                while i < len(starts) and starts[i][0] < ends.get(topic, 0):
                    for other, last in self.lasts[starts[i][1]].items():
                        if last + 1 > ends.get(other, 0):
                            ends[other] = last + 1
                            moved = True
                    i += 1
                taken[topic] = i
        return ends


def cuts_of(pieces: Iterable[Piece]) -> Cuts:
    """Cuts from each source transaction's [first, last] per topic (a transaction of one
    record may be left out: it cannot be split)."""
    cuts = Cuts()
    for txn, topic, first, last in pieces:
        cuts.lasts.setdefault(txn, {})[topic] = last
        cuts.starts.setdefault(topic, []).append((first, txn))
    for starts in cuts.starts.values():
        starts.sort()
    return cuts


def transaction_cuts(staging: DataFrame, positions: Mapping[str, int], size: int) -> Cuts:
    """The cuts for the records of each topic from its position on; none, and no Spark
    job, in a pool that no gated or `txn` rule wrote to (no `txn` column).

    An ETL run's commit holds whole source transactions, so a run is cut as a whole (one
    piece per run and topic, from a small aggregate). Only a run of more than `size`
    records is cut between its source transactions (a piece per transaction and topic),
    so the pieces stay few in the steady state of small runs."""
    if "txn" not in staging.columns or not positions:
        return Cuts()
    unsent = F.lit(False)
    for topic, at in positions.items():
        unsent = unsent | ((F.col("kafka.topic") == topic) & (F.col("kafka.offset") >= at))
    outputs = staging.where(of_kind(OUTPUT) & unsent)
    # "run <n>": a run's label is never a source transaction's (which would merge them)
    run_label = F.concat(F.lit(RUN), F.col("run").cast("string"))
    runs = _columns(_pieces(outputs, run_label)) if "run" in staging.columns else {}
    records: dict[str, int] = {}
    for run, n in zip(runs.get("txn", []), runs.get("n", []), strict=True):
        records[run] = records.get(run, 0) + n
    big = [int(run.removeprefix(RUN)) for run, n in records.items() if n > size]
    small = [i for i, run in enumerate(runs.get("txn", [])) if records[run] <= size]
    pieces = [[runs[c][i] for i in small] for c in PIECE] if runs else [[], [], [], []]
    if big or "run" not in staging.columns:
        chosen = outputs.where(F.col("txn").isNotNull())
        if "run" in staging.columns:
            chosen = chosen.where(F.col("run").isin(big))
        found = _columns(_pieces(chosen, F.col("txn")))
        pieces = [pieces[i] + found[c] for i, c in enumerate(PIECE)]
    return cuts_of(zip(*pieces, strict=True))


PIECE = ("txn", "topic", "first", "last")
RUN = "run "


def _columns(table: pa.Table) -> dict[str, list]:
    """A table's columns as lists: column by column, much faster than row by row."""
    return {name: table.column(name).to_pylist() for name in table.column_names}


def _pieces(outputs: DataFrame, unit: Column) -> pa.Table:
    """Per `unit` (a run, or a source transaction) and topic: its first and last offsets
    and its records (through Arrow: a large run has hundreds of thousands)."""
    return (
        outputs.groupBy(unit.cast("string").alias("txn"), F.col("kafka.topic").alias("topic"))
        .agg(
            F.min("kafka.offset").alias("first"),
            F.max("kafka.offset").alias("last"),
            F.count("*").alias("n"),
        )
        .toArrow()
    )
