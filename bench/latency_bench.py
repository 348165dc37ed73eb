"""Freshness: produce → visible in the output topic (read_committed), with `zync run --follow`.

The continuous pipeline runs as a user starts it (`zync run etl_specs/invoices.yaml
--follow`, default configuration, local Spark) against a private stack. Measured:

- the demo's four batches, one after another, each until the sink's table holds it;
- single changes (an invoice and its status): p50 and p95 over --trials trials;
- steady loads of 100 and 1,000 events/s for --load-seconds each: p50 and p95 of each
  invoice's latency, and the pipeline's memory at the start and end of each load;
- the highest end-to-end rate: --max-pairs invoices with their statuses produced at once,
  events per second until the last output is visible;
- the ETL time of the passes that read ≤ 10,000 events (the pipeline prints each pass).

Run: `python -m bench.latency_bench` (about 15 minutes on 2 cores).

`--mode sensors` measures the other way instead: the stack as `zync stack up --dagster`
starts it, where Dagster's sensors start every run and the runs share the stack's Spark
Connect server: the demo's batches, single changes and a 100 events/s load.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from bench.common import bench_stack, free_port, machine, percentiles, publish_joined
from zync_assets.core.settings import KafkaSettings, RegistrySettings
from zync_assets.demo.invoices import produce_batch, reset, schema
from zync_assets.kafka.clients import ensure_topic, producer
from zync_assets.kafka.produce import Line, encode_lines
from zync_assets.kafka.registry import Registry
from zync_assets.stack.registry import registry_url
from zync_assets.stack.services import StackPorts, stack_down, stack_up
from zync_assets_tests.support.process_tree import tree_rss_mib

SPEC = Path(__file__).resolve().parent.parent / "etl_specs" / "invoices.yaml"
ZYNC = str(Path(sys.executable).parent / "zync")
DEMO_OUTPUTS = (2, 3, 5, 8)  # records in NewInvoices after each demo batch


class Seen:
    """Tails NewInvoices (read_committed) and notes when each invoice ID first appears."""

    def __init__(self, kafka: KafkaSettings, registry_url: str) -> None:
        from confluent_kafka import Consumer
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.avro import AvroDeserializer

        self._decode = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))
        self._consumer = Consumer({
            "bootstrap.servers": kafka.bootstrap_servers, "group.id": uuid.uuid4().hex,
            "isolation.level": "read_committed", "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000,
        })  # fmt: skip
        self._consumer.subscribe(["NewInvoices"])
        self.at: dict[int, float] = {}
        self.count = 0  # records received
        self._lock = threading.Lock()
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from confluent_kafka.serialization import MessageField, SerializationContext

        context = SerializationContext("NewInvoices", MessageField.VALUE)
        while not self._stop:
            message = self._consumer.poll(0.1)
            if message is None or message.error() or message.value() is None:
                continue
            value = self._decode(message.value(), context)
            with self._lock:
                self.count += 1
                self.at.setdefault(int(value["ID"]), time.monotonic())

    def wait(self, ids: list[int], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if all(i in self.at for i in ids):
                    return
            time.sleep(0.05)
        missing = [i for i in ids if i not in self.at]
        raise SystemExit(f"{len(missing)} invoices never reached NewInvoices (e.g. {missing[:3]})")

    def wait_count(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.count < count:
            if time.monotonic() > deadline:
                raise SystemExit(f"NewInvoices holds {self.count} records, not {count}")
            time.sleep(0.05)

    def close(self) -> None:
        self._stop = True
        self._thread.join()
        self._consumer.close()


class Pairs:
    """Invoices with their statuses, encoded in the demo's schemas, produced on demand."""

    def __init__(self, kafka: KafkaSettings, registry: Registry) -> None:
        self.kafka, self.registry = kafka, registry
        self.producer = producer(kafka, **{"linger.ms": 5})
        self.next_id = 1_000_000
        for topic in ("Invoices", "InvoiceStatus"):
            ensure_topic(kafka, topic)

    def send(self, count: int) -> list[int]:
        ids = list(range(self.next_id, self.next_id + count))
        self.next_id += count
        for topic in ("Invoices", "InvoiceStatus"):
            lines = [Line(n, {"ID": i}, _envelope(topic, i)) for n, i in enumerate(ids)]
            messages, _, _ = encode_lines(
                topic, lines, self.registry,
                schema(f"{topic}-key.avsc"), schema(f"{topic}-value.avsc"),
            )  # fmt: skip
            for key, value in messages:
                while True:
                    try:
                        self.producer.produce(topic, key=key, value=value)
                        break
                    except BufferError:
                        self.producer.poll(0.05)
        self.producer.flush(60)
        return ids


def _envelope(topic: str, i: int) -> dict:
    after = (
        {"ID": i, "customer": f"c{i}", "item": "tea"}
        if topic == "Invoices"
        else {"ID": i, "InvoiceID": i, "status": "new"}
    )
    source = {"connector": "postgresql", "db": "shop", "table": topic, "lsn": i}
    return {"before": None, "after": after, "op": "c", "source": source, "ts_ms": 0}


def steady_load(pairs: Pairs, seen: Seen, events_per_s: int, seconds: float) -> list[float]:
    """An invoice and its status every 2/rate seconds (in small groups); each one's latency."""
    sent_at: dict[int, float] = {}
    group = max(1, events_per_s // 20)  # 20 sends a second: 2*group events each
    period = 2 * group / events_per_s
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        tick = time.monotonic()
        for i in pairs.send(group):
            sent_at[i] = time.monotonic()
        time.sleep(max(0.0, period - (time.monotonic() - tick)))
    seen.wait(list(sent_at), timeout=600)
    return [seen.at[i] - t for i, t in sent_at.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("continuous", "sensors"), default="continuous")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--load-seconds", type=float, default=120.0)
    parser.add_argument("--max-pairs", type=int, default=100_000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="zync-bench-latency-"))
    os.environ["ZYNC_LAKE"] = str(work / "lake")
    if args.mode == "sensors":
        figures = measure_sensors(args, work)
    else:
        figures = measure_continuous(args, work)
    report(figures, args)


def measure_continuous(args, work: Path) -> dict[str, object]:
    with bench_stack() as (kafka, registry):
        reset(kafka)
        log = (work / "pipeline.log").open("w")
        env = {**os.environ, "DAGSTER_HOME": ""}
        pipeline = subprocess.Popen(
            [ZYNC, "run", str(SPEC), "--follow", "--no-dagster"], env=env, stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        seen = Seen(kafka, registry.settings.url)
        try:
            figures = measure(args, kafka, registry, seen, pipeline.pid)
        finally:
            pipeline.terminate()
            pipeline.wait(120)
            seen.close()
        figures["etl_small_pass_s"] = small_etl_pass(work / "pipeline.log")
    return figures


def measure_sensors(args, work: Path) -> dict[str, object]:
    """The stack as `zync stack up --dagster` starts it (Kafka, registry, the Spark Connect
    server, Dagster with its default sensor interval) on the invoice spec alone; nothing
    but the sensors starts a run."""
    specs = work / "specs"
    specs.mkdir()
    (specs / SPEC.name).write_text(SPEC.read_text())
    os.environ["ZYNC_SPECS"] = str(specs)
    home = work / ".zync"
    ports = StackPorts(free_port(), free_port(), free_port(), free_port())
    try:
        stack_up(ports, home, dagster_port=free_port(), spark_port=free_port())
        kafka = KafkaSettings(f"127.0.0.1:{ports.kafka}")
        registry = Registry(RegistrySettings(registry_url(ports.registry)))
        reset(kafka)
        seen = Seen(kafka, registry.settings.url)
        try:
            figures = measure_sensor_flow(args, kafka, registry, seen)
        finally:
            seen.close()
    finally:
        stack_down(home)
    return figures


def measure_sensor_flow(args, kafka: KafkaSettings, registry: Registry, seen: Seen) -> dict:
    demo_s, single, pairs = demo_and_singles(args, kafka, registry, seen, timeout=600)
    figures: dict[str, object] = {"sensor.demo_batches_s": demo_s}
    figures["sensor.p50_s"], figures["sensor.p95_s"] = percentiles(single)
    latencies = steady_load(pairs, seen, 100, args.load_seconds)
    figures["sensor.load_100.p50_s"], figures["sensor.load_100.p95_s"] = percentiles(latencies)
    print("load 100/s", percentiles(latencies), flush=True)
    return figures


def demo_and_singles(
    args, kafka: KafkaSettings, registry: Registry, seen: Seen, timeout: float
) -> tuple[float, list[float], Pairs]:
    """The demo's four batches one after another (seconds in all), then --trials single
    changes one at a time (each one's latency)."""
    started = time.monotonic()
    for batch, outputs in zip(range(1, 5), DEMO_OUTPUTS, strict=True):
        produce_batch(batch, kafka, registry)
        seen.wait_count(outputs, timeout=timeout)
    demo_s = round(time.monotonic() - started, 1)
    print("demo batches", demo_s, flush=True)
    pairs, single = Pairs(kafka, registry), []
    for _ in range(args.trials):
        (invoice,) = pairs.send(1)
        sent = time.monotonic()
        seen.wait([invoice], timeout=timeout)
        single.append(seen.at[invoice] - sent)
    print("single changes", percentiles(single), flush=True)
    return demo_s, single, pairs


def measure(args, kafka: KafkaSettings, registry: Registry, seen: Seen, pid: int) -> dict:
    demo_s, single, pairs = demo_and_singles(args, kafka, registry, seen, timeout=300)
    figures: dict[str, object] = {"demo_batches_s": demo_s}
    figures["continuous.single_p50_s"], figures["continuous.single_p95_s"] = percentiles(single)

    for rate in (100, 1000):
        rss_before = tree_rss_mib(pid)
        latencies = steady_load(pairs, seen, rate, args.load_seconds)
        p50, p95 = percentiles(latencies)
        figures |= {f"continuous.load_{rate}.p50_s": p50, f"continuous.load_{rate}.p95_s": p95,
                    f"continuous.load_{rate}.rss_start_mib": round(rss_before),
                    f"continuous.load_{rate}.rss_end_mib": round(tree_rss_mib(pid))}  # fmt: skip
        print(f"load {rate}/s", p50, p95, flush=True)
    figures["continuous.p50_s"] = figures["continuous.load_1000.p50_s"]
    figures["continuous.p95_s"] = figures["continuous.load_1000.p95_s"]

    started = time.monotonic()
    ids = pairs.send(args.max_pairs)
    seen.wait(ids, timeout=1800)
    elapsed = time.monotonic() - started
    figures["continuous.max_events_per_s"] = round(2 * args.max_pairs / elapsed)
    figures["continuous.max_events"] = 2 * args.max_pairs
    print("max rate", figures["continuous.max_events_per_s"], flush=True)
    return figures


def small_etl_pass(log: Path) -> float | None:
    """Median ETL time of the passes that read at most 10,000 events."""
    small, read = [], None
    for line in log.read_text().splitlines():
        if (match := re.search(r" run \d+: read (\d+) pending events", line)) is not None:
            read = int(match.group(1))
        elif (match := re.search(r"^pass: .*etl ([\d.]+)s", line)) and read is not None:
            if read <= 10_000:
                small.append(float(match.group(1)))
            read = None
    return round(statistics.median(small), 2) if small else None


def report(figures: dict[str, object], args) -> None:
    """The run's table; its figures join those of the other mode in latency.json."""

    def row(what: str, key: str) -> str:
        return f"| {what} | {figures.get(key, 'not measured')} |"

    if args.mode == "sensors":
        text = f"""
### Freshness through Dagster's sensors (runs on the stack's Spark Connect server), {dt.date.today()} — {machine()}

Default configuration (`zync stack up --dagster`: sensors every 1 s, a Kafka sensor watching
for 4 s of each evaluation, the run queue looked at every second, at most two runs at a
time); produce → visible in NewInvoices with read_committed. Every run was started by a
sensor; each run's Spark work went to the stack's one warm Spark Connect server.

| figure | value |
|---|---:|
{row("the demo's four batches, one after another (s)", "sensor.demo_batches_s")}
{row(f"single change p50 (s), {args.trials} trials", "sensor.p50_s")}
{row("single change p95 (s)", "sensor.p95_s")}
{row(f"100 events/s for {args.load_seconds:.0f} s: p50 (s)", "sensor.load_100.p50_s")}
{row("100 events/s: p95 (s)", "sensor.load_100.p95_s")}
"""
    else:
        text = f"""
### Freshness with `zync run --follow` (continuous pipeline, local Spark), {dt.date.today()} — {machine()}

Default configuration; produce → visible in NewInvoices with read_committed. Steady loads ran
{args.load_seconds:.0f} s each.

| figure | value |
|---|---:|
{row("the demo's four batches, one after another (s)", "demo_batches_s")}
{row(f"single change p50 (s), {args.trials} trials", "continuous.single_p50_s")}
{row("single change p95 (s)", "continuous.single_p95_s")}
{row("100 events/s: p50 (s)", "continuous.load_100.p50_s")}
{row("100 events/s: p95 (s)", "continuous.load_100.p95_s")}
{row("1,000 events/s: p50 (s)", "continuous.load_1000.p50_s")}
{row("1,000 events/s: p95 (s)", "continuous.load_1000.p95_s")}
{row("pipeline memory at the start of the 1,000 events/s load (MiB)", "continuous.load_1000.rss_start_mib")}
{row("pipeline memory at its end (MiB)", "continuous.load_1000.rss_end_mib")}
{row(f"highest end-to-end rate, {figures.get('continuous.max_events')} events at once (events/s)", "continuous.max_events_per_s")}
{row("ETL time of a pass over ≤ 10,000 events, median (s)", "etl_small_pass_s")}
"""
    publish_joined("latency", text, figures)


if __name__ == "__main__":
    main()
