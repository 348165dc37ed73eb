"""The real CDC chain around zync-assets, for the demo, the end-to-end tests and the bench:

    PostgreSQL `shop` ─ Debezium source ─▶ Kafka ─ zync (ingest, etl, to-kafka) ─▶ Kafka
      ─ Debezium JDBC sink ─▶ PostgreSQL `warehouse`

`Chain` knows the names (database, topics, slot, publication, connectors) of one run of
it, so several runs can share a stack: each has its own source database (named after
it), topic prefix, slot and output topic.
The source tables are the invoice example's, as a database holds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import yaml

from zync_assets.core.settings import KafkaSettings
from zync_assets.kafka.clients import delete_topics, topic_names
from zync_assets.kafka.connect_api import ConnectApi
from zync_assets.stack import postgres
from zync_assets.stack.register import StackAddresses, register_sink, register_source

SHOP_SPEC = Path(__file__).resolve().parent.parent.parent / "etl_specs" / "shop.yaml"
SOURCE_TABLES = """
CREATE TABLE IF NOT EXISTS invoices (
    id bigint PRIMARY KEY,
    customer text NOT NULL,
    item text NOT NULL,
    amount numeric(10, 2) NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS invoice_status (
    id bigint PRIMARY KEY,
    invoice_id bigint NOT NULL UNIQUE,
    status text NOT NULL
);
-- A deleted status must say which invoice it belonged to (the spec turns it into a
-- tombstone for that invoice): with the default REPLICA IDENTITY a delete carries only
-- the primary key.
ALTER TABLE invoice_status REPLICA IDENTITY FULL;
"""

# What the warehouse must hold: every invoice with its status (deleted ones absent).
EXPECTED_QUERY = """
SELECT i.id, i.customer, i.item, i.amount, s.status
FROM invoices i JOIN invoice_status s ON s.invoice_id = i.id ORDER BY i.id
"""


@dataclass(frozen=True)
class Chain:
    name: str  # one run's prefix: topics, slot, publication, connectors and table
    wire_format: str  # avro | json
    source_port: int
    warehouse_port: int
    connect_port: int
    registry_v2: str  # the registry's Apicurio v2 API, for the Avro converter

    @property
    def topics(self) -> tuple[str, str]:
        """The Debezium topics of the two source tables."""
        return f"{self.name}.public.invoices", f"{self.name}.public.invoice_status"

    @property
    def output_topic(self) -> str:
        return f"{self.name}_invoices"  # also the warehouse table's name

    @property
    def view_topic(self) -> str:
        """etl_specs/demo/shop_view.yaml's output: the same table kept as a view."""
        return f"{self.name}_invoice_view"  # also its warehouse table's name

    @property
    def connect(self) -> ConnectApi:
        return ConnectApi(f"http://127.0.0.1:{self.connect_port}")

    def source(self, autocommit: bool = False) -> psycopg.Connection:
        return psycopg.connect(postgres.dsn(self.source_port, self.name), autocommit=autocommit)

    def warehouse(self) -> psycopg.Connection:
        return psycopg.connect(
            postgres.dsn(self.warehouse_port, postgres.WAREHOUSE.database), autocommit=True
        )

    @property
    def addresses(self) -> StackAddresses:
        return StackAddresses(
            self.source_port, self.warehouse_port, f"http://127.0.0.1:{self.connect_port}",
            self.registry_v2,
        )  # fmt: skip

    def create_source_tables(self, ddl: str = SOURCE_TABLES) -> None:
        """This chain's source database and its tables."""
        postgres.create_database(self.source_port, self.name)
        with self.source(autocommit=True) as conn:
            conn.execute(ddl)

    def start_source_connector(
        self, tables: tuple[str, ...] = ("public.invoices", "public.invoice_status")
    ) -> None:
        """Debezium's source for `tables`, as `zync stack connector source` registers it:
        the connector's role, its publication (made by the tables' owner, so the role
        needs only LOGIN REPLICATION and SELECT), the connector itself."""
        register_source(
            self.addresses, f"{self.name}-source", self.name, list(tables), self.wire_format,
            topic_prefix=self.name, publication=self.name,  # the slot too
        )  # fmt: skip

    def start_sink_connector(self, topics: tuple[str, ...] | None = None) -> None:
        register_sink(
            self.addresses, f"{self.name}-sink", list(topics or (self.output_topic,)),
            self.wire_format,
        )  # fmt: skip

    def reset(self, kafka: KafkaSettings) -> None:
        """Remove every trace of an earlier run of this chain: its connectors (and their
        offsets), replication slot, source database, topics, warehouse table and pools."""
        for connector in (f"{self.name}-source", f"{self.name}-sink"):
            self.connect.delete(connector)
        with psycopg.connect(postgres.dsn(self.source_port, "postgres"), autocommit=True) as conn:
            slot = conn.execute(
                "SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", [self.name]
            ).fetchone()
            if slot:
                conn.execute("SELECT pg_drop_replication_slot(%s)", [self.name])
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        with self.warehouse() as conn:
            for table in (self.output_topic, self.view_topic):
                conn.execute(f"DROP TABLE IF EXISTS {table}")
        delete_topics(kafka, [t for t in topic_names(kafka) if self._owns(t)])

    def _owns(self, topic: str) -> bool:
        return topic.startswith(f"{self.name}.") or topic in (
            self.output_topic,
            self.view_topic,
            f"__debezium-heartbeat.{self.name}",
        )

    def write_spec(self, folder: Path, gated: bool = False) -> Path:
        """etl_specs/shop.yaml for this chain: its topics, output topic, pools and format;
        `gated`: every rule with `gate: transaction`, over Debezium's transaction topic."""
        text = (
            SHOP_SPEC.read_text()
            .replace("shop.public.", f"{self.name}.public.")
            .replace("shop_invoices", self.output_topic)
            .replace("ShopRaw", f"{self.name}_raw")
            .replace("ShopStaging", f"{self.name}_staging")
        )
        spec = yaml.safe_load(text)
        if gated:
            raw = spec["inputs"][0]["pool"]
            spec["inputs"].append({"topic": f"{self.name}.transaction", "pool": raw})
            for rule in spec["transforms"]:
                rule["gate"] = "transaction"
        for route in spec["inputs"] + spec["outputs"]:
            route["format"] = self.wire_format
        path = folder / f"{self.name}.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        return path

    def expected_rows(self) -> list[tuple[Any, ...]]:
        with self.source() as conn:
            return list(conn.execute(EXPECTED_QUERY).fetchall())

    def warehouse_rows(self, table: str | None = None) -> list[tuple[Any, ...]]:
        """The sink's table (default: the output topic's) in the shape of EXPECTED_QUERY;
        [] before it exists."""
        query = (
            f"SELECT id, customer, item, amount, status FROM {table or self.output_topic} "
            "ORDER BY id"
        )
        with self.warehouse() as conn:
            try:
                return list(conn.execute(query).fetchall())
            except psycopg.errors.UndefinedTable:
                return []
