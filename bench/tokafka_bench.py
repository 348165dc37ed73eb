"""to-kafka throughput: `python -m bench.tokafka_bench [--records N]`.

Side by side in one process, against one broker:
  plain   a plain confluent-kafka producer (idempotent, same batching, no transactions)
          sending the very bytes to-kafka sent, already encoded and in memory
  zync    `sync_topic` of N staging output records (Delta read, offset checks, Avro
          encoding on Spark's executors, collection into the driver JVM,
          transactional sends there), four times, each to a topic of its own:
          - the process's first sync, to a new topic (to-kafka's code paths cold,
            as in a fresh `zync to-kafka`): types a sample, registers schemas;
          - the same, warm;
          - warm, the steady state, twice (the better run is reported, as for the
            plain producer): the topic already holds ten records (both shapes) sent
            by an earlier sync, so its schemas are registered, and N new records
            follow;
          - the steady state again with the librdkafka sender that Spark Connect
            sessions use (records through Arrow into Python, sent by confluent-kafka)
The plain producer runs twice and the better run is the baseline.
Results are appended to docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import tempfile
import time
import uuid
from pathlib import Path

from bench.common import bench_stack, machine
from zync_assets_tests.support.pool_data import write_outputs

RESULTS = Path(__file__).resolve().parent.parent / "docs" / "BENCHMARKS.md"


def plain_producer(kafka, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> float:
    from zync_assets.kafka.clients import ensure_topic, producer

    ensure_topic(kafka, topic)
    out = producer(kafka, **{"linger.ms": 50, "batch.size": 1_000_000,
                             "queue.buffering.max.messages": 1_000_000,
                             "queue.buffering.max.kbytes": 1_048_576})  # fmt: skip
    started = time.perf_counter()
    for index, (key, value) in enumerate(records):
        while True:
            try:
                out.produce(topic, key=key, value=value)
                break
            except BufferError:
                out.poll(0.05)
        if index % 10_000 == 0:
            out.poll(0)
    assert out.flush(120) == 0
    return time.perf_counter() - started


def sent_bytes(kafka, topic: str, count: int) -> list[tuple[bytes | None, bytes | None]]:
    from confluent_kafka import TopicPartition

    from zync_assets.kafka.clients import consumer

    reader = consumer(kafka, **{"isolation.level": "read_committed"})
    reader.assign([TopicPartition(topic, 0, 0)])
    records: list[tuple[bytes | None, bytes | None]] = []
    while len(records) < count:
        message = reader.poll(10)
        assert message is not None
        if not message.error():
            records.append((message.key(), message.value()))
    reader.close()
    return records


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    os.environ.setdefault("ZYNC_LAKE", tempfile.mkdtemp(prefix="zync-bench-lake-"))
    from zync_assets.spark.session import spark_session
    from zync_assets.tokafka import sync as sync_module
    from zync_assets.tokafka.librdkafka_sender import LibrdkafkaSender
    from zync_assets.tokafka.sync import sync_topic

    count = args.records
    with bench_stack() as (kafka, registry):
        spark = spark_session("zync-bench")
        topic = f"bench_out_{uuid.uuid4().hex[:6]}"
        runs = {  # run -> records an earlier sync sent to its topic (registering the schemas)
            "cold": 0, "first": 0, "steady": 10, "steady_again": 10, "librdkafka": 10,
        }  # fmt: skip
        seconds = {}

        def timed(run: str) -> None:
            if run == "librdkafka":
                sync_module.open_sender = lambda _spark, *rest: LibrdkafkaSender(*rest)
            started = time.perf_counter()
            result = sync_topic(spark, "BenchStaging", f"{topic}_{run}", kafka, registry)
            seconds[run] = time.perf_counter() - started
            assert result.sent == count, (run, result.sent)

        for run, before in runs.items():
            write_outputs(spark, "BenchStaging", f"{topic}_{run}", before or count)
        timed("cold")  # the first sync of the process
        for run, before in runs.items():
            if before:  # ten records (both shapes) sent first, then the timed sync's
                sync_topic(spark, "BenchStaging", f"{topic}_{run}", kafka, registry)
                write_outputs(spark, "BenchStaging", f"{topic}_{run}", count, first=before)
        for run in ("first", "steady", "steady_again", "librdkafka"):
            timed(run)
        records = sent_bytes(kafka, f"{topic}_first", count)
        plain_s = min(plain_producer(kafka, f"{topic}_plain{i}", records) for i in range(2))
        size = sum(len(k or b"") + len(v or b"") for k, v in records[:10_000]) / 10_000

    steady_runs = sorted((seconds["steady"], seconds["steady_again"]))
    seconds["steady"] = steady_runs[0]

    def row(label: str, run: str) -> str:
        took = seconds[run]
        return f"| {label} | {took:.1f} | {count / took:,.0f} | {plain_s / took:.3f} |"

    lines = [
        "",
        f"### to-kafka, {dt.date.today()} — {machine()}",
        "",
        f"{count:,} staging output records (two shapes: invoice rows with decimal and "
        f"timestamp, and partial updates), {size:.0f} bytes of key + value on average, "
        "one partition.",
        "",
        "| measurement | seconds | records/s | ratio to plain producer |",
        "|---|---:|---:|---:|",
        f"| plain confluent-kafka producer, pre-encoded records in memory (best of 2) | "
        f"{plain_s:.1f} | {count / plain_s:,.0f} | 1.00 |",
        row("zync to-kafka (`sync_topic`), the process's first sync, a new topic", "cold"),
        row("zync to-kafka, warm, a new topic (types a sample, registers schemas)", "first"),
        row(
            "zync to-kafka, warm, a topic synced before (the steady state; best of 2, the "
            f"other took {steady_runs[1]:.1f} s)",
            "steady",
        ),
        row("zync to-kafka, warm, steady state, librdkafka sender (Spark Connect)", "librdkafka"),
        "",
    ]
    print("\n".join(lines))
    with RESULTS.open("a") as out:
        out.write("\n".join(lines))


if __name__ == "__main__":
    main()
