"""The joins of a view's SQL: which input rows a change of one row can reach.

A view whose SQL is one SELECT over its inputs, each joined to an earlier one by
equalities (inner, left, right or full joins; filters, projections and computed columns
anywhere), yields each output row from one row of each input, or from none on the outer
side of a join. A change of a row can then alter only the output rows built from that
row, and views.py finds them by following the join equalities from the changed rows,
instead of evaluating the SQL over every current row. Anything else gives None and the
view is evaluated over all current rows each pass: an aggregate, DISTINCT, a window, a
subquery, a set operation, LIMIT, a join without an equality between its two sides, an
input read twice, or joins that close a cycle.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

DIALECT = "databricks"  # Spark SQL with the `after:field` path syntax of VARIANTs

# Nodes whose output row is not made from one row of each input.
_WHOLE_TABLE = (
    exp.AggFunc, exp.Window, exp.Subquery, exp.Lateral, exp.Union, exp.Except,
    exp.Intersect, exp.Values, exp.Unnest,
)  # fmt: skip
_WHOLE_TABLE_CLAUSES = ("distinct", "group", "having", "limit", "offset", "qualify")


@dataclass(frozen=True)
class JoinEdge:
    """Two inputs joined where `left_values` (Spark SQL over `left`'s columns) equal
    `right_values` (over `right`'s), pairwise."""

    left: str
    right: str
    left_values: tuple[str, ...]
    right_values: tuple[str, ...]
    preserved: frozenset[str]  # the side(s) an outer join keeps without a partner

    def values(self, name: str) -> tuple[str, ...]:
        return self.left_values if name == self.left else self.right_values

    def other(self, name: str) -> str:
        return self.right if name == self.left else self.left


@dataclass(frozen=True)
class JoinGraph:
    """A view's inputs as a tree of equi-joins; edges name each input as the SQL reads it
    (its alias, or its own name)."""

    tables: tuple[tuple[str, str], ...]  # (name in the SQL, input), in the SQL's order
    edges: tuple[JoinEdge, ...]

    def edges_of(self, name: str) -> list[tuple[int, JoinEdge]]:
        return [(i, e) for i, e in enumerate(self.edges) if name in (e.left, e.right)]


def join_graph(sql: str, names: Iterable[str]) -> JoinGraph | None:
    """The joins of a view's SQL over its inputs `names`; None: not a tree of equi-joins
    of every input, read once each (the view is then evaluated whole)."""
    inputs = set(names)
    try:
        tree = sqlglot.parse_one(sql, read=DIALECT)
    except sqlglot.errors.SqlglotError:
        return None
    if not isinstance(tree, exp.Select) or _whole_table(tree):
        return None
    first = _table(tree.args.get("from_"))
    if first is None:
        return None
    tables, edges = [first], []
    for join in tree.args.get("joins") or []:
        table = _table(join)
        if table is None or join.args.get("using"):
            return None
        edge = _edge(join, table[0], [name for name, _ in tables])
        if edge is None:
            return None
        tables.append(table)
        edges.append(edge)
    read = [table for _, table in tables]
    if len(set(read)) != len(read) or set(read) != inputs:
        return None  # an input read twice, or not read (nothing of it reaches an output)
    return JoinGraph(tuple(tables), tuple(edges))


def _whole_table(tree: exp.Select) -> bool:
    if any(tree.args.get(clause) for clause in _WHOLE_TABLE_CLAUSES):
        return True
    if any(isinstance(node, _WHOLE_TABLE) for node in tree.walk()):
        return True
    return any(isinstance(node, exp.Select) and node is not tree for node in tree.walk())


def _table(node: exp.Expr | None) -> tuple[str, str] | None:
    """(name in the SQL, input) of the table a FROM or JOIN reads; None: not a table."""
    table = None if node is None else node.this
    if not isinstance(table, exp.Table) or table.args.get("db"):
        return None
    return table.alias_or_name, table.name


def _edge(join: exp.Join, name: str, earlier: list[str]) -> JoinEdge | None:
    """The equalities between the joined input `name` and one earlier input; None: none,
    or equalities with two earlier inputs (a cycle)."""
    pairs: list[tuple[str, str]] = []
    other = None
    on = join.args.get("on")
    for term in on.flatten() if isinstance(on, exp.And) else [on] if on is not None else []:
        sides = _equality(term, name, earlier)
        if sides is None:
            continue  # a filter of the join: it narrows partners, never widens them
        if other not in (None, sides[0]):
            return None
        other = sides[0]
        pairs.append(sides[1:])
    if other is None:
        return None
    side = (join.side or "").upper()
    preserved = {"LEFT": {other}, "RIGHT": {name}, "FULL": {other, name}}.get(side, set())
    return JoinEdge(
        left=other, right=name, left_values=tuple(p[0] for p in pairs),
        right_values=tuple(p[1] for p in pairs), preserved=frozenset(preserved),
    )  # fmt: skip


def _equality(term: exp.Expr, name: str, earlier: list[str]) -> tuple[str, str, str] | None:
    """(earlier input, its side, `name`'s side) of `earlier.x = name.y`, else None."""
    if not isinstance(term, exp.EQ):
        return None
    left, right = _only_input(term.left), _only_input(term.right)
    if left == name and right in earlier:
        return right, term.right.sql(DIALECT), term.left.sql(DIALECT)
    if right == name and left in earlier:
        return left, term.left.sql(DIALECT), term.right.sql(DIALECT)
    return None


def _only_input(side: exp.Expr) -> str | None:
    """The one input whose columns `side` reads (qualified), else None."""
    tables = {column.table for column in side.find_all(exp.Column)}
    return tables.pop() if len(tables) == 1 and "" not in tables else None
