"""CPU seconds and memory of a process and its descendants, read from /proc.

On two loaded cores a test's wall time says more about its neighbours than about the
test; the CPU it and its children (its `zync` processes, its Spark JVM's work) use is
what another test waits for. conftest.py records each test's as a JUnit property.
"""

from __future__ import annotations

import os

_TICK = os.sysconf("SC_CLK_TCK")


_PAGE = os.sysconf("SC_PAGE_SIZE")


def _processes() -> dict[int, tuple[int, float, int]]:
    """pid → (parent pid, CPU seconds of the process and of its children it has waited for,
    resident bytes)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                text = stat.read()
        except OSError:  # gone meanwhile
            continue
        fields = text[text.rfind(")") + 2 :].split()  # the name may hold spaces
        # utime, stime, cutime, cstime: fields 14-17 of proc(5), 11-14 after the name;
        # rss (pages): field 24, 21 after the name
        cpu = sum(int(f) for f in fields[11:15]) / _TICK
        found[int(entry)] = (int(fields[1]), cpu, int(fields[21]) * _PAGE)
    return found


def _descendants(processes: dict[int, tuple[int, float, int]], root: int) -> list[int]:
    """`root` and every live process below it."""
    children: dict[int, list[int]] = {}
    for pid, (parent, *_) in processes.items():
        children.setdefault(parent, []).append(pid)
    seen: list[int] = []
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in processes and pid not in seen:
            seen.append(pid)
            todo.extend(children.get(pid, []))
    return seen


class CpuSeconds(dict[int, float]):
    """CPU seconds by pid (`tree_cpu`), with each process's parent then."""

    def __init__(self, seconds: dict[int, float], parents: dict[int, int]) -> None:
        super().__init__(seconds)
        self.parents = parents


def tree_cpu() -> CpuSeconds:
    """CPU seconds of this process and of each live descendant, by pid."""
    processes = _processes()
    tree = _descendants(processes, os.getpid())
    return CpuSeconds(
        {pid: processes[pid][1] for pid in tree}, {pid: processes[pid][0] for pid in tree}
    )


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds process `root` and its live descendants have used (those it waited
    for included)."""
    processes = _processes()
    return sum(processes[pid][1] for pid in _descendants(processes, root))


def tree_rss_mib(root: int) -> float:
    """Resident memory of process `root` and all its descendants, in MiB."""
    processes = _processes()
    return sum(processes[pid][2] for pid in _descendants(processes, root)) / 2**20


def used_since(before: CpuSeconds) -> float:
    """CPU seconds this process tree used since `before` (a `tree_cpu()`).

    A descendant that ended meanwhile counts through the parent that waited for it: its
    whole life moved into that parent's figure, so what it had used before is taken off,
    up to what that parent's figure grew. One whose parent did not wait for it (or left
    the tree itself, so that it was handed to init) moved nothing, and nothing is taken.
    """
    now = tree_cpu()
    grew = {pid: seconds - before.get(pid, 0.0) for pid, seconds in now.items()}
    used = sum(grew.values())
    for pid, seconds in before.items():
        parent = before.parents.get(pid)
        if pid not in now and parent in grew:
            taken = min(seconds, max(0.0, grew[parent]))
            grew[parent] -= taken
            used -= taken
    return max(0.0, used)


def tree_states(root: int) -> list[tuple[int, str, int, str]]:
    """`root` and each live process below it: (pid, state letter of proc(5): `T` for
    stopped, process group, name)."""
    processes = _processes()
    found = []
    for pid in _descendants(processes, root):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                text = stat.read()
        except OSError:  # gone meanwhile
            continue
        name = text[text.find("(") + 1 : text.rfind(")")]
        fields = text[text.rfind(")") + 2 :].split()  # state, ppid, pgrp, …
        found.append((pid, fields[0], int(fields[2]), name))
    return found
