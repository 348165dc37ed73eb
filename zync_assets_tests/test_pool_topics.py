"""A staging pool's output topics, as to-kafka finds them: from the ETL states in the pool's
commits (no Spark job), or, where no commit holds one, from a scan of its outputs."""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import functions as F

from zync_assets.lake.commits import carry_metadata, newest_states
from zync_assets.tokafka.encode import output_topics
from zync_assets_tests.test_commits import commit


def test_the_topics_are_those_every_specs_newest_state_names_with_records(
    spark, lake: Path
) -> None:
    """Each spec's newest state counts, directly or through a carry; a topic it names at
    offset 0 has no records. The commits hold no data files: a scan would fail."""
    table = lake / "Staging"
    commit(table, 0, {"zync_etl": {"spec": "a", "run": 1, "next": {"a_out": 2}}})
    commit(table, 1, {"zync_etl": {"spec": "b", "run": 1, "next": {"b_out": 1, "b_none": 0}}})
    commit(table, 2, json.loads(carry_metadata(1, newest_states(str(table), 1))))
    commit(table, 3, {"zync_etl": {"spec": "a", "run": 2, "next": {"a_out": 3, "a_new": 1}}})
    assert output_topics(spark, "Staging") == ["a_new", "a_out", "b_out"]
    assert output_topics(spark, "Staging", version=1) == ["a_out", "b_out"]


def test_a_pool_no_etl_state_describes_is_scanned(spark, lake: Path) -> None:
    rows = spark.createDataFrame(
        [("output", "x_out", 0), ("output", "y_out", 0), ("done", "raw_in", 5)],
        "kind string, topic string, offset long",
    )
    staged = rows.select("kind", F.struct("topic", "offset").alias("kafka"))
    staged.write.format("delta").partitionBy("kind").save(str(lake / "Handmade"))
    assert output_topics(spark, "Handmade") == ["x_out", "y_out"]
