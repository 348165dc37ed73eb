"""The CPU a test's process tree uses (support/process_tree.py), which the suite's report ranks
tests by: a child's work counts, and only the part done after the start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from zync_assets_tests.support import process_tree as cpu

BURN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"


def test_a_childs_work_counts_once_it_has_been_waited_for() -> None:
    before = cpu.tree_cpu()
    subprocess.run([sys.executable, "-c", BURN.format(s=0.6)], check=True)
    assert cpu.used_since(before) >= 0.5


def test_what_a_child_used_before_the_start_is_not_counted() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", BURN.format(s=1.0) + "input()\n" + BURN.format(s=0.3)],
        stdin=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while cpu.tree_cpu().get(child.pid, 0.0) < 0.9:  # its first second of work is done
        assert time.monotonic() < deadline
        time.sleep(0.05)
    before = cpu.tree_cpu()
    child.communicate("\n", timeout=30)  # it does 0.3 s more, exits, is waited for
    used = cpu.used_since(before)
    assert 0.2 <= used < 0.8, used  # not its whole 1.3 s life


def test_a_descendant_handed_to_init_takes_nothing_off() -> None:
    """A process whose parent exits without waiting for it leaves the tree alive (init
    adopts it): none of its CPU moved into the tree, so none is taken off what the tree
    used (the suite once counted 0 s for a test here, its worker's orphan taken off)."""
    orphan_code = "import subprocess, sys; " + (
        f"p = subprocess.Popen([sys.executable, '-c', {BURN.format(s=30)!r}], "
        "stdout=subprocess.DEVNULL); "
        "print(p.pid, flush=True); input()"
    )
    child = subprocess.Popen([sys.executable, "-c", orphan_code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert child.stdout is not None
    orphan = int(child.stdout.readline())
    try:
        deadline = time.monotonic() + 30
        while cpu.tree_cpu().get(orphan, 0.0) < 0.9:  # it has worked, inside the tree
            assert time.monotonic() < deadline
            time.sleep(0.05)
        before = cpu.tree_cpu()
        child.communicate("\n", timeout=30)  # exits without waiting: the orphan goes to init
        subprocess.run([sys.executable, "-c", BURN.format(s=0.6)], check=True)
        assert orphan not in cpu.tree_cpu()
        assert cpu.used_since(before) >= 0.5
    finally:
        os.kill(orphan, signal.SIGKILL)
