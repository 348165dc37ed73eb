"""Send one batch of the invoice demo to Kafka, events in their file order."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from zync_assets.core.settings import KafkaSettings
from zync_assets.kafka import clients
from zync_assets.kafka.produce import Line, encode_lines
from zync_assets.kafka.registry import Registry

TOPICS = ("Invoices", "InvoiceStatus")
OUTPUT_TOPICS = ("NewInvoices",)
BATCHES = 4
_DATA = resources.files("zync_assets.demo") / "invoices"


def schema(name: str) -> Any:
    return json.loads((_DATA / name).read_text())


def batch_lines(number: int) -> list[dict]:
    text = (_DATA / f"batch-{number}.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def produce_batch(number: int, kafka: KafkaSettings, registry: Registry) -> int:
    """Produce batch `number` (1-4); returns how many events were sent."""
    events = batch_lines(number)
    encoded: dict[str, list] = {}
    for topic in TOPICS:
        lines = [Line(i, e["key"], e["value"]) for i, e in enumerate(events) if e["topic"] == topic]
        if lines:
            messages, _, _ = encode_lines(
                topic, lines, registry, schema(f"{topic}-key.avsc"), schema(f"{topic}-value.avsc")
            )
            encoded[topic] = list(zip([ln.number for ln in lines], messages, strict=True))
        clients.ensure_topic(kafka, topic)
    in_file_order = sorted((n, topic, m) for topic, ms in encoded.items() for n, m in ms)
    producer = clients.connected_producer(kafka)
    for _n, topic, (key, value) in in_file_order:
        producer.produce(topic, key=key, value=value)
        producer.poll(0)
    if producer.flush(30):
        raise clients.unreachable(kafka, "demo events not delivered")
    return len(in_file_order)


def reset(kafka: KafkaSettings, lake_pools: tuple[str, ...] = ("Raw", "Staging")) -> None:
    """Start the demo afresh: delete its topics and pools (names the demo owns)."""
    from zync_assets.lake.pools import drop_pool_files

    clients.delete_topics(kafka, list(TOPICS + OUTPUT_TOPICS))
    for pool in lake_pools:
        drop_pool_files(pool)
