"""CPU seconds used by a process and its descendants, read from /proc.

On two loaded cores a test's wall time says more about its neighbours than about the
test; the CPU it and its children (its `zync` processes, its Spark JVM's work) use is
what another test waits for. conftest.py records each test's as a JUnit property.
"""

from __future__ import annotations

import os

_TICK = os.sysconf("SC_CLK_TCK")


def _processes() -> dict[int, tuple[int, float]]:
    """pid → (parent pid, CPU seconds of the process and of its children it has waited for)."""
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
        # utime, stime, cutime, cstime: fields 14-17 of proc(5), 11-14 after the name
        found[int(entry)] = (int(fields[1]), sum(int(f) for f in fields[11:15]) / _TICK)
    return found


def tree_cpu() -> dict[int, float]:
    """CPU seconds of this process and of each live descendant, by pid."""
    processes = _processes()
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in processes.items():
        children.setdefault(parent, []).append(pid)
    seen: dict[int, float] = {}
    todo = [os.getpid()]
    while todo:
        pid = todo.pop()
        if pid in processes and pid not in seen:
            seen[pid] = processes[pid][1]
            todo.extend(children.get(pid, []))
    return seen


def used_since(before: dict[int, float]) -> float:
    """CPU seconds this process tree used since `before` (a `tree_cpu()`).

    A descendant that ended meanwhile counts through the parent that waited for it: its
    whole life moved into that parent's figure, so what it had used before is taken off.
    """
    now = tree_cpu()
    used = sum(seconds - before.get(pid, 0.0) for pid, seconds in now.items())
    ended = sum(seconds for pid, seconds in before.items() if pid not in now)
    return max(0.0, used - ended)
