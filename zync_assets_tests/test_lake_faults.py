"""A lake on a disk that fills up, and one made read-only: one clear line, the pool as its
last whole commit left it, and after the disk is fixed every record exactly once.

The lake lives on a small tmpfs mounted for the test (a real file system that really runs
out of space and really refuses writes, for root too — chmod would not stop root).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from zync_assets_tests.conftest import (
    Stack,
    assert_each_offset_once,
    produce_many,
    run_zync,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SIZE = "48m"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "disk"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(folder)],
                             capture_output=True, text=True)  # fmt: skip
    if mounted.returncode != 0:
        pytest.fail(f"this test needs to mount a tmpfs (root): {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> Path:
    """Write a file until the disk is full; returns it (delete it to free the space)."""
    filler = folder / "filler"
    block = b"\0" * (1 << 20)
    with filler.open("wb", buffering=0) as out:
        try:
            while True:
                out.write(block)
                out.flush()
        except OSError:
            pass
    with filler.open("ab", buffering=0) as out:  # and the last partial block
        try:
            while True:
                out.write(b"\0" * 4096)
                out.flush()
        except OSError:
            pass
    return filler


def ingest(stack: Stack, topic: str, lake: Path, failing: bool = False):
    # The failing ingest gets a process of its own: its whole stderr, the JVM's lines too,
    # must be one line. The others run in this worker, over its warm Spark.
    return run_zync("from-kafka", "-t", topic, "-p", "Disk", "--once",
                    env=stack.env(ZYNC_LAKE=str(lake)), timeout=240, process=failing)  # fmt: skip


def assert_one_clear_line(done, cause: str) -> None:
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("spark ready")]
    assert len(lines) == 1 and lines[0].startswith("zync: error: "), done.stderr
    assert cause in lines[0] and "the lake could not be written" in lines[0], lines[0]


def test_a_full_disk_stops_ingest_with_one_line_and_loses_nothing(
    spark, stack: Stack, topic: str, small_disk: Path
) -> None:
    lake = small_disk / "lake"
    produce_many(stack, topic, 5_000, every_bad=997)
    assert ingest(stack, topic, lake).returncode == 0
    filler = fill(small_disk)
    produce_many(stack, topic, 20_000, every_bad=997)  # 25,000 offsets in all
    assert_one_clear_line(ingest(stack, topic, lake, failing=True), "No space left on device")
    assert_each_offset_once(spark, lake, "Disk", 5_000)  # the first commit, whole

    filler.unlink()
    done = ingest(stack, topic, lake)
    assert done.returncode == 0, done.stderr
    assert_each_offset_once(spark, lake, "Disk", 25_000)


def test_a_read_only_lake_stops_ingest_with_one_line_and_loses_nothing(
    spark, stack: Stack, topic: str, small_disk: Path
) -> None:
    lake = small_disk / "lake"
    produce_many(stack, topic, 3_000)
    assert ingest(stack, topic, lake).returncode == 0
    produce_many(stack, topic, 3_000)
    remount(small_disk, "ro")
    try:
        assert _write_fails(lake)  # for root too
        assert_one_clear_line(ingest(stack, topic, lake, failing=True), "Read-only file system")
    finally:
        remount(small_disk, "rw")
    assert_each_offset_once(spark, lake, "Disk", 3_000)
    done = ingest(stack, topic, lake)
    assert done.returncode == 0, done.stderr
    assert_each_offset_once(spark, lake, "Disk", 6_000)


def remount(folder: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(folder)], check=True)


def _write_fails(folder: Path) -> bool:
    try:
        (folder / "probe").write_text("x")
    except OSError:
        return True
    return False
