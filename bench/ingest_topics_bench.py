"""Ingest of a pass that touched N topics: `python -m bench.ingest_topics_bench`.

A mirror's raw pool reads a topic per source table, and a pass of the pipeline under load
finds a few new messages in each. Side by side in one process, against one broker, in
turns: the same ingest of N topics (one new JSON message each) with the Java consumer's
fetches held by the broker for Kafka's default 500 ms when they find no data, and with
zync's `END_OF_RANGE_WAIT_MS` (ingest/source.py, what a user gets). Then one topic of
`--bulk` Avro events, read whole with each, so that the shorter wait shows it costs a
large read nothing. Seconds per ingest, median of the rounds; each ratio is zync's over
Kafka's default.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable

from bench.common import bench_stack, fill_topic, machine, publish

KAFKA_DEFAULT_WAIT_MS = 500


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--topics", default="1,10,60")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--bulk", type=int, default=200_000, help="events of the one big topic")
    args = parser.parse_args()
    os.environ.setdefault("ZYNC_LAKE", tempfile.mkdtemp(prefix="zync-bench-lake-"))
    from confluent_kafka import Producer

    from zync_assets.codec.formats import wire_format
    from zync_assets.ingest import source
    from zync_assets.ingest.ingest import ingest
    from zync_assets.kafka.clients import ensure_topic
    from zync_assets.spark.session import spark_session

    zync_wait = source.END_OF_RANGE_WAIT_MS
    waits = {"kafka_default": KAFKA_DEFAULT_WAIT_MS, "zync": zync_wait}
    figures: dict[str, object] = {"rounds": args.rounds, "zync_wait_ms": zync_wait}
    rows = []
    with bench_stack() as (kafka, registry):
        spark = spark_session("zync-bench", long_lived=True)  # as `zync run --follow`'s
        tag = uuid.uuid4().hex[:5]

        def timed(wait: str, run: Callable[[], int], want: int) -> float:
            source.END_OF_RANGE_WAIT_MS = waits[wait]
            started = time.perf_counter()
            rows_read = run()
            took = time.perf_counter() - started
            assert rows_read == want, (wait, rows_read, want)
            return took

        def in_turns(label: str, runs: dict[str, Callable[[], int]], want: int) -> tuple:
            seconds: dict[str, list[float]] = {w: [] for w in waits}
            for round_ in range(args.rounds):
                order = list(waits) if round_ % 2 == 0 else list(reversed(waits))
                for wait in order:
                    seconds[wait].append(timed(wait, runs[wait], want))
            old, new = (round(statistics.median(seconds[w]), 2) for w in waits)
            figures[label] = {"kafka_default_s": old, "zync_s": new, "ratio": round(new / old, 3)}
            return old, new

        producer = Producer(kafka.client_config())

        def one_new_each(topics: list[str]) -> None:
            for name in topics:
                producer.produce(name, key=b'{"id": 1}',
                                 value=json.dumps({"op": "c", "after": {"id": 1}}).encode())  # fmt: skip
            producer.flush()

        def passes(pool: str, topics: list[str]) -> Callable[[], int]:
            """An ingest of one new message in each of `topics` (its own, and its own pool)."""
            formats = {t: wire_format("json", "json") for t in topics}
            for name in topics:
                ensure_topic(kafka, name)

            def one_pass() -> int:
                one_new_each(topics)
                return ingest(spark, pool, topics, kafka, registry, formats=formats).rows

            return one_pass

        for count in [int(n) for n in args.topics.split(",")]:
            runs = {
                wait: passes(f"It{count}{wait}{tag}",
                             [f"it_{tag}_{wait}_{count}.public.t{i}" for i in range(count)])
                for wait in waits
            }  # fmt: skip
            for wait in waits:  # a first pass of each, untimed: the session warms up
                timed(wait, runs[wait], count)
            old, new = in_turns(f"topics_{count}", runs, count)
            rows.append(f"| {count} topics, one new message each | {old:.2f} | {new:.2f} | "
                        f"{new / old:.2f} |")  # fmt: skip

        bulk = f"it_{tag}_bulk"
        fill_topic(kafka, registry, bulk, args.bulk)
        counter = iter(range(10**6))

        def read_whole() -> int:  # into a new pool each time: the whole topic again
            return ingest(spark, f"Bulk{next(counter)}{tag}", [bulk], kafka, registry).rows

        old, new = in_turns("bulk", dict.fromkeys(waits, read_whole), args.bulk)
        figures["bulk_events"] = args.bulk
        rows.append(f"| one topic of {args.bulk:,} Avro events, read whole | {old:.2f} | "
                    f"{new:.2f} | {new / old:.2f} |")  # fmt: skip
    table = "\n".join([
        f"\n### Ingest of a pass that touched N topics — {time.strftime('%Y-%m-%d')}, "
        f"{machine()}\n",
        "The same ingest on a long-lived session with the consumer's empty fetches held "
        f"{KAFKA_DEFAULT_WAIT_MS} ms (Kafka's default) and {zync_wait} ms (zync's); seconds "
        f"per ingest, median of {args.rounds} rounds in turns "
        "(`python -m bench.ingest_topics_bench`).\n",
        f"| ingest | {KAFKA_DEFAULT_WAIT_MS} ms s | {zync_wait} ms s | ratio |",
        "|---|---:|---:|---:|",
        *rows, "",
    ])  # fmt: skip
    publish("ingest_topics", table, figures)


if __name__ == "__main__":
    main()
