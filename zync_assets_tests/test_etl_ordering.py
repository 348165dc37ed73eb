"""Per-key order of ETL outputs when events wait: issue 15's regressions.

The shape users write (cdc_streams.SPEC): orders (left) denormalized with payments
(right) into one output row per order, and stateless rules for payment and order
updates writing partial rows of the same output key. A JDBC sink upserting by key
must end with the latest values.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from zync_assets_tests.cdc_streams import SPEC
from zync_assets_tests.conftest import Stack
from zync_assets_tests.etl_model import sink_table
from zync_assets_tests.test_etl import Pipeline, dbz

pytestmark = pytest.mark.integration


@pytest.fixture
def shop(spark, stack: Stack, tmp_path: Path, lake: Path) -> Pipeline:
    return Pipeline(spark, stack, tmp_path, SPEC, ["Orders", "Payments", "Out"])


def _sink(outputs: list[tuple[int, dict, dict]]) -> dict[str, dict]:
    return sink_table([(key, value) for _offset, key, value in outputs])


def test_a_right_side_update_follows_the_pair_of_its_create(shop: Pipeline) -> None:
    """Payment create + update in one pass, the order in a later pass: the update was
    blocked behind the create, so its output must follow the pair's."""
    shop.send("Payments", [
        ({"id": 7}, dbz("c", id=7, order_id=1, status="authorized", amount=10)),
        ({"id": 7}, dbz("u", id=7, order_id=1, status="captured", amount=12)),
    ])  # fmt: skip
    shop.ingest()
    first = shop.etl()
    assert (first.run, first.pending) == (None, 2)
    shop.send("Orders", [({"id": 1}, dbz("c", id=1, item="taco"))])
    shop.ingest()
    second = shop.etl()
    assert (second.done, second.pending) == (3, 0)
    outputs = shop.outputs()
    assert [(o, v["status"]) for o, _k, v in outputs] == [(0, "authorized"), (1, "captured")]
    assert _sink(outputs) == {
        '{"id": 1}': {"id": 1, "item": "taco", "status": "captured", "amount": 12}
    }


def test_a_left_side_update_follows_the_pair_of_its_create(shop: Pipeline) -> None:
    """The mirror: order create + update in one pass, its payment in a later pass."""
    shop.send("Orders", [
        ({"id": 1}, dbz("c", id=1, item="taco")),
        ({"id": 1}, dbz("u", id=1, item="burrito")),
    ])  # fmt: skip
    shop.ingest()
    assert shop.etl().pending == 2
    shop.send("Payments", [({"id": 7}, dbz("c", id=7, order_id=1, status="new", amount=5))])
    shop.ingest()
    assert shop.etl().done == 3
    outputs = shop.outputs()
    assert [(o, v["item"]) for o, _k, v in outputs] == [(0, "taco"), (1, "burrito")]
    assert _sink(outputs) == {
        '{"id": 1}': {"id": 1, "item": "burrito", "status": "new", "amount": 5}
    }


def test_the_order_holds_transitively_across_both_sides(shop: Pipeline) -> None:
    """An order update waits behind its create; the create pairs with a payment whose
    own update waited too; the payment's partner order came last. Every update must
    follow the pair it waited behind, whichever side it is on."""
    shop.send("Payments", [
        ({"id": 7}, dbz("c", id=7, order_id=1, status="authorized", amount=10)),
        ({"id": 7}, dbz("u", id=7, order_id=1, status="captured", amount=12)),
    ])  # fmt: skip
    shop.ingest()
    shop.etl()
    shop.send("Orders", [
        ({"id": 1}, dbz("c", id=1, item="taco")),
        ({"id": 1}, dbz("u", id=1, item="burrito")),
    ])  # fmt: skip
    shop.ingest()
    shop.etl()
    outputs = shop.outputs()
    assert [o for o, _k, _v in outputs] == [0, 1, 2]
    assert outputs[0][2]["status"] == "authorized" and outputs[0][2]["item"] == "taco"
    assert _sink(outputs) == {
        '{"id": 1}': {"id": 1, "item": "burrito", "status": "captured", "amount": 12}
    }
