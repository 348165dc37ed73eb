"""The demo's lake tables (etl_specs/shop.yaml `tables:`): wait until they hold the source, show them.

`table/invoices` (SCD1) holds each invoice as the source has it now;
`table/invoice_status_history` (SCD2) every status each invoice has had. The pipeline
applies them right after it sends the output topic, so they follow the warehouse by a
pass at most.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pyspark.sql import SparkSession
from rich.console import Console
from rich.table import Table

from zync_assets.core.errors import ZyncError
from zync_assets.core.locations import state_dir
from zync_assets.demo.chain import Chain
from zync_assets.lake.pools import pool_exists, table_path

INVOICES = "invoices"
HISTORY = "invoice_status_history"
HISTORY_COLUMNS = ("id", "invoice_id", "status", "__START_AT", "__END_AT")


@contextmanager
def _stderr_to(fd: int) -> Iterator[None]:
    saved = os.dup(2)
    os.dup2(fd, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class LakeTables:
    """Reads the demo's lake tables with a local Spark session of the demo's own."""

    def __init__(self) -> None:
        self._spark: SparkSession | None = None

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            from zync_assets.spark.session import spark_session

            # The JVM's own start-up lines (module warnings, log4j's default-level hint)
            # go to a log, not the demo's screen: the JVM keeps the stderr it starts with.
            log = state_dir() / "logs" / "demo-spark.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("a") as out, _stderr_to(out.fileno()):
                self._spark = spark_session("zync-demo-tables")
        return self._spark

    def rows(
        self, name: str, columns: tuple[str, ...], where: str = "true"
    ) -> list[tuple[Any, ...]]:
        path = table_path(name)
        if not pool_exists(path):
            return []
        frame = self.spark.read.format("delta").load(path).where(where).select(*columns)
        order = ["id", "__START_AT"] if "__START_AT" in columns else list(columns)
        return [tuple(r) for r in frame.orderBy(*order).collect()]

    def wait(self, console: Console, chain: Chain, timeout: float = 120) -> float:
        """Until table/invoices equals the source's invoices and the current versions of
        table/invoice_status_history its statuses; the seconds it took."""
        with chain.source() as conn:
            invoices = conn.execute("SELECT id, customer, item, amount FROM invoices").fetchall()
            statuses = conn.execute("SELECT id, invoice_id, status FROM invoice_status").fetchall()
        want = (sorted(tuple(r) for r in invoices), sorted(tuple(r) for r in statuses))
        started = time.monotonic()
        with console.status("waiting for the lake tables…"):
            while self._current() != want:
                if time.monotonic() - started > timeout:
                    raise ZyncError(
                        f"the lake tables did not match the source within {timeout:.0f}s; "
                        "see the pipeline's log listed by `zync stack status`"
                    )
                time.sleep(0.5)
        return time.monotonic() - started

    def _current(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        invoices = self.rows(INVOICES, ("id", "customer", "item", "amount"))
        statuses = self.rows(HISTORY, ("id", "invoice_id", "status"), "__END_AT IS NULL")
        return invoices, statuses

    def show(self, console: Console) -> None:
        for name, columns, title in (
            (INVOICES, ("id", "customer", "item", "amount", "__SEQUENCE"), "current state, SCD1"),
            (HISTORY, HISTORY_COLUMNS, "every status each invoice had, SCD2"),
        ):
            table = Table(title=f"lake table/{name} ({title})")
            for column in columns:
                table.add_column(column)
            for row in self.rows(name, columns):
                table.add_row(*("" if v is None else str(v) for v in row))
            console.print(table)
