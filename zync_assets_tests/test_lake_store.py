"""Where the lake is (a folder or an S3 bucket): paths, Spark's S3 settings, and the one-line
errors an object store's refusals become. Pure functions; the S3 server itself is in
test_object_store.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from zync_assets.core.errors import Unavailable, ZyncError
from zync_assets.lake.pools import lake_entry, pool_path
from zync_assets.lake.store import join, lake_keys, lake_uri, spark_conf_for_lake, storage_error


@pytest.fixture
def s3_lake(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("ZYNC_LAKE", "s3://bucket/some/prefix/")
    monkeypatch.setenv("ZYNC_S3_ENDPOINT", "http://127.0.0.1:9000")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "key-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "the-secret")
    return "s3a://bucket/some/prefix"


def test_an_s3_lake_is_an_s3a_url_and_pools_are_keys_under_it(s3_lake: str) -> None:
    assert lake_uri() == s3_lake  # s3:// becomes s3a:// (hadoop-aws), no trailing slash
    assert pool_path("Raw") == f"{s3_lake}/Raw"
    assert lake_entry(".pipelines", "Raw.json") == f"{s3_lake}/.pipelines/Raw.json"
    with pytest.raises(ZyncError, match="invalid pool name"):
        pool_path("../elsewhere")


def test_a_folder_lake_stays_an_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ZYNC_LAKE", "lake")
    assert lake_uri() == str(tmp_path / "lake")
    assert join(lake_uri(), "Raw", "_delta_log") == str(tmp_path / "lake" / "Raw" / "_delta_log")


def test_spark_gets_the_endpoint_on_its_command_line_and_the_keys_only_at_run_time(
    s3_lake: str,
) -> None:
    conf = spark_conf_for_lake(s3_lake)
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert not any("the-secret" in value or "key-id" in value for value in conf.values())
    assert lake_keys(s3_lake) == {"fs.s3a.access.key": "key-id", "fs.s3a.secret.key": "the-secret"}
    assert spark_conf_for_lake("/a/folder") == {} and lake_keys("/a/folder") == {}


@pytest.mark.parametrize(
    ("detail", "kind", "says"),
    [
        ("AWS Error ACCESS_DENIED during HeadObject operation", ZyncError,
         "refused the credentials for s3a://bucket/some/prefix; check AWS_ACCESS_KEY_ID"),
        ("AWS Error SIGNATURE_DOES_NOT_MATCH during ListObjectsV2", ZyncError,
         "refused the credentials"),
        ("AWS Error NETWORK_CONNECTION during ListObjectsV2: Could not connect", Unavailable,
         "at http://127.0.0.1:9000 does not answer; start it"),
        ("NoSuchBucket: bucket", ZyncError, "the lake's bucket 'bucket' does not exist"),
        ("something else entirely", ZyncError,
         "failed for s3a://bucket/some/prefix (something else entirely)"),
    ],
)  # fmt: skip
def test_object_store_failures_become_one_line_naming_the_cause(
    s3_lake: str, detail: str, kind: type, says: str
) -> None:
    error = storage_error(f"{s3_lake}/Raw/x", OSError(detail + "\nsecond line"))
    assert type(error) is kind
    assert says in str(error) and "\n" not in str(error)
