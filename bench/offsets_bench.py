"""What a sensor tick asks Kafka: `python -m bench.offsets_bench [--topics 1,100,1000]`.

Each raw pool's sensor reads the end offsets of its topics every tick (and ingest, status
and to-kafka read watermarks too). Side by side in one run, against one broker, for 1, 100
and 1,000 topics of 2 partitions:

  per-topic   the first way: full metadata once per topic, then a watermark query per
              partition (median of 5 calls)
  new client  batched, as zync did until 2026-12-02: one metadata call, then one
              ListOffsets for the earliest and one for the latest offsets of all
              partitions, each over a new admin client
  batched     `zync_assets.kafka.offsets.watermarks` now: the same three requests over the
              process's connected client (kafka/clients.py's connected_admin)

The last two in turns, --runs calls each: median, p90 and the calls over 1 s (a new
librdkafka client loses a leader lookup sent as it drops its bootstrap connection, and
asks again 3 s later). Results: docs/BENCHMARKS.md and bench/results/offsets.json.
"""

from __future__ import annotations

import argparse
import statistics
import time

from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewTopic, OffsetSpec

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


def new_client_watermarks(kafka: KafkaSettings, topics: list[str]) -> dict:
    """The batched requests as they were made before: each over a new admin client."""
    existing = clients.admin_client(kafka).list_topics(timeout=clients.CONNECT_TIMEOUT_S).topics
    wanted = [TopicPartition(t, p) for t in topics for p in sorted(existing[t].partitions)]
    ends = []
    for spec in (OffsetSpec.earliest(), OffsetSpec.latest()):
        admin = clients.admin_client(kafka)  # must outlive the futures it returns
        futures = admin.list_offsets({tp: spec for tp in wanted})
        ends.append({(tp.topic, tp.partition): f.result(timeout=60).offset
                     for tp, f in futures.items()})  # fmt: skip
    low, high = ends
    return {t: [PartitionOffsets(p, low[(t, p)], high[(t, p)])
                for p in sorted(existing[t].partitions)] for t in topics}  # fmt: skip


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


def in_turns(calls: dict[str, object], runs: int) -> dict[str, list[float]]:
    """Each call's wall seconds, the calls made in turns `runs` times (the same noise)."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(runs):
        for name, call in calls.items():
            started = time.perf_counter()
            call()  # type: ignore[operator]
            times[name].append(time.perf_counter() - started)
    return times


def summary(times: list[float]) -> dict[str, float | int]:
    p90 = sorted(times)[int(len(times) * 0.9)]
    return {
        "median_s": statistics.median(times),
        "p90_s": p90,
        "over_1s": sum(t > 1 for t in times),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--topics", default="1,100,1000")
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    counts = [int(n) for n in args.topics.split(",")]
    figures: dict[str, object] = {"partitions_per_topic": PARTITIONS, "runs": args.runs}
    rows = []
    with bench_stack() as (kafka, _registry):
        make_topics(kafka, [f"tick_{i:05d}" for i in range(max(counts))])
        for count in counts:
            topics = [f"tick_{i:05d}" for i in range(count)]
            now = watermarks(kafka, topics)
            assert (
                per_topic_watermarks(kafka, topics) == now == new_client_watermarks(kafka, topics)
            )
            old = median_seconds(lambda t=topics: per_topic_watermarks(kafka, t))
            times = in_turns({
                "new_client": lambda t=topics: new_client_watermarks(kafka, t),
                "batched": lambda t=topics: watermarks(kafka, t),
            }, args.runs)  # fmt: skip
            fresh, kept = summary(times["new_client"]), summary(times["batched"])
            figures[f"topics_{count}"] = {
                "per_topic_s": old, "new_client": fresh, "batched": kept,
                "batched_s": kept["median_s"], "batched_over_per_topic": kept["median_s"] / old,
                "batched_over_new_client_p90": kept["p90_s"] / fresh["p90_s"],
            }  # fmt: skip
            rows.append(
                f"| {count:,} | {count * PARTITIONS:,} | {old * 1000:,.1f} | "
                f"{fresh['median_s'] * 1000:,.1f} / {fresh['p90_s'] * 1000:,.1f} "
                f"({fresh['over_1s']}) | {kept['median_s'] * 1000:,.1f} / "
                f"{kept['p90_s'] * 1000:,.1f} ({kept['over_1s']}) |"
            )
    table = "\n".join([
        f"\n### Offsets per sensor tick — {time.strftime('%Y-%m-%d')}, {machine()}\n",
        "The watermarks of N topics (2 partitions each) on the local broker, as a raw pool's "
        f"sensor reads them every tick. Per topic: median of 5 calls; the batched ways in "
        f"turns, {args.runs} calls each: median / p90 ms (calls over 1 s).\n",
        "| topics | partitions | per topic ms | batched, a new client per call | "
        "batched, the connected client (now) |",
        "|---:|---:|---:|---:|---:|",
        *rows, "",
    ])  # fmt: skip
    publish("offsets", table, figures)


if __name__ == "__main__":
    main()
