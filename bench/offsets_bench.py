"""What a sensor tick asks Kafka: `python -m bench.offsets_bench [--topics 1,100,1000]`.

Each raw pool's sensor reads the end offsets of its topics every tick (and ingest, status
and to-kafka read watermarks too). Side by side in one run, against one broker, for 1, 100
and 1,000 topics of 2 partitions:

  per-topic   the way zync read them before: full metadata once per topic, then a
              watermark query per partition (kept here as the baseline)
  batched     `zync_assets.kafka.offsets.watermarks` now: one metadata call, then one
              ListOffsets for the earliest and one for the latest offsets of all partitions

Median of 5 calls each. Results: docs/BENCHMARKS.md and bench/results/offsets.json.
"""

from __future__ import annotations

import argparse
import statistics
import time

from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewTopic

from bench.common import bench_stack, machine, publish
from zync_assets.core.settings import KafkaSettings
from zync_assets.kafka import clients
from zync_assets.kafka.offsets import PartitionOffsets, watermarks

PARTITIONS = 2


def per_topic_watermarks(kafka: KafkaSettings, topics: list[str]) -> dict:
    """The previous implementation: metadata per topic, a watermark query per partition."""
    consumer = clients.consumer(kafka)
    try:
        return {
            topic: [
                PartitionOffsets(p, *consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=clients.CONNECT_TIMEOUT_S))
                for p in clients.partitions_of(kafka, topic)
            ]
            for topic in topics
        }  # fmt: skip
    finally:
        consumer.close()


def make_topics(kafka: KafkaSettings, names: list[str]) -> None:
    existing = clients.cluster_metadata(kafka).topics
    new = [NewTopic(n, num_partitions=PARTITIONS, replication_factor=-1) for n in names
           if n not in existing]  # fmt: skip
    admin = clients.admin_client(kafka)
    for start in range(0, len(new), 200):
        for future in admin.create_topics(new[start : start + 200]).values():
            future.result(timeout=60)
    producer = clients.producer(kafka)
    for name in names:  # a few records in each partition: real offsets to read
        for i in range(4):
            producer.produce(name, key=str(i).encode(), value=b"x")
    producer.flush(60)


def median_seconds(call, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--topics", default="1,100,1000")
    counts = [int(n) for n in parser.parse_args().topics.split(",")]
    figures: dict[str, object] = {"partitions_per_topic": PARTITIONS}
    rows = []
    with bench_stack() as (kafka, _registry):
        make_topics(kafka, [f"tick_{i:05d}" for i in range(max(counts))])
        for count in counts:
            topics = [f"tick_{i:05d}" for i in range(count)]
            assert per_topic_watermarks(kafka, topics) == watermarks(kafka, topics)
            old = median_seconds(lambda t=topics: per_topic_watermarks(kafka, t))
            new = median_seconds(lambda t=topics: watermarks(kafka, t))
            figures[f"topics_{count}"] = {"per_topic_s": old, "batched_s": new,
                                          "batched_over_per_topic": new / old}  # fmt: skip
            rows.append(f"| {count:,} | {count * PARTITIONS:,} | {old * 1000:,.1f} | "
                        f"{new * 1000:,.1f} | {old / new:,.1f}× |")  # fmt: skip
    table = "\n".join([
        f"\n### Offsets per sensor tick — {time.strftime('%Y-%m-%d')}, {machine()}\n",
        "The watermarks of N topics (2 partitions each) on the local broker, as a raw pool's "
        "sensor reads them every tick; median of 5 calls each.\n",
        "| topics | partitions | per topic (before) ms | batched (now) ms | speed-up |",
        "|---:|---:|---:|---:|---:|",
        *rows, "",
    ])  # fmt: skip
    publish("offsets", table, figures)


if __name__ == "__main__":
    main()
