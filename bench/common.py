"""Shared benchmark plumbing: a stack to run against, Debezium-style events, timing."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from zync_assets.codec.avro import encode
from zync_assets.core.settings import KafkaSettings, RegistrySettings
from zync_assets.kafka.clients import ensure_topic, producer
from zync_assets.kafka.offsets import topic_offsets
from zync_assets.kafka.registry import Registry
from zync_assets.lake.pools import pool_exists, table_path
from zync_assets.stack.registry import registry_url
from zync_assets.stack.services import CdcPorts, StackPorts, stack_down, stack_up
from zync_assets.tables.state import table_history
from zync_assets_tests.support.ports import free_port
from zync_assets_tests.support.process_tree import tree_rss_mib

ROW = {
    "type": "record",
    "name": "Value",
    "namespace": "bench.public.orders",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer_id", "type": "long"},
        {"name": "status", "type": "string"},
        {"name": "sku", "type": "string"},
        {"name": "quantity", "type": "int"},
        {
            "name": "amount",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2},
        },
        {"name": "currency", "type": "string"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "created_at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "updated_at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    ],
}
ENVELOPE = {
    "type": "record",
    "name": "Envelope",
    "namespace": "bench.public.orders",
    "fields": [
        {"name": "before", "type": ["null", ROW], "default": None},
        {"name": "after", "type": ["null", "Value"], "default": None},
        {
            "name": "source",
            "type": {
                "type": "record",
                "name": "Source",
                "fields": [
                    {"name": "version", "type": "string"},
                    {"name": "connector", "type": "string"},
                    {"name": "name", "type": "string"},
                    {"name": "ts_ms", "type": "long"},
                    {"name": "db", "type": "string"},
                    {"name": "schema", "type": "string"},
                    {"name": "table", "type": "string"},
                    {"name": "snapshot", "type": ["null", "string"], "default": None},
                    {"name": "sequence", "type": ["null", "string"], "default": None},
                    {"name": "txId", "type": ["null", "long"], "default": None},
                    {"name": "lsn", "type": ["null", "long"], "default": None},
                    {"name": "xmin", "type": ["null", "long"], "default": None},
                ],
            },
        },
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None},
    ],
}
KEY = {"type": "record", "name": "Key", "namespace": "bench.public.orders",
       "fields": [{"name": "id", "type": "long"}]}  # fmt: skip
DISTINCT_PAYLOADS = 2000  # encoded once, cycled: the benchmark measures ingest, not fastavro


BENCHMARKS_MD = Path(__file__).resolve().parent.parent / "docs" / "BENCHMARKS.md"


def publish(name: str, table: str, figures: dict[str, object]) -> None:
    """Append the benchmark's table to docs/BENCHMARKS.md, show it, write its figures,
    keeping every figure of its results file this run did not measure (another benchmark's
    that shares the file, or another mode's): a benchmark never drops another's figures."""
    publish_joined(name, table, figures)


def _publish(
    name: str, table: str, figures: dict[str, object], measured_by: list | None = None
) -> None:
    with BENCHMARKS_MD.open("a") as out:
        out.write(table)
    print(table)
    write_results(name, figures, measured_by)


def publish_joined(name: str, table: str, figures: dict[str, object]) -> None:
    """`publish`: the figures other runs wrote to the same results file are kept;
    `measured_by` says which run (date, machine, commit) measured each figure, as the
    file's own date and machine are the newest run's."""
    path = Path(__file__).resolve().parent / "results" / f"{name}.json"
    earlier = json.loads(path.read_text()) if path.is_file() else {}
    kept = {k: v for k, v in earlier.get("figures", {}).items() if k not in figures}
    runs = earlier.get("measured_by") or (
        [{"figures": sorted(earlier.get("figures", {})),
          **{k: earlier.get(k) for k in ("date", "machine", "commit")}}] if earlier else []
    )  # fmt: skip
    runs = [{**r, "figures": [f for f in r["figures"] if f in kept]} for r in runs]
    this = {"figures": sorted(figures), "date": dt.date.today().isoformat(),
            "machine": machine(), "commit": measured_code().get("commit")}  # fmt: skip
    _publish(name, table, {**kept, **figures}, [r for r in runs if r["figures"]] + [this])


def percentiles(values: list[float]) -> tuple[float, float]:
    """(p50, p95) of `values`, rounded to hundredths."""
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return round(statistics.median(ordered), 2), round(p95, 2)


def write_results(name: str, figures: dict[str, object], measured_by: list | None = None) -> Path:
    """`bench/results/<name>.json`: the benchmark's figures by name, the machine, the date
    (and, for figures joined from several runs, which run measured which)."""
    folder = Path(__file__).resolve().parent / "results"
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.json"
    record = {"benchmark": name, "date": dt.date.today().isoformat(), "machine": machine(),
              **measured_code(), "figures": figures}  # fmt: skip
    if measured_by:
        record["measured_by"] = measured_by
    path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return path


@dataclass(frozen=True)
class ModelRun:
    """A reference-model test run by a benchmark: how many cases and seeds, whether every
    round equalled the model, and, if not, the assertion that said how."""

    cases: int
    seeds: int
    passed: bool
    seconds: float
    failure: str | None


def run_model_test(
    test: str, keyword: str, env: dict[str, str], cases: int, seeds: int
) -> ModelRun:
    """The model test `test` (`-k keyword`) in a pytest of its own, with its own stack and
    lake, at the sizes `env` sets: what it found, not what a constant says it would."""
    child = {**os.environ, **env}
    for name in ("ZYNC_KAFKA_BOOTSTRAP", "ZYNC_SCHEMA_REGISTRY_URL", "ZYNC_LAKE"):
        child.pop(name, None)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", test, "-n", "0", "-q", "-p", "no:cacheprovider",
         "-k", keyword], env=child, capture_output=True, text=True, timeout=3 * 3600,
    )  # fmt: skip
    seconds = round(time.monotonic() - started, 1)
    if done.returncode == 0 and re.search(rf"\b{seeds} passed\b", done.stdout):
        return ModelRun(cases, seeds, True, seconds, None)
    failed = [line for line in done.stdout.splitlines() if line.startswith(("E ", "FAILED"))]
    if not failed:
        raise RuntimeError(f"{test} did not run: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    return ModelRun(cases, seeds, False, seconds, "\n".join(failed[:5]))


def measured_code() -> dict[str, object]:
    """The commit the benchmark ran on and whether the tree was clean (a dirty tree's
    figures measured code that no commit holds): bench/stale.py compares it with HEAD."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()  # fmt: skip

    try:
        commit = git("rev-parse", "HEAD")
        from bench.stale import MEASURED

        dirty = git("status", "--porcelain", "--untracked-files=no", "--", *MEASURED, "bench",
                    ":!bench/results")  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "clean": None}
    return {"commit": commit, "clean": not dirty}


def machine() -> str:
    cpu = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores ({cpu}), {memory:.0f} GiB, {platform.platform()}"


def event(i: int) -> tuple[dict, dict]:
    """An update (before and after images), as Debezium's Postgres connector sends it."""
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i)
    row = {
        "id": i, "customer_id": random.randrange(10_000), "status": "NEW", "sku": f"SKU-HOUSEHOLD-{i % 977:05d}",
        "quantity": 1 + i % 7, "amount": Decimal(random.randrange(100, 10**7)) / 100,
        "currency": "EUR", "note": "gift wrap, leave the parcel at the back door", "created_at": now, "updated_at": now,
    }  # fmt: skip
    before = {**row, "status": "NEW", "note": None}
    after = {**row, "status": "PAYMENT_RECEIVED", "updated_at": now + dt.timedelta(minutes=5)}
    value = {
        "before": before, "after": after, "op": "u", "ts_ms": 1_767_225_600_000 + i,
        "source": {"version": "2.7.0.Final", "connector": "postgresql", "name": "shopdb",
                   "ts_ms": 1_767_225_600_000 + i, "snapshot": "false", "db": "shop",
                   "sequence": f'["{33_000_000 + i}","{33_000_100 + i}"]', "schema": "public",
                   "table": "orders", "txId": 1000 + i, "lsn": 33_000_000 + i, "xmin": None},
    }  # fmt: skip
    return {"id": i}, value


def fill_topic(kafka: KafkaSettings, registry: Registry, topic: str, count: int) -> float:
    """Make `topic` hold `count` events (reused if it already does); returns mean value bytes."""
    from fastavro import parse_schema

    key_id = registry.register(f"{topic}-key", KEY)
    value_id = registry.register(f"{topic}-value", ENVELOPE)
    key_schema, value_schema = parse_schema(KEY), parse_schema(ENVELOPE)
    payloads = [event(i) for i in range(DISTINCT_PAYLOADS)]
    values = [encode(value_id, value_schema, v) for _k, v in payloads]
    ensure_topic(kafka, topic)
    have = sum(p.high for p in topic_offsets(kafka, topic))
    out = producer(kafka, **{"linger.ms": 50, "batch.size": 1_000_000, "compression.type": "lz4"})
    for i in range(have, count):
        key = encode(key_id, key_schema, {"id": i})
        while True:
            try:
                out.produce(topic, key=key, value=values[i % DISTINCT_PAYLOADS])
                break
            except BufferError:
                out.poll(0.05)
    out.flush(120)
    return sum(len(v) for v in values) / len(values)


@dataclass(frozen=True)
class CdcWork:
    """A private CDC stack's folders and ports (see `cdc_work`)."""

    home: Path  # the stack's state (.zync)
    specs: Path  # ZYNC_SPECS
    ports: StackPorts
    cdc: CdcPorts


def cdc_work(prefix: str) -> CdcWork:
    """Folders and free ports for a private stack with the CDC services; ZYNC_SPECS and
    ZYNC_LAKE point into them."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    home, specs, lake = work / ".zync", work / "specs", work / "lake"
    specs.mkdir()
    os.environ |= {"ZYNC_SPECS": str(specs), "ZYNC_LAKE": str(lake)}
    ports = StackPorts(free_port(), free_port(), free_port(), free_port())
    return CdcWork(home, specs, ports, CdcPorts(free_port(), free_port(), free_port()))


@contextmanager
def bench_stack() -> Iterator[tuple[KafkaSettings, Registry]]:
    """The stack named by ZYNC_KAFKA_BOOTSTRAP/ZYNC_SCHEMA_REGISTRY_URL, else a private one."""
    if os.environ.get("ZYNC_KAFKA_BOOTSTRAP"):
        from zync_assets.core.settings import kafka_settings, registry_settings

        yield kafka_settings(), Registry(registry_settings())
        return
    home = Path(tempfile.mkdtemp(prefix="zync-bench-")) / ".zync"
    ports = StackPorts(free_port(), free_port(), free_port(), free_port())
    try:
        stack_up(ports, home)
        os.environ["ZYNC_KAFKA_BOOTSTRAP"] = f"127.0.0.1:{ports.kafka}"
        os.environ["ZYNC_SCHEMA_REGISTRY_URL"] = registry_url(ports.registry)
        yield (
            KafkaSettings(f"127.0.0.1:{ports.kafka}"),
            Registry(RegistrySettings(registry_url(ports.registry))),
        )
    finally:
        stack_down(home)


def timed_subprocess(command: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(seconds, peak RSS of the whole process tree in MiB, stdout) of a command."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, tree_rss_mib(proc.pid))
        time.sleep(0.25)
    seconds = time.perf_counter() - started
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{command} failed: {err[-2000:]}")
    return seconds, peak, out


def wait_until(
    condition: Callable[[], bool], what: str, poll_s: float, timeout: float = 900.0,
    check: Callable[[], None] | None = None,
) -> float:  # fmt: skip
    """Seconds until `condition()` holds, asking every `poll_s`; a TimeoutError naming
    `what` after `timeout`. `check()`, called at each poll, raises to give up early (a
    failed connector will not make the condition true)."""
    started = time.monotonic()
    while not condition():
        if check is not None:
            check()
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"{what}: not after {timeout:.0f} s")
        time.sleep(poll_s)
    return time.monotonic() - started


def lake_applied(table: str, topic: str) -> int:
    """The end offset of `topic` (partition 0) that lake table `table` has applied (0: no
    table yet)."""
    path = table_path(table)
    if not pool_exists(path):
        return 0
    return max((v.cursors.get(topic, {}).get(0, 0) for v in table_history(path, table)),
               default=0)  # fmt: skip
