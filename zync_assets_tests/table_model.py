"""A reference model of lake tables: every change event ever seen, folded in sequence order.

It keeps all events (no state, no passes, no windows) and answers what a table must
hold: SCD1, each key's newest row unless its newest event deletes it; SCD2, each key's
versions. It is what docs/specs.md#tables says, written as plainly as possible, so the
real table (incremental MERGEs over passes, out-of-order and duplicated events) can be
compared with it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Change:
    key: int
    seq: int | None  # None: no sequence (Debezium's tombstone): changes nothing
    delete: bool
    row: tuple | None  # the data columns, in a fixed order; None for a delete


class TableModel:
    def __init__(self, tracked: list[int]) -> None:
        self.tracked = tracked  # SCD2: indexes of the row's tracked columns
        self.events: dict[int, dict[int, Change]] = {}  # key → seq → event (one per seq)

    def add(self, change: Change) -> None:
        if change.seq is None or (change.row is None and not change.delete):
            return
        self.events.setdefault(change.key, {})[change.seq] = change  # a duplicate: once

    def _ordered(self, key: int) -> list[Change]:
        return [self.events[key][s] for s in sorted(self.events[key])]

    def scd1(self) -> dict[int, tuple]:
        """key → (row, sequence) for every key whose newest event is no delete."""
        table = {}
        for key in self.events:
            newest = self._ordered(key)[-1]
            if not newest.delete:
                table[key] = (newest.row, newest.seq)
        return table

    def scd2(self) -> dict[tuple[int, int], tuple]:
        """(key, start) → (row, end, last sequence): each key's versions."""
        table: dict[tuple[int, int], tuple] = {}
        for key in self.events:
            open_start: int | None = None
            open_row: tuple | None = None
            last = None
            for event in self._ordered(key):
                if event.delete:
                    if open_start is not None:
                        table[(key, open_start)] = (open_row, event.seq, last)
                    open_start = None
                    continue
                assert event.row is not None
                if open_start is not None and self._same_tracked(open_row, event.row):
                    open_row, last = event.row, event.seq  # untracked columns: in place
                    continue
                if open_start is not None:
                    table[(key, open_start)] = (open_row, event.seq, last)
                open_start, open_row, last = event.seq, event.row, event.seq
            if open_start is not None:
                table[(key, open_start)] = (open_row, None, last)
        return table

    def _same_tracked(self, a: tuple | None, b: tuple) -> bool:
        return a is not None and all(a[i] == b[i] for i in self.tracked)
