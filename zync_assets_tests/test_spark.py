"""The shared SparkSession has Delta Lake and VARIANT support from the local jar cache."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_delta_table_write_and_read(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    spark.createDataFrame([(1, "a"), (2, "b")], "id long, s string").write.format("delta").save(
        path
    )
    spark.createDataFrame([(3, "c")], "id long, s string").write.format("delta").mode(
        "append"
    ).save(path)
    rows = spark.read.format("delta").load(path).orderBy("id").collect()
    assert [(r.id, r.s) for r in rows] == [(1, "a"), (2, "b"), (3, "c")]
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    assert len(history) == 2


def test_variant_keeps_a_missing_field_apart_from_a_null_one(spark) -> None:
    row = spark.sql(
        """select variant_get(v, '$.a', 'int') as a,
                  variant_get(v, '$.gone', 'int') as gone,
                  cast(v:a as string) as a_text,
                  is_variant_null(variant_get(v, '$.n')) as n_is_null,
                  variant_get(v, '$.gone') is null as gone_missing
           from (select parse_json('{"a": 1, "n": null}') as v)"""
    ).first()
    assert (row.a, row.gone, row.a_text, row.n_is_null, row.gone_missing) == (
        1, None, "1", True, True,
    )  # fmt: skip
