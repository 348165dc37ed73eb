"""A whole source database for the mirror example, its test and its benchmark: tables of
several shapes, a workload over all of them, and each table's rows as the source, a
lake table and the warehouse hold them, in one comparable form.

The shapes, cycled over the tables: a plain row (bigint key, text, numeric, date,
boolean), a UUID key, a composite key (text, int), a wide row (30 columns), a TOASTed
text column (20,000 characters, stored out of line: an update that leaves it alone
carries Debezium's placeholder), and the types a real schema has somewhere (an integer
key, jsonb, text[], an enum no row has a value for yet, numeric(18,4), uuid, smallint;
NULL in some rows), which the warehouse must get in the source's column types. `nopk` has no primary key: Debezium keys its
messages by nothing, so its spec leaves it out (docs/debezium.md says what to do).
"""

from __future__ import annotations

import datetime as dt
import json
import random
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

SHAPES = ("plain", "uuid", "composite", "wide", "toasted", "typed")
ENUM_DDL = "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')"
WIDE_COLUMNS = 30


@dataclass(frozen=True)
class Table:
    name: str
    shape: str

    @property
    def keys(self) -> tuple[str, ...]:
        return ("region", "num") if self.shape == "composite" else ("id",)

    @property
    def columns(self) -> list[str]:
        if self.shape == "plain":
            return ["id", "name", "amount", "day", "flag"]
        if self.shape == "uuid":
            return ["id", "name", "amount"]
        if self.shape == "composite":
            return ["region", "num", "name"]
        if self.shape == "wide":
            return ["id", *(f"c{i:02d}" for i in range(WIDE_COLUMNS))]
        if self.shape == "typed":
            return ["id", "attrs", "labels", "tag", "amount", "ref", "small"]
        return ["id", "name", "bio"]

    @property
    def documents(self) -> frozenset[str]:
        """Its JSON columns: read as their text, so that the document null is not NULL."""
        return frozenset({"attrs"}) if self.shape == "typed" else frozenset()

    def select_list(self) -> str:
        """Its columns for a SELECT, each JSON one as its text."""
        return ", ".join(f"{c}::text" if c in self.documents else c for c in self.columns)

    def document_positions(self) -> frozenset[int]:
        return frozenset(i for i, c in enumerate(self.columns) if c in self.documents)

    def ddl(self) -> str:
        types = {
            "plain": "id bigint PRIMARY KEY, name text, amount numeric(10, 2), day date, "
            "flag boolean",
            "uuid": "id uuid PRIMARY KEY, name text, amount numeric(10, 2)",
            "composite": "region text, num int, name text, PRIMARY KEY (region, num)",
            "wide": "id bigint PRIMARY KEY, "
            + ", ".join(f"c{i:02d} {'text' if i % 2 else 'bigint'}" for i in range(WIDE_COLUMNS)),
            "toasted": "id bigint PRIMARY KEY, name text, bio text",
            "typed": "id integer PRIMARY KEY, attrs jsonb, labels text[], tag mood, "
            "amount numeric(18, 4), ref uuid, small smallint",
        }[self.shape]
        external = (
            f"; ALTER TABLE {self.name} ALTER COLUMN bio SET STORAGE EXTERNAL"
            if self.shape == "toasted"
            else ""
        )
        return f"CREATE TABLE {self.name} ({types}){external}"

    def row(self, n: int, version: int = 0) -> list[Any]:
        """Row `n` at `version` (its key stays; the rest changes with the version)."""
        name = f"{self.name}-{n}-v{version}"
        if self.shape == "plain":
            day = dt.date(2024, 1, 1) + dt.timedelta(days=n + version)
            return [n, name, Decimal(n * 100 + version) / 4, day, (n + version) % 2 == 0]
        if self.shape == "uuid":
            return [uuid.UUID(int=n + 1), name, Decimal(n) + Decimal("0.25") * version]
        if self.shape == "composite":
            return [("north", "south")[n % 2], n, name]
        if self.shape == "wide":
            return [n, *(f"{name}/{i}" if i % 2 else n * i + version for i in range(WIDE_COLUMNS))]
        if self.shape == "typed":
            attrs = (
                None if n % 3 == 0  # SQL NULL
                else "null" if n % 7 == 1  # the JSON document null: not the same
                else json.dumps({"n": n, "v": version, "tags": ["a", None]})
            )  # fmt: skip
            labels = None if n % 4 == 0 else [f"l{n}", "x y"]
            amount = Decimal(n * 10_000 + version) / 10_000
            return [n, attrs, labels, None, amount, uuid.UUID(int=n + version), n % 100]
        bio = (f"{self.name}:{n}:" * 1500)[:20_000]  # the same bio each version: TOAST
        return [n, name, bio]


def tables(count: int) -> list[Table]:
    return [Table(f"t{i:02d}", SHAPES[i % len(SHAPES)]) for i in range(1, count + 1)]


NOPK_DDL = "CREATE TABLE nopk (note text, at date)"


def whole_spec(prefix: str) -> str:
    """The whole spec, for Debezium's topic prefix `prefix`: every table but `nopk` as a
    lake table, and mirrored to `<prefix>_wh_<table>` for the warehouse."""
    return (
        "inputs:\n"
        f"  - {{topics: '{prefix}\\.public\\..*', exclude: ['{prefix}\\.public\\.nopk'], "
        "pool: Whole}\n"
        "transforms:\n"
        f"  - {{type: mirror, topics: '{prefix}\\.public\\..*', out: '{prefix}_wh_{{table}}', "
        "pool: WholeOut}\n"
        "tables:\n"
        f"  - {{topics: '{prefix}\\.public\\..*', name: '{{table}}'}}\n"
    )


def schema_ddl(chosen: Iterable[Table]) -> str:
    chosen = list(chosen)
    types = [ENUM_DDL] if any(t.shape == "typed" for t in chosen) else []
    return ";\n".join([*types, *(t.ddl() for t in chosen), NOPK_DDL]) + ";"


def insert(conn: Any, table: Table, n: int, version: int = 0) -> None:
    marks = ", ".join(["%s"] * len(table.columns))
    conn.execute(
        f"INSERT INTO {table.name} ({', '.join(table.columns)}) VALUES ({marks})",
        table.row(n, version),
    )


def update(conn: Any, table: Table, n: int, version: int) -> None:
    """Every column but the key (and a TOASTed table's bio, which stays out of the event)."""
    values = dict(zip(table.columns, table.row(n, version), strict=True))
    changed = [c for c in table.columns if c not in table.keys and c != "bio"]
    sets = ", ".join(f"{c} = %s" for c in changed)
    where = " AND ".join(f"{k} = %s" for k in table.keys)
    conn.execute(
        f"UPDATE {table.name} SET {sets} WHERE {where}",
        [values[c] for c in changed] + [values[k] for k in table.keys],
    )


def delete(conn: Any, table: Table, n: int) -> None:
    values = dict(zip(table.columns, table.row(n), strict=True))
    where = " AND ".join(f"{k} = %s" for k in table.keys)
    conn.execute(f"DELETE FROM {table.name} WHERE {where}", [values[k] for k in table.keys])


def move_key(conn: Any, table: Table, n: int) -> None:
    """A primary-key update: Debezium's delete of the old key and create of the new. (Not
    of a TOASTed table's row: the create carries the placeholder for the TOASTed column,
    and no earlier event of the new key its value: docs/debezium.md says so.)"""
    if table.shape == "composite":
        region = ("north", "south")[n % 2]
        conn.execute(
            f"UPDATE {table.name} SET num = num + 1000 WHERE region = %s AND num = %s", [region, n]
        )
    elif table.shape == "uuid":
        conn.execute(f"UPDATE {table.name} SET id = %s WHERE id = %s",
                     [uuid.UUID(int=n + 1001), uuid.UUID(int=n + 1)])  # fmt: skip
    else:
        conn.execute(f"UPDATE {table.name} SET id = id + 1000 WHERE id = %s", [n])


@dataclass
class Workload:
    """Random transactions over the tables: inserts, updates, deletes, key moves."""

    chosen: list[Table]
    seed: int = 7

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.live: dict[str, set[int]] = {t.name: set() for t in self.chosen}
        self.version = 0

    def seed_rows(self, conn: Any, per_table: int) -> None:
        for table in self.chosen:
            for n in range(per_table):
                insert(conn, table, n)
                self.live[table.name].add(n)

    def transaction(self, connect: Callable[[], Any], changes: int = 6) -> None:
        with connect() as conn, conn.transaction():
            for _ in range(changes):
                self._change(conn, self.rng.choice(self.chosen))

    def _change(self, conn: Any, table: Table) -> None:
        live = self.live.setdefault(table.name, set())  # a table added to `chosen` later
        self.version += 1
        kind = self.rng.random()
        if not live or kind < 0.35:
            n = self.rng.randrange(100, 900)
            if n not in live:
                insert(conn, table, n, self.version)
                live.add(n)
        elif kind < 0.8:
            update(conn, table, self.rng.choice(sorted(live)), self.version)
        elif kind < 0.93:
            n = self.rng.choice(sorted(live))
            delete(conn, table, n)
            live.discard(n)
        elif table.shape != "toasted":  # see move_key
            movable = sorted(n for n in live if n < 100)  # a moved key leaves the range
            if movable:
                n = self.rng.choice(movable)
                move_key(conn, table, n)
                live.discard(n)


def comparable(value: Any) -> Any:
    """A value as every side holds it: a UUID as its text, a decimal without its scale, a
    JSON document or an array (psycopg's dict or list, a lake table's VARIANT) as its
    canonical JSON text."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Decimal):
        return value.normalize()
    if hasattr(value, "toJson"):  # pyspark's VariantVal (a JSON null too: "null")
        return json.dumps(json.loads(value.toJson()), sort_keys=True)
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return value


def document(text: str | None) -> str | None:
    """A JSON column's text (`Table.select_list`) in the same canonical form: SQL NULL stays
    None, the document null is "null"."""
    return None if text is None else json.dumps(json.loads(text), sort_keys=True)


def rows_of(found: Iterable[Iterable[Any]], documents: frozenset[int] = frozenset()) -> list[tuple]:
    """Rows in comparable form; `documents`: the positions of JSON columns read as text."""
    return sorted(
        (
            tuple(document(v) if i in documents else comparable(v) for i, v in enumerate(row))
            for row in found
        ),
        key=lambda row: tuple(str(v) for v in row),
    )


def source_rows(conn: Any, table: Table) -> list[tuple]:
    return warehouse_rows(conn, table, table.name)


def warehouse_rows(conn: Any, table: Table, name: str) -> list[tuple]:
    """`table`'s rows as copy `name` of it holds them (a source or a warehouse table)."""
    found = conn.execute(f"SELECT {table.select_list()} FROM {name}")
    return rows_of(found, table.document_positions())


def lake_rows(spark: Any, path: str, table: Table) -> list[tuple]:
    frame = spark.read.format("delta").load(path).select(*table.columns)
    return rows_of(frame.collect())
