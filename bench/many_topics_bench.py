"""to-kafka of a pool whose pass touched many topics: `python -m bench.many_topics_bench`.

A mirror's staging pool has a topic per source table; a pass of the pipeline touches
those its source transactions changed. Side by side in one process, against one broker,
in turns: the same sync of N topics (one new record each, schemas registered: the
steady state) sent topic by topic (`sync_topic` for each: a Spark job and a read of the
pool's snapshot per topic, as before) and read in one job for all of them
(tokafka/many_topics.py, what `sync_pool` does now). Seconds per pass, median of the
rounds; the ratio is the one-job path's over the topic-by-topic path's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid

from bench.common import bench_stack, machine, publish


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--topics", default="2,10,40")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    os.environ.setdefault("ZYNC_LAKE", tempfile.mkdtemp(prefix="zync-bench-lake-"))
    from zync_assets.spark.session import sized_work, spark_session
    from zync_assets.tokafka import sync as sync_module
    from zync_assets.tokafka.sync import sync_pool
    from zync_assets_tests.support.pool_data import write_outputs

    counts = [int(n) for n in args.topics.split(",")]
    figures: dict[str, object] = {"rounds": args.rounds}
    rows = []
    with bench_stack() as (kafka, registry):
        spark = spark_session("zync-bench", long_lived=True)  # as `zync run --follow`'s
        tag = uuid.uuid4().hex[:5]
        one_job = sync_module.at_once_possible

        def sync(pool: str, topics: list[str], way: str) -> float:
            sync_module.at_once_possible = one_job if way == "one_job" else lambda *_: False
            started = time.perf_counter()
            with sized_work(spark, len(topics)):  # as the pipeline's pass of a few records
                results = sync_pool(spark, pool, kafka, registry, topics=topics)
            took = time.perf_counter() - started
            assert [r.sent for r in results] == [1] * len(topics), results
            return took

        for count in counts:
            pool = f"Many{count}_{tag}"
            topics = [f"many_{tag}_{count}_{i}" for i in range(count)]
            for name in topics:
                write_outputs(spark, pool, name, 3)
            sync_module.sync_pool(spark, pool, kafka, registry, topics=topics)  # registers
            offset = 3
            seconds: dict[str, list[float]] = {"per_topic": [], "one_job": []}
            for round_ in range(args.rounds):
                ways = ("per_topic", "one_job") if round_ % 2 == 0 else ("one_job", "per_topic")
                for way in ways:
                    for name in topics:
                        write_outputs(spark, pool, name, 1, first=offset)
                    offset += 1
                    seconds[way].append(sync(pool, topics, way))
            old, new = (round(statistics.median(seconds[w]), 2) for w in ("per_topic", "one_job"))
            figures[f"topics_{count}"] = {
                "per_topic_s": old, "one_job_s": new, "ratio": round(new / old, 3),
                "one_job_per_topic_s": round(new / count, 3),
            }  # fmt: skip
            rows.append(f"| {count} | {old:.2f} | {new:.2f} | {new / old:.2f} |")
        sync_module.at_once_possible = one_job
    table = "\n".join([
        f"\n### to-kafka of a pass that touched N topics — {time.strftime('%Y-%m-%d')}, "
        f"{machine()}\n",
        "One new record in each of N topics of one staging pool, their schemas registered "
        "(a mirror's steady state), on a long-lived session; seconds per sync, median of "
        f"{args.rounds} rounds in turns (`python -m bench.many_topics_bench`).\n",
        "| topics | topic by topic s | one job for all s | ratio |",
        "|---:|---:|---:|---:|",
        *rows, "",
    ])  # fmt: skip
    publish("many_topics", table, figures)


if __name__ == "__main__":
    main()
