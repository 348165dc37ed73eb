"""Where to-kafka may end a Kafka transaction: never inside a source transaction, in any of
the pool's topics."""

from __future__ import annotations

from zync_assets.tokafka.cuts import Cuts, cuts_of


def test_an_end_inside_a_transaction_moves_to_its_end() -> None:
    cuts = cuts_of([("a", "out", 10, 12), ("b", "out", 3, 5)])
    ends = [cuts.ends({"out": 0}, {"out": c})["out"] for c in (3, 4, 5, 6, 10, 11, 12, 13)]
    assert ends == [3, 6, 6, 6, 10, 13, 13, 13]
    assert cuts.ends({"out": 0}, {"out": 0}) == {"out": 0}
    assert cuts.ends({"out": 0}, {"out": 100}) == {"out": 100}


def test_overlapping_transactions_go_together() -> None:
    # Outputs of two transactions interleaved by the per-key order: [4, 9] and [7, 12]
    # cannot be split apart; [13, 14] touches neither.
    cuts = cuts_of([("a", "out", 7, 12), ("b", "out", 4, 9), ("c", "out", 13, 14)])
    assert cuts.ends({"out": 0}, {"out": 8}) == {"out": 13}
    assert cuts.ends({"out": 13}, {"out": 14}) == {"out": 15}
    assert cuts.ends({"out": 13}, {"out": 13}) == {"out": 13}


def test_a_transaction_in_two_topics_pulls_both_ends_past_it() -> None:
    # t1: orders 0, items 0-1; t2: orders 1-2, items 2; t3: items 3 and orders 3.
    cuts = cuts_of([
        ("t1", "orders", 0, 0), ("t1", "items", 0, 1),
        ("t2", "orders", 1, 2), ("t2", "items", 2, 2),
        ("t3", "orders", 3, 3), ("t3", "items", 3, 3),
    ])  # fmt: skip
    start = {"orders": 0, "items": 0}
    # One record of orders asked: t1 whole, nothing of items' t2.
    assert cuts.ends(start, {"orders": 1, "items": 0}) == {"orders": 1, "items": 2}
    # One record of items asked: t1 too, from the other side.
    assert cuts.ends(start, {"orders": 0, "items": 1}) == {"orders": 1, "items": 2}
    # Items 0-2 asked: t1 and t2 whole in both.
    assert cuts.ends(start, {"orders": 0, "items": 3}) == {"orders": 3, "items": 3}
    # From after t1: t2, then t3 when a record of it is asked.
    after_t1 = {"orders": 1, "items": 2}
    assert cuts.ends(after_t1, {"orders": 2, "items": 2}) == {"orders": 3, "items": 3}
    assert cuts.ends(after_t1, {"orders": 3, "items": 4}) == {"orders": 4, "items": 4}


def test_a_chain_of_transactions_across_topics_is_closed_over() -> None:
    # Each transaction overlaps the next in one topic or the other: asking for the first
    # record takes the whole chain.
    cuts = cuts_of([
        ("a", "x", 0, 1), ("a", "y", 5, 5),
        ("b", "y", 4, 6), ("b", "x", 7, 7),
        ("c", "x", 6, 9),
    ])  # fmt: skip
    assert cuts.ends({"x": 0, "y": 4}, {"x": 1, "y": 4}) == {"x": 10, "y": 7}


def test_no_transactions_end_anywhere_asked() -> None:
    assert Cuts().ends({"out": 0, "other": 5}, {"out": 7}) == {"out": 7, "other": 5}
