"""`zync stack connector source|sink`: bad input is a one-line error and a non-zero exit,
before anything is changed. (The commands at work: test_user_schema_chain.py.)"""

from __future__ import annotations

import pytest

from zync_assets.core.errors import ZyncError
from zync_assets.stack.register import check_connector, check_name, check_tables
from zync_assets_tests.conftest import free_port, run_zync


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["source", "s", "--database", "db", "--tables", "customers"],
         "table 'customers': name it schema.table in lower case"),
        (["source", "s", "--database", "db", "--tables", "public.x;drop"],
         "table 'public.x;drop': name it schema.table"),
        (["source", "bad/name", "--database", "db", "--tables", "public.x"],
         "connector name 'bad/name': use letters"),
        (["sink", "k", "--topics", ","], "no topics: name at least one"),
        (["sink", "k"], "give --topics (some topics) or --topics-regex (a pattern)"),
        (["sink", "k", "--topics", "a", "--topics-regex", "a.*"], "give --topics (some topics) or"),
        (["source", "s", "--database", "db"], "give --tables (some tables) or --schema"),
        (["source", "s", "--database", "db", "--tables", "public.x", "--schema", "public"],
         "give --tables (some tables) or --schema"),
        (["source", "s", "--database", "db", "--schema", "Public;"],
         "schema 'Public;': use a lower-case SQL identifier"),
        (["source", "s", "--database", "db", "--tables", "public.x", "--format", "xml"],
         "Invalid value for '--format'"),
    ],
)  # fmt: skip
def test_bad_connector_requests_fail_in_one_line(args: list[str], error: str) -> None:
    done = run_zync("stack", "connector", *args)
    assert done.returncode != 0
    assert error in done.stderr, done.stderr
    if "Invalid value" not in error:  # click's own usage errors take a few lines
        assert done.stderr.strip().count("\n") == 0, done.stderr


def test_a_source_database_that_does_not_answer_is_named_with_what_to_do() -> None:
    port = free_port()
    done = run_zync(
        "stack", "connector", "source", "s", "--database", "mydb", "--tables", "public.x",
        "--source-db-port", str(port),
    )  # fmt: skip
    assert done.returncode == 1
    assert f"source database mydb on 127.0.0.1:{port}" in done.stderr
    assert "is the stack up with --cdc?" in done.stderr
    assert done.stderr.strip().count("\n") == 0, done.stderr


def test_names_are_checked() -> None:
    assert check_tables(["public.a", "s2.b_c"]) == ["public.a", "s2.b_c"]
    assert check_connector("shop-source.v2") == "shop-source.v2"
    assert check_name("publication", "shop_source") == "shop_source"
    with pytest.raises(ZyncError, match="publication 'Shop-Source': use a lower-case"):
        check_name("publication", "Shop-Source")
    with pytest.raises(ZyncError, match="no tables"):
        check_tables([])
