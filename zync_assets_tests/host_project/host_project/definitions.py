"""A host's own Dagster project (test_wheel.py installs zync-assets from its wheel for it):
zync's assets from a folder of specs, merged with an asset of the host's own that reads
zync's output topic."""

import json
import os
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, TopicPartition
from dagster import AssetKey, Definitions, MaterializeResult, asset

from zync_assets import build_zync_definitions, load_specs

PROJECT = Path(__file__).resolve().parent.parent
OUT_TOPIC = os.environ["HOST_OUT_TOPIC"]


@asset(deps=[AssetKey(["kafka", OUT_TOPIC])])
def order_report() -> MaterializeResult:
    """How many orders zync has sent to its output topic (committed records only)."""
    consumer = Consumer({
        "bootstrap.servers": os.environ["ZYNC_KAFKA_BOOTSTRAP"], "group.id": "order_report",
        "isolation.level": "read_committed", "enable.partition.eof": True,
    })  # fmt: skip
    consumer.assign([TopicPartition(OUT_TOPIC, 0, 0)])
    orders = 0
    while (message := consumer.poll(10)) is not None and not message.error():
        orders += 1
    consumer.close()
    error = message.error() if message is not None else None
    assert error is not None and error.code() == KafkaError._PARTITION_EOF
    (PROJECT / "report.json").write_text(json.dumps({"orders": orders}))
    return MaterializeResult(metadata={"orders": orders})


defs = Definitions.merge(
    build_zync_definitions(load_specs(PROJECT / "specs")),
    Definitions(assets=[order_report]),
)
