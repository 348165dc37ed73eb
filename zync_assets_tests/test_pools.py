"""Which directories count as pools: only those with a committed Delta version."""

import os
from pathlib import Path

import pytest

from zync_assets.core.errors import ZyncError
from zync_assets.lake.pools import check_pool_name, list_pools, pool_exists


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


def _pool_at(folder: Path) -> Path:
    (folder / "_delta_log").mkdir(parents=True)
    (folder / "_delta_log" / "00000000000000000000.json").write_text("{}")
    return folder


def test_no_command_follows_a_symbolic_link_out_of_the_lake(tmp_path: Path) -> None:
    from zync_assets_tests.conftest import run_zync

    lake, outside = tmp_path / "lake", _pool_at(tmp_path / "outside" / "Precious")
    _pool_at(lake / "Mine")
    (lake / "Evil").symlink_to(outside)
    env = {**os.environ, "ZYNC_LAKE": str(lake)}

    dropped = run_zync("pool", "drop", "Evil", "--yes", env=env)
    assert dropped.returncode == 1
    assert dropped.stderr.startswith(f"zync: error: {lake / 'Evil'} leads through a symbolic link")
    assert (outside / "_delta_log" / "00000000000000000000.json").is_file()  # untouched

    listed = run_zync("pool", "ls", env=env)
    assert listed.returncode == 0 and "Evil" not in listed.stdout and "Mine" in listed.stdout

    (lake / "_tables").symlink_to(tmp_path / "outside")  # a link one level up counts too
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ZYNC_LAKE", str(lake))
        from zync_assets.lake.pools import table_path

        with pytest.raises(ZyncError, match="symbolic link"):
            table_path("Precious")


def test_dropping_a_pool_asks_first_and_keeps_it_unless_confirmed(tmp_path: Path) -> None:
    from zync_assets_tests.conftest import run_zync

    pool = _pool_at(tmp_path / "lake" / "Kept")
    env = {**os.environ, "ZYNC_LAKE": str(tmp_path / "lake")}
    refused = run_zync("pool", "drop", "Kept", env=env, stdin="n\n")
    assert refused.returncode == 1 and "Delete pool Kept" in refused.stdout
    assert refused.stderr.strip() == (
        "zync: error: pool Kept kept: not confirmed (--yes drops it without asking)"
    )
    assert run_zync("pool", "drop", "Kept", env=env).returncode == 1  # no answer is no
    assert pool.is_dir()
    confirmed = run_zync("pool", "drop", "Kept", env=env, stdin="y\n")
    assert confirmed.returncode == 0 and not pool.exists()
