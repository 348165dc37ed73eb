"""Where to-kafka may end a Kafka transaction: never inside a source transaction's span."""

from __future__ import annotations

from zync_assets.tokafka.cuts import Cuts, merged


def test_a_cut_inside_a_span_moves_to_its_end() -> None:
    cuts = merged([(10, 12), (3, 5)])
    assert cuts.spans == ((3, 5), (10, 12))
    assert [cuts.allowed(c) for c in (3, 4, 5, 6, 10, 11, 12, 13)] == [3, 6, 6, 6, 10, 13, 13, 13]
    assert cuts.allowed(0) == 0 and cuts.allowed(100) == 100


def test_overlapping_and_touching_spans_merge() -> None:
    # Outputs of two transactions interleaved by the per-key order: [4, 9] and [7, 12]
    # cannot be split apart; [13, 14] touches nothing.
    cuts = merged([(7, 12), (4, 9), (13, 14)])
    assert cuts.spans == ((4, 12), (13, 14))
    assert cuts.allowed(8) == 13 and cuts.allowed(13) == 13 and cuts.allowed(14) == 15


def test_no_spans_cut_anywhere() -> None:
    assert [Cuts().allowed(c) for c in (0, 1, 7)] == [0, 1, 7]
