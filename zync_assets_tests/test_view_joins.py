"""Reading a view's joins from its SQL (etl/view_joins.py): which views are evaluated over
the rows a change reaches, and which whole. Pure: no Spark."""

from __future__ import annotations

import pytest

from zync_assets.etl.view_joins import JoinEdge, join_graph

ACCOUNTS = """
SELECT a.after:id::bigint AS id, c.after:name::string AS customer
FROM a LEFT JOIN c ON a.after:customer_id::bigint = c.after:id::bigint
  AND c.after:tier::string <> 'blocked'
WHERE a.after:balance::bigint > 0
"""


def test_a_left_join_keeps_its_left_side_and_its_equality_not_its_filter() -> None:
    graph = join_graph(ACCOUNTS, ["a", "c"])
    assert graph is not None
    assert graph.tables == (("a", "a"), ("c", "c"))
    assert graph.edges == (
        JoinEdge(
            left="a", right="c", left_values=("CAST(a.after:customer_id AS BIGINT)",),
            right_values=("CAST(c.after:id AS BIGINT)",), preserved=frozenset({"a"}),
        ),
    )  # fmt: skip


def test_aliases_inner_right_and_full_joins_and_a_composite_equality() -> None:
    sql = """SELECT * FROM orders o JOIN lines l ON l.after:order::int = o.after:id::int
             RIGHT JOIN items i ON i.after:sku = l.after:sku AND l.after:shop = i.after:shop
             FULL JOIN notes n ON n.after:order::int = o.after:id::int"""
    graph = join_graph(sql, ["orders", "lines", "items", "notes"])
    assert graph is not None
    assert dict(graph.tables) == {"o": "orders", "l": "lines", "i": "items", "n": "notes"}
    inner, right, full = graph.edges
    assert (inner.left, inner.right, inner.preserved) == ("o", "l", frozenset())
    assert (right.left, right.right, right.preserved) == ("l", "i", frozenset({"i"}))
    assert right.left_values == ("l.after:sku", "l.after:shop")
    assert right.right_values == ("i.after:sku", "i.after:shop")
    assert (full.left, full.right, full.preserved) == ("o", "n", frozenset({"o", "n"}))


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT c.after:id AS id, count(*) AS n FROM a JOIN c ON a.x = c.y GROUP BY 1",
        "SELECT DISTINCT a.after:id AS id FROM a JOIN c ON a.x = c.y",
        "SELECT a.after:id AS id, row_number() OVER (ORDER BY 1) AS n FROM a JOIN c ON a.x = c.y",
        "SELECT a.after:id AS id FROM a JOIN c ON a.x = c.y LIMIT 5",
        "SELECT a.after:id AS id FROM a JOIN c ON a.x = c.y WHERE a.z IN (SELECT 1)",
        "SELECT a.after:id AS id FROM a JOIN c ON a.x > c.y",  # no equality
        "SELECT a.after:id AS id FROM a, c WHERE a.x = c.y",  # a cross join, then a filter
        "SELECT a.after:id AS id FROM a JOIN c USING (key)",
        "SELECT a.after:id AS id FROM a JOIN c ON a.x = c.y JOIN a AS b ON b.x = c.y",
        "SELECT a.after:id AS id FROM a JOIN c ON a.x = c.y JOIN r ON r.x = a.x AND r.y = c.y",
        "SELECT a.after:id AS id FROM a",  # c is not read
        "SELECT a.after:id AS id FROM a JOIN c ON a.x = c.y UNION SELECT 1 AS id",
        "SELECT a.after:id AS id FROM a JOIN c ON x = c.y",  # whose x?
        "SELECT a.after:id AS id FROM a JOIN c ON (",  # not SQL
    ],
)
def test_what_is_not_a_tree_of_equi_joins_is_evaluated_whole(sql: str) -> None:
    assert join_graph(sql, ["a", "c"] if " r " not in sql else ["a", "c", "r"]) is None
