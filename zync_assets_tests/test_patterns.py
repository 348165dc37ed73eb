"""Inputs named by pattern: what a pattern takes, what it never takes, and spec mistakes."""

from __future__ import annotations

from pathlib import Path

import pytest

from zync_assets.core.errors import ZyncError
from zync_assets.ingest.discovery import Changes, _changes, passed_over, raw_pool_topics
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


WHOLE = """
inputs:
  - {topics: 'db\\.public\\..*', pool: Whole}
transforms:
  - {type: mirror, topics: 'db\\.public\\..*', out: 'wh_{table}', pool: WholeOut}
"""
VIEWS = """
inputs:
  - {topic: db.public.a, pool: POOL}
  - {topic: db.public.b, pool: POOL}
outputs:
  - {topic: ab, pool: ViewsStaging}
transforms:
  - type: view
    inputs: {a: db.public.a, b: db.public.b}
    key: id
    out: ab
    sql: SELECT a.after:id::bigint AS id FROM a JOIN b ON a.after:id = b.after:id
"""


def test_a_pattern_that_another_spec_takes_topics_from_says_so(tmp_path: Path) -> None:
    """A topic feeds one pool: a whole-database spec beside a view spec that names two of
    its tables for a pool of its own would lose their lake tables and mirror, silently."""
    (tmp_path / "whole.yaml").write_text(WHOLE)
    (tmp_path / "views.yaml").write_text(VIEWS.replace("POOL", "ViewsRaw"))
    whole, views = load_spec(tmp_path / "whole.yaml"), load_spec(tmp_path / "views.yaml")
    assert raw_pool_topics([whole, views], ["db.public.a", "db.public.b", "db.public.c"]) == {
        "Whole": ["db.public.c"], "ViewsRaw": ["db.public.a", "db.public.b"],
    }  # fmt: skip
    assert passed_over([whole, views]) == [
        "pool Whole: whole.yaml's pattern 'db\\.public\\..*' leaves db.public.a, db.public.b "
        "to pool ViewsRaw, where views.yaml names them (a topic feeds one pool): whole.yaml's "
        "rules and lake tables skip them; name them for pool Whole in views.yaml to have both"
    ]
    # Named for the pattern's own pool, both specs read them: nothing to say.
    (tmp_path / "views.yaml").write_text(VIEWS.replace("POOL", "Whole"))
    views = load_spec(tmp_path / "views.yaml")
    assert raw_pool_topics([whole, views], ["db.public.a", "db.public.c"])["Whole"] == [
        "db.public.a", "db.public.b", "db.public.c",
    ]  # fmt: skip
    assert passed_over([whole, views]) == []
    # One spec routing its own topic elsewhere meant it (the test above): nothing said.
    assert passed_over([load_spec(write(tmp_path, SPEC))]) == []
