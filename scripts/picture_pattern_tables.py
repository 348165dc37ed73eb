"""The docs' picture of a table pattern in Dagster (docs/img/pattern_tables.png), made on
the real stack: Kafka, the registry, a Spark Connect server and `dagster dev` on free
ports in a scratch folder; 24 Debezium-shaped topics; the stack's own sensors run the
spec; the asset page of `table/<spec>_tables` once its materialization lists every table.

    .venv/bin/python scripts/picture_pattern_tables.py [docs/img/pattern_tables.png]
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

TABLES = 24
SPEC = """inputs:
  - {topics: 'pic\\.public\\..*', pool: Shop}
tables:
  - {topics: 'pic\\.public\\..*', name: '{table}'}
"""
TABLE_NAMES = ["customers", "orders", "order_lines", "invoices", "invoice_status", "payments",
               "refunds", "products", "prices", "stock", "warehouses", "shipments",
               "carriers", "addresses", "accounts", "ledger", "taxes", "coupons", "reviews",
               "returns", "suppliers", "purchase_orders", "employees", "audit_log"]  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def graphql(url: str, query: str) -> dict:
    request = urllib.request.Request(
        f"{url}/graphql", json.dumps({"query": query}).encode(),
        {"Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())["data"]


def tables_listed(url: str, key: str) -> int:
    """How many tables the asset's newest materialization lists (0: none yet)."""
    query = (
        f"{{ assetOrError(assetKey: {{path: {json.dumps(key.split('/'))}}}) {{ ... on Asset {{ "
        "assetMaterializations(limit: 1) { metadataEntries { label "
        "... on IntMetadataEntry { intValue } } } } } }"
    )
    found = graphql(url, query)["assetOrError"].get("assetMaterializations") or []
    entries = found[0]["metadataEntries"] if found else []
    return next((e.get("intValue") or 0 for e in entries if e["label"] == "tables"), 0)


def main(picture: Path) -> None:
    from zync_assets.core.settings import KafkaSettings, RegistrySettings
    from zync_assets.kafka.produce import Line, produce
    from zync_assets.kafka.registry import Registry
    from zync_assets.stack.registry import registry_url
    from zync_assets.stack.services import StackPorts, stack_down, stack_up

    work = Path(tempfile.mkdtemp(prefix="zync-picture-"))
    (work / "specs").mkdir()
    (work / "specs" / "shop.yaml").write_text(SPEC)
    os.environ.update(ZYNC_SPECS=str(work / "specs"), ZYNC_LAKE=str(work / "lake"),
                      DAGSTER_HOME=str(work / "dagster"))  # fmt: skip
    ports = StackPorts(free_port(), free_port(), free_port(), free_port())
    home, ui_port = work / ".zync", free_port()
    try:
        stack_up(ports, home, dagster_port=ui_port, spark_port=free_port())
        kafka = KafkaSettings(f"127.0.0.1:{ports.kafka}")
        registry = Registry(RegistrySettings(registry_url(ports.registry)))
        for n, name in enumerate(TABLE_NAMES[:TABLES]):
            rows = [Line(i + 1, {"id": i}, {"op": "c", "after": {"id": i, "name": f"{name} {i}"}})
                    for i in range(n % 5 + 1)]  # fmt: skip
            produce(f"pic.public.{name}", rows, kafka, registry)
        url = f"http://127.0.0.1:{ui_port}"
        deadline = time.monotonic() + 900
        while tables_listed(url, "table/shop_tables") < TABLES:
            if time.monotonic() > deadline:
                sys.exit("the pattern's asset never listed every table: see .zync/logs")
            time.sleep(5)
        snap(url, picture)
    finally:
        stack_down(home)
        shutil.rmtree(work, ignore_errors=True)


def snap(url: str, picture: Path) -> None:
    from playwright.sync_api import sync_playwright

    graphql(url, "mutation { setNuxSeen }")  # no newsletter dialog over the page
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=shutil.which("chromium"))
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1500})
            page.goto(f"{url}/assets/table/shop_tables", wait_until="networkidle")
            page.get_by_text("audit_log").first.wait_for(timeout=60_000)
            page.wait_for_timeout(1000)
            page.screenshot(path=str(picture), full_page=True)
        finally:
            browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/img/pattern_tables.png").resolve())
