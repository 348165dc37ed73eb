"""Inputs named by pattern: what a pattern takes, what it never takes, and spec mistakes."""

from __future__ import annotations

from pathlib import Path

import pytest

from zync_assets.core.errors import ZyncError
from zync_assets.ingest.discovery import Changes, _changes, raw_pool_topics
from zync_assets.specs.model import load_spec
from zync_assets.specs.patterns import TopicPattern, matching_topics

SPEC = """
inputs:
  - {topics: 'shop\\.public\\..*', exclude: ['shop\\.public\\.audit_.*'], pool: Shop}
  - {topic: shop.public.invoices, pool: Invoices}
outputs:
  - {topic: shop.public.invoices_out, pool: Staging}
transforms:
  - {type: stateless, in: shop.public.invoices, out: shop.public.invoices_out, sql: "in.key AS key, in.after AS value"}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mirror.yaml"
    path.write_text(text)
    return path


def test_a_pattern_takes_whole_names_and_leaves_its_exclusions() -> None:
    pattern = TopicPattern(r"shop\.public\..*", "Shop", exclude=(r"shop\.public\.audit_.*",))
    assert pattern.matches("shop.public.orders")
    assert not pattern.matches("shop.public.audit_log")  # excluded
    assert not pattern.matches("xshop.public.orders")  # the whole name, as topics.regex
    assert not pattern.matches("shop.publicx")


def test_plumbing_and_zyncs_own_topics_never_match_even_everything() -> None:
    everything = [TopicPattern(".*", "All")]
    available = [
        "shop.public.orders", "__consumer_offsets", "_schemas", "__debezium-heartbeat.shop",
        "zync-connect-configs", "zync-connect-offsets", "zync-connect-status",
        "shop.transaction", "shop.public.order-status", "orders_out",
    ]  # fmt: skip
    taken = matching_topics(everything, available, written=["orders_out"])
    # A table's topic ending in -status is a table's (it has dots); Connect's own has none.
    assert taken == ["shop.public.order-status", "shop.public.orders"]


def test_a_pool_reads_its_named_topics_then_what_its_patterns_take(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, SPEC))
    assert spec.raw_pools() == {"Shop": [], "Invoices": ["shop.public.invoices"]}
    available = [
        "shop.public.invoices", "shop.public.invoices_out", "shop.public.orders",
        "shop.public.audit_trail", "shop.public.customers", "other.public.orders",
    ]  # fmt: skip
    pools = raw_pool_topics([spec], available)
    # invoices is named for its own pool; invoices_out is zync's output.
    assert pools == {
        "Shop": ["shop.public.customers", "shop.public.orders"],
        "Invoices": ["shop.public.invoices"],
    }
    assert spec.formats(pools["Shop"])["shop.public.orders"].value == "avro"
    assert raw_pool_topics([spec], None)["Shop"] == []  # Kafka not asked: named topics only


def test_discovery_reports_topics_that_appear_and_disappear() -> None:
    before = {"Shop": ["shop.public.a", "shop.public.b"]}
    after = {"Shop": ["shop.public.b", "shop.public.c"]}
    changes = _changes(before, after)
    assert changes == Changes(
        appeared={"Shop": ["shop.public.c"]}, gone={"Shop": ["shop.public.a"]}
    )
    assert changes.lines() == [
        "pool Shop: new topics shop.public.c (read from their first offset)",
        "pool Shop: topics shop.public.a are gone from Kafka; the pool keeps what it "
        "ingested of them",
    ]
    assert _changes(None, after) == Changes()  # the first discovery is no change


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("{topics: 'shop.(', pool: Shop}", "inputs[1] topics: not a regular expression"),
        ("{topics: '', pool: Shop}", "inputs[1] topics: expected a regular expression"),
        ("{topics: 'a.*', exclude: ['b(('], pool: Shop}", "inputs[1] exclude: not a regular"),
        ("{topics: 'a.*', exclude: {x: 1}, pool: Shop}", "inputs[1] exclude: expected a list"),
        ("{topics: 'a.*'}", "inputs[1]: expected {topics: <regular expression>, pool: ...}"),
        ("{topics: 'a.*', pool: 'bad pool'}", "inputs[1]: invalid pool name 'bad pool'"),
        ("{topics: 'a.*', pool: Shop, format: xml}", "inputs[1]: "),
    ],
)
def test_a_bad_pattern_input_is_one_line_naming_the_entry(
    tmp_path: Path, entry: str, message: str
) -> None:
    with pytest.raises(ZyncError) as caught:
        load_spec(write(tmp_path, f"inputs:\n  - {entry}\n"))
    assert message in str(caught.value) and "\n" not in str(caught.value), caught.value


def test_a_topic_two_pools_patterns_take_feeds_the_first(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("inputs:\n  - {topics: 'shop\\..*', pool: First}\n")
    (tmp_path / "b.yaml").write_text("inputs:\n  - {topics: '.*\\.orders', pool: Second}\n")
    from zync_assets.specs.model import load_specs

    pools = raw_pool_topics(load_specs(tmp_path), ["shop.orders", "bar.orders", "shop.items"])
    assert pools == {"First": ["shop.items", "shop.orders"], "Second": ["bar.orders"]}
