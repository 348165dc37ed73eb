"""The soak's machinery: changes flow for minutes while the pipeline is killed at random,
then every offset and every change is reconciled.

A producer writes Debezium-shaped changes continuously (creates, updates, deletes with
tombstones, a poison message now and then, a schema change half-way: soak_source.py)
while `zync run SPEC --follow` ingests, transforms and sends them; it is killed with
SIGKILL every few seconds and started again at once. With `rival`, a second pipeline runs
beside it the whole time and is never killed: two writers of every pool and of the lake
table, each compacting as `pipeline_args` say. At the end the producer stops, the running
pipelines catch up, and everything is counted:

- every source offset is in the raw pool exactly once (poison ones as dead letters), and
  every input event has one done record in the staging pool;
- the output topic holds one record per change (no more, no less), and an upserting
  sink's table built from it equals the source table;
- the lake table of the topic equals the source table.

`test_soak.py` runs one minute of it on the suite's stack; `bench/soak.py` runs it for
longer on a private stack and plots throughput and memory.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from zync_assets.core.settings import KafkaSettings
from zync_assets.kafka.consume import Undecodable, consume
from zync_assets.kafka.offsets import watermarks
from zync_assets.kafka.registry import Registry
from zync_assets_tests.support.process_tree import tree_rss_mib
from zync_assets_tests.support.soak_source import SoakSource

ZYNC = str(Path(sys.executable).parent / "zync")
SPEC = """
inputs:
  - {{topic: {topic}, pool: SoakRaw}}
outputs:
  - {{topic: {topic}_out, pool: SoakStaging}}
transforms:
  - {{type: stateless, where: "op IN ('c', 'r', 'u')", in: {topic}, out: {topic}_out,
     sql: "in.key AS key, in.after AS value"}}
  - {{type: stateless, where: "op = 'd'", in: {topic}, out: {topic}_out,
     sql: "in.key AS key, NULL AS value"}}
tables:
  - {{name: soak, source: {topic}, keys: [id]}}
"""


@dataclass
class Sample:
    at: float
    produced: int
    delivered: int
    rss_mib: float


@dataclass
class Soak:
    kafka: KafkaSettings
    registry: Registry
    minutes: float
    workdir: Path
    seed: int = 23
    kill_every: tuple[float, float] = (15, 45)  # seconds between kills, drawn uniformly
    rival: bool = False  # a second pipeline beside the killed one, never killed
    pipeline_args: tuple[str, ...] = ()  # given to every pipeline, e.g. --compact-every 1
    samples: list[Sample] = field(default_factory=list)
    kills: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.topic = f"soak_{int(time.time())}"
        self.spec = self.workdir / "soak.yaml"
        self.spec.write_text(SPEC.format(topic=self.topic))
        self.env = {**os.environ, "ZYNC_LAKE": str(self.workdir / "lake")}
        self.source = SoakSource(self.kafka, self.registry, self.topic, seed=self.seed)
        self.rng = random.Random(self.seed)
        self.run: subprocess.Popen | None = None
        self.rival_run: subprocess.Popen | None = None
        self.catch_up_s = 0.0
        self.started = time.monotonic()

    def _start_pipeline(self, log_name: str = "pipeline.log") -> subprocess.Popen:
        command = [ZYNC, "run", str(self.spec), "--follow", "--interval", "0.5s",
                   "--no-dagster", *self.pipeline_args]  # fmt: skip
        log = (self.workdir / log_name).open("a")
        return subprocess.Popen(command, env=self.env, stdout=log, stderr=log,
                                start_new_session=True)  # fmt: skip

    def _delivered(self) -> int:
        marks = watermarks(self.kafka, [f"{self.topic}_out"], missing_ok=True)
        return sum(p.high for p in marks[f"{self.topic}_out"])

    def _sample(self) -> None:
        rss = tree_rss_mib(self.run.pid) if self.run and self.run.poll() is None else 0.0
        self.samples.append(Sample(time.monotonic() - self.started, self.source.produced,
                                   self._delivered(), rss))  # fmt: skip

    def flow(self) -> None:
        """Produce for `minutes`, killing and restarting the pipeline at random."""
        self.source.start()
        self.run = self._start_pipeline()
        if self.rival:
            self.rival_run = self._start_pipeline("rival.log")
        end = self.started + self.minutes * 60
        next_kill = time.monotonic() + self.rng.uniform(*self.kill_every)
        next_sample = time.monotonic()
        evolve_at = self.started + self.minutes * 30
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= evolve_at and not self.source.evolved:
                self.source.evolve()
            if now >= next_sample:
                self._sample()
                next_sample = now + 5
            if now >= next_kill:
                os.killpg(self.run.pid, signal.SIGKILL)
                self.run.wait()
                self.kills.append(now - self.started)
                self.run = self._start_pipeline()
                next_kill = now + self.rng.uniform(*self.kill_every)
            for run, log in ((self.run, "pipeline.log"), (self.rival_run, "rival.log")):
                if run is not None and run.poll() is not None:
                    raise RuntimeError(f"a pipeline exited by itself: {self.workdir / log}")
            time.sleep(0.2)
        self.source.stop()

    def catch_up(self) -> None:
        """Let the running pipelines take in the rest (the output topic and the lake
        table), then stop them cleanly (SIGTERM: each finishes its commit)."""
        target = self.source.produced - len(self.source.poison) - self.source.deletes
        started = time.monotonic()
        deadline = started + 600
        while self._delivered() < target and time.monotonic() < deadline:
            self._sample()
            time.sleep(5)
        while self._lake_table_differs() and time.monotonic() < deadline:
            time.sleep(2)
        self.catch_up_s = time.monotonic() - started
        assert self.run is not None, "the pipeline never started"
        for run in (self.run, self.rival_run):
            if run is not None:
                run.send_signal(signal.SIGTERM)
        for run in (self.run, self.rival_run):
            if run is not None:
                run.wait(timeout=120)
        self._sample()

    def _lake_table(self) -> dict[int, dict] | None:
        """The lake table's rows by id (its source columns only), or None before its first
        commit."""
        from zync_assets.lake.pools import TABLES_FOLDER, pool_exists
        from zync_assets.spark.session import spark_session

        path = str(self.workdir / "lake" / TABLES_FOLDER / "soak")
        if not pool_exists(path):
            return None
        rows = spark_session("zync-soak-reconcile").read.format("delta").load(path).collect()
        fields = ("id", "name", "qty", "note")
        return {row["id"]: {f: row[f] for f in fields if f in row} for row in
                (r.asDict() for r in rows)}  # fmt: skip

    def _lake_table_differs(self) -> bool:
        table = self._lake_table()
        return table is None or _differences(table, self.source.table) > 0

    def reconcile(self) -> dict[str, int]:
        """Every source offset in the raw pool once; the output one record per change and,
        folded by key, equal to the source table."""
        from zync_assets.spark.session import spark_session

        # The process's session (a test's shared one too): not stopped here.
        spark = spark_session("zync-soak-reconcile")
        raw = spark.read.format("delta").load(str(self.workdir / "lake" / "SoakRaw"))
        rows = raw.selectExpr("kafka.partition AS p", "kafka.offset AS o",
                              "dead_letter IS NOT NULL AS dead").collect()  # fmt: skip
        ends = {p.partition: p.high for p in watermarks(self.kafka, [self.topic])[self.topic]}
        seen: dict[tuple[int, int], int] = {}
        for row in rows:
            seen[(row.p, row.o)] = seen.get((row.p, row.o), 0) + 1
        expected = {(p, o) for p, end in ends.items() for o in range(end)}
        dead = {(r.p, r.o) for r in rows if r.dead}
        table, outputs = self._output_table()
        staging = spark.read.format("delta").load(str(self.workdir / "lake" / "SoakStaging"))
        done = staging.where("kind = 'done'").selectExpr("kafka.partition", "kafka.offset")
        history = spark.sql(f"DESCRIBE HISTORY delta.`{self.workdir / 'lake' / 'SoakRaw'}`")
        lake_table = self._lake_table() or {}
        changes = self.source.produced - len(self.source.poison) - self.source.deletes
        return {
            "records_produced": self.source.produced,
            "records_reconciled": len(expected & set(seen)),
            "records_lost": len(expected - set(seen)),
            "records_duplicated": sum(n - 1 for n in seen.values()),
            "poison_messages": len(self.source.poison),
            "poison_not_dead_lettered": len(self.source.poison - dead),
            "output_records": outputs,
            "output_records_expected": changes,
            "table_rows": len(table),
            "table_rows_differing": _differences(table, self.source.table),
            "done_records": done.count(),
            "done_records_duplicated": done.count() - done.distinct().count(),
            "raw_compactions": history.where("operation = 'OPTIMIZE'").count(),
            "lake_table_rows": len(lake_table),
            "lake_table_rows_differing": _differences(lake_table, self.source.table),
        }

    def _output_table(self) -> tuple[dict[int, dict], int]:
        table: dict[int, dict] = {}
        count = 0
        for record in consume(self.kafka, self.registry, f"{self.topic}_out",
                              from_beginning=True, idle_timeout=10):  # fmt: skip
            if isinstance(record, Undecodable):
                raise RuntimeError(f"an output record does not decode: {record}")
            count += 1
            key = record["key"]["id"]
            if record["value"] is None:
                table.pop(key, None)
            else:
                table[key] = record["value"]
        return table, count


def _differences(got: dict[int, dict], want: dict[int, dict]) -> int:
    def normal(row: dict) -> dict:
        return {k: v for k, v in row.items() if v is not None}

    keys = set(got) | set(want)
    return sum(1 for k in keys if normal(got.get(k, {})) != normal(want.get(k, {})))


def run_soak(
    kafka: KafkaSettings, registry: Registry, minutes: float, workdir: Path,
    kill_every: tuple[float, float] = (15, 45), rival: bool = False,
    pipeline_args: tuple[str, ...] = (),
) -> tuple[Soak, dict[str, float]]:  # fmt: skip
    """Run the soak against `kafka` and `registry` (the environment names the same stack
    to the `zync` processes); the soak and its figures."""
    soak = Soak(kafka, registry, minutes, workdir, kill_every=kill_every, rival=rival,
                pipeline_args=pipeline_args)  # fmt: skip
    soak.flow()
    soak.catch_up()
    figures: dict[str, float] = dict(soak.reconcile())
    figures |= {
        "soak_minutes": minutes,
        "kills_survived": len(soak.kills),
        "catch_up_s_after_last_kill": round(soak.catch_up_s),
        "changes_per_s_produced": round(soak.source.produced / (minutes * 60), 1),
        "peak_rss_mib": round(max((s.rss_mib for s in soak.samples), default=0.0)),
    }
    return soak, figures
