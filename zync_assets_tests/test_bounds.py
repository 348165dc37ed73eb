"""The ETL's and the tables' row filters on Kafka coordinates (etl/bounds.py), on real Spark:
the rows they keep are exactly those between the cursors and the ends, with few topics and
with a whole database's (where the filter switches to one lowest offset for file skipping)."""

from __future__ import annotations

import itertools

import pytest
from pyspark.sql import SparkSession

from zync_assets.etl.bounds import above_cursors, below_ends

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("topics", [3, 40])
def test_the_filters_keep_exactly_the_rows_between_cursors_and_ends(
    spark: SparkSession, topics: int
) -> None:
    names = [f"db.public.t{i}" for i in range(topics)]
    rows = [(t, p, o) for t, p, o in itertools.product([*names, "other"], (0, 1), range(6))]
    frame = spark.createDataFrame(rows, "topic string, partition int, offset long").selectExpr(
        "named_struct('topic', topic, 'partition', partition, 'offset', offset) AS kafka"
    )
    # cursors 2 and 1, ends 5 and 4; the last topic is not read (above_cursors is asked for
    # the others only)
    cursors = {t: {0: 2, 1: 1} for t in names}
    ends = {t: {0: 5, 1: 4} for t in names[:-1]}
    kept = frame.where(above_cursors(cursors, names[:-1]) & below_ends(ends)).collect()
    found = sorted((r.kafka.topic, r.kafka.partition, r.kafka.offset) for r in kept)
    wanted = sorted(
        (t, p, o) for t, p, o in rows
        if t in names[:-1] and o >= (2 if p == 0 else 1) and o < (5 if p == 0 else 4)
    )  # fmt: skip
    assert found == wanted


@pytest.mark.parametrize("topics", [3, 40])
def test_a_partition_without_a_cursor_is_read_from_its_first_offset(
    spark: SparkSession, topics: int
) -> None:
    """A partition first written after the cursors were taken (a partition added to the
    topic) has no cursor: its rows below the other partitions' cursors are kept (a lowest
    offset taken from the other partitions would skip them, and lose them for good)."""
    names = [f"db.public.t{i}" for i in range(topics)]
    rows = [(t, p, o) for t, p, o in itertools.product(names, (0, 1), range(6))]
    frame = spark.createDataFrame(rows, "topic string, partition int, offset long").selectExpr(
        "named_struct('topic', topic, 'partition', partition, 'offset', offset) AS kafka"
    )
    cursors = {t: {0: 4} for t in names}  # partition 1 had no rows when they were taken
    ends = {t: {0: 6, 1: 6} for t in names}
    kept = frame.where(above_cursors(cursors, names, ends=ends) & below_ends(ends)).collect()
    found = sorted((r.kafka.topic, r.kafka.partition, r.kafka.offset) for r in kept)
    assert found == sorted((t, p, o) for t, p, o in rows if p == 1 or o >= 4)
