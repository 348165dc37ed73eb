"""A seeded random workload of SQL transactions on the chain's source tables.

Inserts, updates and deletes of invoices and their statuses, several per transaction;
some statuses committed before their invoice (the denorm join must wait); schema
changes mid-stream: `ADD COLUMN region` at a quarter, `ADD COLUMN note` at half, and
`DROP COLUMN region` at three quarters; updates set the columns while they exist. Each invoice has at most one status row, so the warehouse must equal the
inner join of the two tables (chain.EXPECTED_QUERY).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

import psycopg

STATUSES = ("sent", "paid", "closed", "collections", "disputed")
CUSTOMERS = ("Alice", "Bob", "Charlie", "Dan", "Erin", "Frank")
ITEMS = ("book", "pen", "lamp", "desk", "chair")


@dataclass
class Workload:
    seed: int
    first_id: int = 1
    complete: list[int] = field(default_factory=list)  # invoices with their status
    orphans: list[int] = field(default_factory=list)  # statuses whose invoice is to come
    columns: set[str] = field(default_factory=set)  # the added columns that exist now
    transactions: int = 0
    statements: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.next_id = self.first_id

    # --- statements ---------------------------------------------------------------------

    def _amount(self) -> str:
        return f"{self.rng.randint(100, 99_999) / 100:.2f}"

    def _insert_invoice(self, sql: list[tuple[str, list]], invoice: int) -> None:
        sql.append(
            (
                "INSERT INTO invoices (id, customer, item, amount) VALUES (%s, %s, %s, %s)",
                [invoice, self.rng.choice(CUSTOMERS), self.rng.choice(ITEMS), self._amount()],
            )
        )

    def _insert_status(self, sql: list[tuple[str, list]], invoice: int) -> None:
        sql.append(
            ("INSERT INTO invoice_status (id, invoice_id, status) VALUES (%s, %s, 'new')",
             [invoice * 10, invoice])
        )  # fmt: skip

    def _new_invoice(self, sql: list[tuple[str, list]]) -> None:
        invoice, self.next_id = self.next_id, self.next_id + 1
        if self.rng.random() < 0.25:  # its status first, the invoice in a later transaction
            self._insert_status(sql, invoice)
            self.orphans.append(invoice)
            return
        self._insert_invoice(sql, invoice)
        self._insert_status(sql, invoice)
        self.complete.append(invoice)

    def _adopt_orphan(self, sql: list[tuple[str, list]]) -> None:
        invoice = self.orphans.pop(0)
        self._insert_invoice(sql, invoice)
        self.complete.append(invoice)

    def _update_invoice(self, sql: list[tuple[str, list]]) -> None:
        invoice = self.rng.choice(self.complete)
        column = self.rng.choice(sorted(self.columns) + ["amount"] * 2)
        if column != "amount":
            text = f"{column} {self.rng.randint(1, 999)}"
            sql.append((f"UPDATE invoices SET {column} = %s WHERE id = %s", [text, invoice]))
        else:
            sql.append(("UPDATE invoices SET amount = %s WHERE id = %s", [self._amount(), invoice]))

    def _update_status(self, sql: list[tuple[str, list]]) -> None:
        invoice = self.rng.choice(self.complete + self.orphans)
        status = self.rng.choice(STATUSES)
        sql.append(
            ("UPDATE invoice_status SET status = %s WHERE invoice_id = %s", [status, invoice])
        )

    def _delete(self, sql: list[tuple[str, list]]) -> None:
        invoice = self.complete.pop(self.rng.randrange(len(self.complete)))
        sql.append(("DELETE FROM invoice_status WHERE invoice_id = %s", [invoice]))
        sql.append(("DELETE FROM invoices WHERE id = %s", [invoice]))

    def _one_change(self, sql: list[tuple[str, list]]) -> None:
        roll = self.rng.random()
        if self.orphans and (roll < 0.15 or len(self.orphans) > 3):
            self._adopt_orphan(sql)
        elif roll < 0.45 or len(self.complete) < 5:
            self._new_invoice(sql)
        elif roll < 0.65:
            self._update_invoice(sql)
        elif roll < 0.9:
            self._update_status(sql)
        else:
            self._delete(sql)

    # --- transactions -------------------------------------------------------------------

    def transaction(self) -> list[tuple[str, list]]:
        """The statements of the next transaction: one to four changes."""
        sql: list[tuple[str, list]] = []
        for _ in range(self.rng.choice((1, 1, 2, 3, 4))):
            self._one_change(sql)
        return sql

    def finish(self) -> list[tuple[str, list]]:
        """Statements that give every waiting status its invoice."""
        sql: list[tuple[str, list]] = []
        while self.orphans:
            self._adopt_orphan(sql)
        return sql

    def run(
        self,
        connect: Callable[[], psycopg.Connection],
        transactions: int,
        between: Callable[[int], None] = lambda _: None,
    ) -> None:
        """Commit `transactions` transactions (with the schema changes at a quarter, a
        half and three quarters), then `finish()`; `between(i)` runs after the i-th commit
        (a restart, a pause)."""
        changes = {
            transactions // 4: ("ADD COLUMN region text", "region"),
            transactions // 2: ("ADD COLUMN note text", "note"),
            3 * transactions // 4: ("DROP COLUMN region", "region"),
        }
        for i in range(transactions):
            if i in changes:
                change, column = changes[i]
                self._execute(connect, [(f"ALTER TABLE invoices {change}", [])])
                self.columns ^= {column}
            self._execute(connect, self.transaction())
            between(i)
        self._execute(connect, self.finish())

    def _execute(
        self, connect: Callable[[], psycopg.Connection], sql: list[tuple[str, list]]
    ) -> None:
        if not sql:
            return
        with connect() as conn, conn.transaction():
            for statement, params in sql:
                conn.execute(statement, params)
        self.transactions += 1
        self.statements += len(sql)
