"""`zync status` with 60 tables and the pipeline running under load.

A private stack; 60 Debezium-style topics (`load.public.tNN`, an `id` key and a row of
`id, name, amount`), 50 rows each; the whole-database spec over them (a mirror to
`warehouse_<table>` and a lake table per topic) run by `zync run --follow` in its
default configuration (local Spark, one loop). Once every lake table exists, a producer
sends --rate single-row updates a second to random tables, and `zync status SPEC
--format json` runs --runs times, in turns with `zync status --recount` (which counts
the waiting events with Spark, as every status of a pipeline behind did before: the
baseline). Wall seconds; the ratio is taken pair by pair.

  tables60_status_s          median wall seconds of `zync status` (the default)
  tables60_status_max_s      its slowest run
  tables60_recount_s         median of `zync status --recount`
  tables60_ratio             default / recount, pair by pair (median)

Run: `python -m bench.status_load_bench` (about 10 minutes on 2 cores). Appends its
table to docs/BENCHMARKS.md; its figures join bench/results/status.json.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from fastavro import parse_schema

from bench.common import bench_stack, machine, publish_joined
from zync_assets.codec.avro import encode
from zync_assets.kafka import clients
from zync_assets.kafka.clients import ensure_topic
from zync_assets.lake.pools import TABLES_FOLDER

ZYNC = str(Path(sys.executable).parent / "zync")
TABLES = 60
ROWS = 50
READY_TIMEOUT_S = 1800.0
SPEC = """inputs:
  - {topics: 'load\\.public\\..*', pool: Load}
transforms:
  - {type: mirror, topics: 'load\\.public\\..*', out: 'warehouse_{table}', pool: LoadMirror}
tables:
  - {topics: 'load\\.public\\..*', name: '{table}'}
"""
ROW = {
    "type": "record", "name": "Value", "namespace": "load",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"], "default": None},
        {"name": "amount", "type": ["null", "double"], "default": None},
    ],
}  # fmt: skip
ENVELOPE = {
    "type": "record", "name": "Envelope", "namespace": "load",
    "fields": [
        {"name": "before", "type": ["null", ROW], "default": None},
        {"name": "after", "type": ["null", "load.Value"], "default": None},
        {"name": "op", "type": "string"},
        {"name": "source", "type": {"type": "record", "name": "Source", "fields": [
            {"name": "lsn", "type": "long"}, {"name": "ts_ms", "type": "long"}]}},
    ],
}  # fmt: skip
KEY = {
    "type": "record",
    "name": "Key",
    "namespace": "load",
    "fields": [{"name": "id", "type": "long"}],
}


class Source:
    """The 60 topics' messages, framed as Avro under schemas registered once."""

    def __init__(self, kafka, registry) -> None:
        self.kafka, self.lsn = kafka, 0
        self.topics = [f"load.public.t{i:02d}" for i in range(TABLES)]
        for topic in self.topics:
            ensure_topic(kafka, topic)
            self.value_id = registry.register(f"{topic}-value", ENVELOPE)
            self.key_id = registry.register(f"{topic}-key", KEY)
        self.value_schema, self.key_schema = parse_schema(ENVELOPE), parse_schema(KEY)
        self.producer = clients.producer(kafka)

    def change(self, topic: str, row: int, op: str = "u") -> None:
        self.lsn += 1
        after = {"id": row, "name": f"{topic}-{row}-{self.lsn}", "amount": self.lsn / 4}
        value = {"before": None, "after": after, "op": op,
                 "source": {"lsn": self.lsn, "ts_ms": int(time.time() * 1000)}}  # fmt: skip
        self.producer.produce(
            topic, key=encode(self.key_id, self.key_schema, {"id": row}),
            value=encode(self.value_id, self.value_schema, value),
        )  # fmt: skip
        self.producer.poll(0)


def ready(lake: Path) -> bool:
    return all((lake / TABLES_FOLDER / f"t{i:02d}" / "_delta_log").is_dir() for i in range(TABLES))


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{command} failed: {done.stderr[-2000:]}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--rate", type=float, default=50.0, help="updates a second")
    args = parser.parse_args()
    with bench_stack() as (kafka, registry):
        work = Path(tempfile.mkdtemp(prefix="zync-status-load-"))
        lake, spec = work / "lake", work / "load.yaml"
        spec.write_text(SPEC)
        env = {**os.environ, "ZYNC_LAKE": str(lake), "ZYNC_CONNECT_URL": "http://127.0.0.1:9"}
        source = Source(kafka, registry)
        for topic in source.topics:
            for row in range(ROWS):
                source.change(topic, row, "r")
        source.producer.flush(60)
        pipeline = subprocess.Popen(
            [ZYNC, "run", str(spec), "--follow", "--no-dagster"], env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        stop = threading.Event()
        try:
            deadline = time.monotonic() + READY_TIMEOUT_S
            while not ready(lake):
                if time.monotonic() > deadline or pipeline.poll() is not None:
                    raise RuntimeError("the pipeline did not make every lake table")
                time.sleep(2)

            def load() -> None:
                while not stop.is_set():
                    source.change(random.choice(source.topics), random.randrange(ROWS))
                    time.sleep(1 / args.rate)

            threading.Thread(target=load, daemon=True).start()
            time.sleep(10)  # the pipeline behind its load, as it runs
            status = [ZYNC, "status", str(spec), "--format", "json"]
            pairs = [
                (timed(status, env), timed([*status, "--recount"], env)) for _ in range(args.runs)
            ]
        finally:
            stop.set()
            os.killpg(pipeline.pid, signal.SIGTERM)
            pipeline.wait(120)
    default = [a for a, _ in pairs]
    recount = [b for _, b in pairs]
    ratio = statistics.median(a / b for a, b in pairs)
    figures = {
        "tables60_status_s": round(statistics.median(default), 2),
        "tables60_status_max_s": round(max(default), 2),
        "tables60_recount_s": round(statistics.median(recount), 2),
        "tables60_ratio": round(ratio, 3),
        "tables60_runs": args.runs,
        "tables60_load_per_s": args.rate,
    }
    table = (
        f"\n## `zync status` with {TABLES} tables, the pipeline running "
        f"({time.strftime('%Y-%m-%d')}, {machine()})\n\n"
        f"{TABLES} Debezium-style topics of {ROWS} rows, the whole-database spec under `zync "
        f"run --follow` (default configuration), {args.rate:g} single-row updates a second; "
        f"`zync status` and `zync status --recount` in turns, {args.runs} runs each.\n\n"
        "| command | median | slowest |\n|---|---:|---:|\n"
        f"| `zync status` (the last passes' records) | {statistics.median(default):.2f} s | "
        f"{max(default):.2f} s |\n"
        f"| `zync status --recount` (Spark) | {statistics.median(recount):.2f} s | "
        f"{max(recount):.2f} s |\n\n"
        f"Ratio, pair by pair: {ratio:.3f}.\n"
    )
    publish_joined("status", table, figures)


if __name__ == "__main__":
    main()
