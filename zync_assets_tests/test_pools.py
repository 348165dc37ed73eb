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
