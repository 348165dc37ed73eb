"""Which directories count as pools: only those with a committed Delta version."""

from pathlib import Path

import pytest

from zync_assets.errors import ZyncError
from zync_assets.pools import check_pool_name, list_pools, pool_exists


def test_a_log_without_a_commit_is_not_a_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a writer killed during its first commit leaves: a log dir, maybe a temp file.
    (tmp_path / "Half" / "_delta_log").mkdir(parents=True)
    (tmp_path / "Half" / "_delta_log" / ".00000000000000000000.json.tmp").write_text("{}")
    (tmp_path / "Whole" / "_delta_log").mkdir(parents=True)
    (tmp_path / "Whole" / "_delta_log" / "00000000000000000000.json").write_text("{}")
    (tmp_path / "Checkpointed" / "_delta_log").mkdir(parents=True)
    (
        tmp_path / "Checkpointed" / "_delta_log" / "00000000000000000010.checkpoint.parquet"
    ).write_text("")
    monkeypatch.setenv("ZYNC_LAKE", str(tmp_path))
    assert not pool_exists(str(tmp_path / "Half"))
    assert not pool_exists(str(tmp_path / "Missing"))
    assert pool_exists(str(tmp_path / "Whole"))
    assert list_pools() == ["Checkpointed", "Whole"]


@pytest.mark.parametrize("name", ["../etc", "a b", "x.y", "", "a" * 65])
def test_pool_names_that_could_escape_the_lake_are_refused(name: str) -> None:
    with pytest.raises(ZyncError, match="invalid pool name"):
        check_pool_name(name)


def test_maintaining_a_pool_that_does_not_exist_fails_in_one_line(tmp_path: Path) -> None:
    import os

    from zync_assets_tests.conftest import run_zync

    env = {**os.environ, "ZYNC_LAKE": str(tmp_path / "lake")}
    result = run_zync("pool", "maintain", "Nope", "../etc", env=env, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "zync: error: invalid pool name '../etc': use 1-64 letters, digits, '_' or '-' "
        "(no paths, dots or spaces)"
    ]
    result = run_zync("pool", "maintain", "Nope", env=env, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip() == "zync: error: no such pool: Nope (see `zync pool ls`)"
