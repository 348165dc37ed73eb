"""A real database through the whole chain, with the bare chain beside it:
`python -m bench.real_database_bench` (about an hour on 2 cores with its defaults).

A private stack (`zync stack up --cdc`) and a PostgreSQL source database of --tables
tables in the six shapes of zync_assets/demo/whole_database.py (bigint, UUID and
composite keys, a wide row, a TOASTed column, jsonb/text[]/enum/numeric/uuid columns) and
about --rows rows: three plain tables of 100,000+ rows, 200 rows in each TOASTed table,
the rest spread evenly. Wired as docs/debezium.md says: Debezium's source captures the
whole schema; `zync run --follow` (its default configuration: local Spark, one loop) runs
the whole-database spec (a lake table and a warehouse topic per table) and, on the same
session, a spec with a three-way join view over three of the tables; Debezium's JDBC
sink upserts zync's topics into the warehouse. Beside it, the bare chain: a second JDBC
sink reading Debezium's own topics, no zync, into a second warehouse database (`bare`).

  snapshot.debezium_rows_per_s  the seeded rows over the seconds from registering the
                                source to Debezium's topics holding all of them
  snapshot.bare_rows_per_s      … to every bare warehouse table holding its rows (the
                                bare sink is registered first and reads as Debezium writes)
                                through the stack's sink (zync's isolating connector and
                                timed converter, jvm/connect)
  snapshot.bare_plain_rows_per_s  … through Debezium's own connector and Apicurio's own
                                converter, reading the same topics at the same time into a
                                third database (`bare_plain`)
  snapshot.isolation_ratio      the plain sink's seconds over the stack's (1: it costs
                                nothing; below 1: the stack's sink is slower)
  snapshot.lake_rows_per_s      zync, started once Debezium's topics are full: the rows
                                over the seconds from `zync run --follow`'s start (Spark's
                                start included) to every lake table having applied its
                                topic's end (read from its commit files)
  snapshot.warehouse_rows_per_s … to every zync warehouse table holding its rows
  single.p50_s, p95_s           one UPDATE of a small table's row, one at a time → zync's
                                warehouse row (polled every 50 ms)
  single.bare_p50_s, bare_p95_s … → the bare warehouse's row
  single.tables_p50_s, …        … → its lake table applied it (its commit files)
  single.views_p50_s, …         one UPDATE of a view input's row → the view's warehouse row
  sustained.steps               for each rate of source transactions (--steps, each held
                                --step-seconds): the transactions/s PostgreSQL took, the
                                Debezium events/s, a marker row's lag to zync's warehouse
                                (p50/p95, first and last minute), to the bare warehouse
                                and to its lake table; a step is carried when its markers
                                all arrive within --max-lag seconds and the last minute's
                                p95 is at most twice the first's plus 5 s. Stepping stops
                                at the first step not carried.
  sustained.tables60_events_per_s  the Debezium events/s of the highest carried step
                                (0: none carried)
  sustained.p95_s, p95_growth   that rate (or the first step's, if none was carried) held
                                --hold-seconds: the marker's p95 to zync's warehouse, and
                                its last minute's p95 over its first minute's
  sustained.tables60_lake_p95_s  … the marker's p95 to its lake table over that hold
  sustained.tables1_events_per_s   the same steps on a database of one table (its own
                                source database, connector, spec and pipeline)
  status_s                      `zync status`'s seconds, median of its runs every 30 s
                                under the load (the 60-table pipeline)
  rss_max_mib                   the pipeline's resident memory (its process tree), peak,
                                from the single changes to the load's end
  snapshot.rss_max_mib          … peak while the snapshot went through it
  load.passes, load.*_median_s  the 60-table pipeline's passes under the load (steps and
                                hold): how many, and the median seconds of a pass and of
                                each of its stages, from the pipeline's own pass lines
  load.tables_waiting_median    … the lake tables a pass's pacing left for the next one
  load.spark_jobs_per_pass      … the Spark jobs they ran over their count: the one
                                setting the benchmark adds to the default is Spark's UI
                                (its REST API counts the jobs; off by default)
  converged_after_load_s        the seconds from the load's end to every copy's counts
                                equal to its source's (polled every 30 s)
  counts_mismatched             after the load: tables whose lake, zync-warehouse or bare
                                row count differs from its source's (0 is right; the bare
                                chain's TOAST placeholders do not change counts)

The load is a PostgreSQL procedure (one transaction per change, COMMIT between) called
every 100 ms with the rate's share, so the writer costs the machine little; the tables
are drawn by a Zipf-like skew (weight 1/rank); a plain table's change is an update (70%),
an upsert or a delete of a random key, any other table's an update. The marker table is
left out of the load. Appends its table to docs/BENCHMARKS.md, writes
bench/results/real_database.json and docs/img/real_database_lag.png.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import psycopg

from bench.common import cdc_work, lake_applied, machine, percentiles, publish
from bench.common import wait_until as common_wait_until
from zync_assets.core.settings import KafkaSettings
from zync_assets.demo import whole_database as db
from zync_assets.demo.chain import Chain
from zync_assets.kafka.offsets import high_marks, watermarks
from zync_assets.lake.pools import pool_exists, table_path
from zync_assets.stack import postgres
from zync_assets.stack.connectors import connector_config
from zync_assets.stack.register import register_sink, register_source, sink_dead_letters
from zync_assets.stack.registry import registry_url, registry_v2_url
from zync_assets.stack.services import stack_down, stack_up
from zync_assets_tests.support.ports import free_port
from zync_assets_tests.support.process_tree import tree_rss_mib

BIG = ("t06", "t12", "t18")  # plain tables: the 100,000+ rows
MARKER = "t60"  # plain, small, left out of the load
VIEW_INPUTS = ("t24", "t30", "t36")  # plain, small
TOASTED_ROWS = 200
TIMEOUT_S = 1800.0
ZYNC = str(Path(sys.executable).parent / "zync")


def wait_until(condition, what: str, poll_s: float, timeout: float = TIMEOUT_S,
               sink: tuple[Chain, str] | None = None) -> float:  # fmt: skip
    """Seconds until `condition()`; a TimeoutError after `timeout`, or as soon as connector
    `sink` (chain, name) has a failed task."""
    return common_wait_until(condition, what, poll_s, timeout,
                             check=partial(_sink_running, *sink) if sink else None)  # fmt: skip


def _sink_running(chain: Chain, name: str) -> None:
    state, tasks = chain.connect.state(name)
    if any(s.startswith("FAILED") for s in (state, *tasks)):
        raise RuntimeError(f"sink {name} failed ({state}, {tasks})")


def sizes(chosen: list[db.Table], rows: int, small_rows: int) -> dict[str, int]:
    """Rows per table: 200 per TOASTed table, `small_rows` per other small one, the rest of
    `rows` in BIG's tables (at least 1,000 each)."""
    small = {t.name: min(TOASTED_ROWS, small_rows) if t.shape == "toasted" else small_rows
             for t in chosen if t.name not in BIG}  # fmt: skip
    big = [t.name for t in chosen if t.name in BIG]
    each = max(1_000, -(-(rows - sum(small.values())) // max(1, len(big))))  # rounded up
    return small | {name: each for name in big}


def seed(chain: Chain, chosen: list[db.Table], counts: dict[str, int]) -> None:
    """Each table's rows 0..count-1, by COPY."""
    with chain.source() as conn:
        for table in chosen:
            columns = ", ".join(table.columns)
            with conn.cursor().copy(f"COPY {table.name} ({columns}) FROM STDIN") as copy:
                for n in range(counts[table.name]):
                    copy.write_row(table.row(n))
        conn.commit()


def _key_where(table: db.Table) -> str:
    """Row $1 of the table (whole_database's row(n)) as a SQL condition."""
    if table.shape == "uuid":
        return "id = lpad(to_hex($1 + 1), 32, '0')::uuid"
    if table.shape == "composite":
        return "region = (CASE WHEN $1 % 2 = 0 THEN 'north' ELSE 'south' END) AND num = $1"
    return "id = $1"


def _statements(table: db.Table) -> tuple[str, str | None, str | None]:
    """(update, upsert, delete) of row $1 with text $2; upsert and delete for plain rows."""
    column = {"wide": "c01", "typed": "attrs"}.get(table.shape, "name")
    value = "jsonb_build_object('v', $2::text)" if table.shape == "typed" else "$2::text"
    update = f"UPDATE {table.name} SET {column} = {value} WHERE {_key_where(table)}"
    if table.shape != "plain":
        return update, None, None
    upsert = (f"INSERT INTO {table.name} (id, name, amount, day, flag) "
              "VALUES ($1, $2::text, 1, DATE '2024-01-01', true) "
              "ON CONFLICT (id) DO UPDATE SET name = excluded.name")  # fmt: skip
    return update, upsert, f"DELETE FROM {table.name} WHERE id = $1"


LOAD_PROCEDURE = """
CREATE OR REPLACE PROCEDURE zync_load(n int, upd text[], ins text[], del text[],
                                      sizes int[], cum float8[])
LANGUAGE plpgsql AS $$
DECLARE i int; j int; r float8; k bigint; op float8;
BEGIN
  FOR i IN 1..n LOOP
    r := random(); j := 1;
    WHILE j < array_length(cum, 1) AND cum[j] < r LOOP j := j + 1; END LOOP;
    k := floor(random() * sizes[j]);
    op := random();
    IF ins[j] IS NOT NULL AND op < 0.15 THEN EXECUTE ins[j] USING k, md5(random()::text);
    ELSIF ins[j] IS NOT NULL AND op < 0.3 THEN EXECUTE del[j] USING k;
    ELSE EXECUTE upd[j] USING k, md5(random()::text);
    END IF;
    COMMIT;
  END LOOP;
END $$;
"""


@dataclass
class Load:
    """A writer of `rate` transactions a second over the tables, on its own thread."""

    chain: Chain
    tables: list[db.Table]
    counts: dict[str, int]
    rate: float = 0.0
    done: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        statements = [_statements(t) for t in self.tables]
        weights = [1 / (rank + 1) for rank in range(len(self.tables))]
        running, cum = 0.0, []
        for w in weights:
            running += w / sum(weights)
            cum.append(running)
        self.args = ([s[0] for s in statements], [s[1] for s in statements],
                     [s[2] for s in statements], [self.counts[t.name] for t in self.tables],
                     cum)  # fmt: skip
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with self.chain.source(autocommit=True) as conn:
            conn.execute(LOAD_PROCEDURE)
            started, owed_from = time.monotonic(), 0
            rate = self.rate
            while not self.stop.is_set():
                if self.rate != rate:  # a new step: count from now
                    rate, started, owed_from = self.rate, time.monotonic(), self.done
                owed = int(rate * (time.monotonic() - started)) - (self.done - owed_from)
                if owed > 0:
                    batch = min(owed, max(1, int(rate // 5)))
                    conn.execute("CALL zync_load(%s, %s, %s, %s, %s, %s)", [batch, *self.args])
                    self.done += batch
                else:
                    time.sleep(0.1)


@dataclass
class Markers:
    """A marker row updated every `every_s` seconds ('m-<n>', n rising); when a copy shows
    marker n, it holds every marker before it (one key: one partition, in order)."""

    chain: Chain
    table: str
    key: int
    every_s: float = 2.0
    committed: list[float] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with self.chain.source(autocommit=True) as conn:
            while not self.stop.is_set():
                n = len(self.committed)
                conn.execute(f"UPDATE {self.table} SET name = %s WHERE id = %s",
                             [f"m-{n:08d}", self.key])  # fmt: skip
                self.committed.append(time.monotonic())
                self.stop.wait(self.every_s)


@dataclass
class Arrivals:
    """When each marker reached one copy: seen[n], monotonic seconds."""

    seen: dict[int, float] = field(default_factory=dict)
    shown: int = -1

    def saw(self, value: object, now: float) -> None:
        if isinstance(value, str) and value.startswith("m-"):
            n = int(value[2:])
            for m in range(self.shown + 1, n + 1):
                self.seen[m] = now
            self.shown = max(self.shown, n)

    def lags(self, markers: Markers, first: int, last: int) -> list[float]:
        return [self.seen[n] - markers.committed[n] for n in range(first, last) if n in self.seen]


def warehouse_value(port: int, database: str, table: str, column: str, where: str) -> object:
    with psycopg.connect(postgres.dsn(port, database), autocommit=True) as conn:
        try:
            row = conn.execute(f'SELECT {column} FROM "{table}" WHERE {where}').fetchone()
        except psycopg.errors.UndefinedTable:
            return None
    return row[0] if row else None


def warehouse_count(conn: psycopg.Connection, table: str) -> int:
    try:
        return int(conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])  # type: ignore[index]
    except psycopg.errors.UndefinedTable:
        return -1


@dataclass(frozen=True)
class Database:
    """One source database through the chain: its Chain, tables, row counts, and where
    zync's and the bare sink's copies of a table are."""

    chain: Chain
    tables: list[db.Table]
    counts: dict[str, int]
    lake_prefix: str = ""

    def topic(self, table: str) -> str:
        return f"{self.chain.name}.public.{table}"

    def zync_table(self, table: str) -> str:
        return f"{self.chain.name}_wh_{table}"

    def bare_table(self, table: str) -> str:
        return f"{self.chain.name}_public_{table}"  # the sink's naming of topic a.b.c

    def lake_table(self, table: str) -> str:
        return f"{self.lake_prefix}{table}"


def spec_text(database: Database) -> str:
    """The documented whole-database spec; for a second database in the same lake, its
    own pool and lake-table names."""
    text = db.whole_spec(database.chain.name)
    if database.lake_prefix:
        text = text.replace("pool: Whole}", f"pool: {database.lake_prefix}Whole}}")
        text = text.replace("pool: WholeOut}", f"pool: {database.lake_prefix}WholeOut}}")
        text = text.replace("name: '{table}'", f"name: '{database.lake_prefix}{{table}}'")
    return text


def views_spec_text(prefix: str) -> str:
    """A three-way join over VIEW_INPUTS, reading them from the whole spec's raw pool: a
    topic feeds one pool, so a view spec naming them for a pool of its own would take
    them from the whole spec's pattern (and its lake tables and mirror)."""
    a, b, c = (f"{prefix}.public.{t}" for t in VIEW_INPUTS)
    return f"""inputs:
  - {{topic: {a}, pool: Whole}}
  - {{topic: {b}, pool: Whole}}
  - {{topic: {c}, pool: Whole}}
outputs:
  - {{topic: {prefix}_wh_view3, pool: ViewsStaging}}
transforms:
  - type: view
    inputs: {{a: {a}, b: {b}, c: {c}}}
    key: id
    out: {prefix}_wh_view3
    sql: |
      SELECT a.after:id::bigint AS id, a.after:name::string AS a_name,
             b.after:name::string AS b_name, c.after:name::string AS c_name
      FROM a JOIN b ON b.after:id::bigint = a.after:id::bigint
             JOIN c ON c.after:id::bigint = a.after:id::bigint
"""


def source_database(name: str, chosen: list[db.Table], counts: dict[str, int],
                    work, lake_prefix: str = "") -> Database:  # fmt: skip
    chain = Chain(name, "avro", work.cdc.source_db, work.cdc.warehouse_db, work.cdc.connect,
                  registry_v2_url(work.ports.registry))  # fmt: skip
    chain.create_source_tables(db.schema_ddl(chosen))
    seed(chain, chosen, counts)
    return Database(chain, chosen, counts, lake_prefix)


def capture(database: Database) -> None:
    chain = database.chain
    register_source(chain.addresses, f"{chain.name}-source", chain.name, [], "avro",
                    topic_prefix=chain.name, publication=chain.name, schema="public")  # fmt: skip


def start_pipeline(specs: list[Path], log: Path, ui_port: int | None = None) -> subprocess.Popen:
    """`zync run --follow SPECS`, its output in `log`; with `ui_port`, Spark's UI on that
    port (the default has none), so that its REST API counts the pipeline's Spark jobs."""
    env = os.environ.copy()
    if ui_port is not None:
        conf = log.with_suffix(".spark.conf")
        given = env.get("ZYNC_SPARK_CONF")  # a user's own properties, kept under the UI's
        own = Path(given).read_text() + "\n" if given else ""
        conf.write_text(f"{own}spark.ui.enabled true\nspark.ui.port {ui_port}\n")
        env["ZYNC_SPARK_CONF"] = str(conf)
    return subprocess.Popen([ZYNC, "run", "--follow", "--no-dagster", *map(str, specs)],
                            stdout=log.open("w"), stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)  # fmt: skip


def spark_jobs(ui_port: int) -> int | None:
    """How many Spark jobs the pipeline has run (its newest job's id + 1), from its UI's
    REST API; None when it does not answer."""
    base = f"http://127.0.0.1:{ui_port}/api/v1/applications"
    try:
        with urllib.request.urlopen(base, timeout=10) as answer:
            (app, *_) = json.load(answer)
        with urllib.request.urlopen(f"{base}/{app['id']}/jobs", timeout=30) as answer:
            jobs = json.load(answer)
    except (OSError, ValueError):
        return None
    return max((job["jobId"] for job in jobs), default=-1) + 1


# Debezium's own JDBC sink with Apicurio's own converter, beside the stack's (zync's
# isolating connector and timed converter, jvm/connect): what the isolation costs.
PLAIN = "bare_plain"


def register_plain_sink(chain: Chain, name: str, pattern: str) -> None:
    config = connector_config(
        "jdbc-sink", "avro", topics="-", warehouse_port=str(chain.warehouse_port),
        database=PLAIN, registry_v2=chain.addresses.registry_v2,
        dead_letters=sink_dead_letters(name),
    )  # fmt: skip
    plain = "io.apicurio.registry.utils.converter.AvroConverter"
    del config["topics"]
    config |= {"connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
               "key.converter": plain, "value.converter": plain, "topics.regex": pattern,
               "consumer.override.metadata.max.age.ms": "10000"}  # fmt: skip
    chain.connect.put(name, config)
    chain.connect.wait_running(name)


def snapshot(database: Database, kafka: KafkaSettings, specs: list[Path], log: Path,
             figures: dict[str, object], ui_port: int) -> subprocess.Popen:  # fmt: skip
    """Debezium's snapshot with the bare sink reading, then zync's: their rows/s."""
    chain, total = database.chain, sum(database.counts.values())
    topics = [database.topic(t.name) for t in database.tables]
    pattern = rf"{chain.name}\.public\.t[0-9]+"
    for warehouse in ("bare", PLAIN):
        postgres.create_database(chain.warehouse_port, warehouse)
    register_sink(chain.addresses, f"{chain.name}-bare", [], "avro", database="bare",
                  topics_regex=pattern)  # fmt: skip
    register_plain_sink(chain, f"{chain.name}-{PLAIN}", pattern)
    started = time.monotonic()
    capture(database)

    def in_topics() -> int:
        marks = high_marks(watermarks(kafka, topics, missing_ok=True))
        return sum(sum(parts.values()) for parts in marks.values())

    debezium_s = wait_until(lambda: in_topics() >= total, "Debezium's snapshot", 1.0)
    # The stack's sink and Debezium's plain one read the same topics side by side: each
    # poll looks at both, and each gets the time of the first poll that found it full.
    done: dict[str, float] = {}

    def both_full() -> bool:
        for name in ("bare", PLAIN):
            if name not in done and full(name):
                done[name] = time.monotonic() - started
        return len(done) == 2

    def full(warehouse: str) -> bool:
        with psycopg.connect(postgres.dsn(chain.warehouse_port, warehouse), autocommit=True) as wh:
            return all(warehouse_count(wh, database.bare_table(t.name)) == database.counts[t.name]
                       for t in database.tables)  # fmt: skip

    wait_until(both_full, "the bare warehouses", 1.0, sink=(chain, f"{chain.name}-bare"))
    bare_s = done["bare"]
    ends = {t: sum(parts.values()) for t, parts in high_marks(watermarks(kafka, topics)).items()}
    register_sink(chain.addresses, f"{chain.name}-sink", [], "avro",
                  topics_regex=f"{chain.name}_wh_.*")  # fmt: skip
    started = time.monotonic()
    pipeline = start_pipeline(specs, log, ui_port)
    memory = Sampler(pipeline, [])  # its resident memory while the snapshot goes through
    wait_until(lambda: all(lake_applied(database.lake_table(t.name), database.topic(t.name))
                           >= ends[database.topic(t.name)] for t in database.tables),
               "the lake tables", 5.0)  # fmt: skip
    lake_s = time.monotonic() - started
    with chain.warehouse() as wh:
        wait_until(lambda: all(warehouse_count(wh, database.zync_table(t.name))
                               == database.counts[t.name] for t in database.tables),
                   "zync's warehouse", 2.0, sink=(chain, f"{chain.name}-sink"))  # fmt: skip
    warehouse_s = time.monotonic() - started
    memory.stop.set()
    figures |= {
        "snapshot.rss_max_mib": round(max(memory.rss)) if memory.rss else None,
        "snapshot.rows": total,
        "snapshot.debezium_s": round(debezium_s, 1),
        "snapshot.debezium_rows_per_s": round(total / debezium_s),
        "snapshot.bare_s": round(bare_s, 1),
        "snapshot.bare_rows_per_s": round(total / bare_s),
        "snapshot.bare_plain_s": round(done[PLAIN], 1),
        "snapshot.bare_plain_rows_per_s": round(total / done[PLAIN]),
        "snapshot.isolation_ratio": round(done[PLAIN] / bare_s, 3),
        "snapshot.lake_s": round(lake_s, 1),
        "snapshot.lake_rows_per_s": round(total / lake_s),
        "snapshot.warehouse_s": round(warehouse_s, 1),
        "snapshot.warehouse_rows_per_s": round(total / warehouse_s),
    }
    print(f"snapshot: Debezium {debezium_s:.0f} s, bare {bare_s:.0f} s, zync lake {lake_s:.0f} s,"
          f" zync warehouse {warehouse_s:.0f} s", flush=True)  # fmt: skip
    return pipeline


def single_changes(database: Database, kafka: KafkaSettings, trials: int,
                   figures: dict[str, object]) -> None:  # fmt: skip
    """One UPDATE at a time of the marker table's row 0, then of a view input's row 0."""
    chain, port = database.chain, database.chain.warehouse_port
    topic = database.topic(MARKER)
    reached: dict[str, list[float]] = {"zync": [], "bare": [], "lake": [], "view": []}
    for n in range(trials):
        value = f"single-{n}"
        before = high_marks(watermarks(kafka, [topic]))[topic].get(0, 0)
        with chain.source(autocommit=True) as conn:
            conn.execute(f"UPDATE {MARKER} SET name = %s WHERE id = 0", [value])
        committed, seen = time.monotonic(), dict[str, float]()
        while len(seen) < 3:
            if time.monotonic() - committed > 600:
                raise TimeoutError(f"single change {n}: not through ({sorted(seen)})")
            now = time.monotonic() - committed
            if (
                "zync" not in seen
                and warehouse_value(
                    port, postgres.WAREHOUSE.database, database.zync_table(MARKER), "name", "id = 0"
                )
                == value
            ):
                seen["zync"] = now
            if (
                "bare" not in seen
                and warehouse_value(port, "bare", database.bare_table(MARKER), "name", "id = 0")
                == value
            ):
                seen["bare"] = now
            if "lake" not in seen and lake_applied(MARKER, topic) > before:
                seen["lake"] = now
            time.sleep(0.05)
        for where, seconds in seen.items():
            reached[where].append(seconds)
    for n in range(trials):
        value = f"view-{n}"
        with chain.source(autocommit=True) as conn:
            conn.execute(f"UPDATE {VIEW_INPUTS[0]} SET name = %s WHERE id = 0", [value])
        committed = time.monotonic()
        wait_until(lambda v=value: warehouse_value(
            port, postgres.WAREHOUSE.database, f"{chain.name}_wh_view3", "a_name", "id = 0"
        ) == v, "the view's row", 0.05, timeout=600)  # fmt: skip
        reached["view"].append(time.monotonic() - committed)
    for where, name in (("zync", ""), ("bare", "bare_"), ("lake", "tables_"), ("view", "views_")):
        p50, p95 = percentiles(reached[where])
        figures[f"single.{name}p50_s"], figures[f"single.{name}p95_s"] = p50, p95
    print("single:", {k: percentiles(v) for k, v in reached.items()}, flush=True)


@dataclass
class Sampler:
    """The pipeline's RSS every 5 s and `zync status`'s seconds every 30 s, on a thread;
    with `ui_port`, the Spark jobs it has run, every 5 s."""

    pipeline: subprocess.Popen
    status_specs: list[Path]
    ui_port: int | None = None
    rss: list[float] = field(default_factory=list)
    status: list[float] = field(default_factory=list)
    jobs: list[int] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        last_status = 0.0
        while not self.stop.wait(5):
            self.rss.append(tree_rss_mib(self.pipeline.pid))
            if self.ui_port is not None and (jobs := spark_jobs(self.ui_port)) is not None:
                self.jobs.append(jobs)
            if self.status_specs and time.monotonic() - last_status >= 30:
                last_status = time.monotonic()
                subprocess.run([ZYNC, "status", "--format", "json", *map(str, self.status_specs)],
                               capture_output=True, env=os.environ.copy(), timeout=300)  # fmt: skip
                self.status.append(time.monotonic() - last_status)


@dataclass(frozen=True)
class Stepped:
    steps: list[dict[str, object]]  # each step's figures, in order
    best_events_per_s: float  # of the highest carried step (0: none)
    held: dict[str, object] | None  # the hold's figures
    trace: list[tuple[float, str, float]]  # (seconds since start, phase, zync lag)


def run_steps(database: Database, kafka: KafkaSettings, rates: list[int], step_s: float,
              hold_s: float, max_lag_s: float, lake_marker: bool,
              marker: tuple[str, int]) -> Stepped:  # fmt: skip
    """Each rate for `step_s` seconds while carried, then the highest carried one held for
    `hold_s`: per step the rates and the marker's lags; the lag over time, for the plot."""
    chain, port = database.chain, database.chain.warehouse_port
    loaded = [t for t in database.tables if t.name != MARKER]
    topics = [database.topic(t.name) for t in database.tables]
    marker_topic = database.topic(marker[0])
    markers = Markers(chain, marker[0], marker[1])
    load = Load(chain, loaded, database.counts)
    zync, bare, lake = Arrivals(), Arrivals(), Arrivals()
    base = high_marks(watermarks(kafka, [marker_topic]))[marker_topic].get(0, 0)
    trace: list[tuple[float, str, float]] = []  # (seconds since start, phase, zync lag)
    t0 = time.monotonic()

    def poll_until(deadline: float, phase: str) -> None:
        lake_read = 0.0
        while time.monotonic() < deadline:
            now = time.monotonic()
            zync.saw(warehouse_value(port, postgres.WAREHOUSE.database,
                                     database.zync_table(marker[0]), "name",
                                     f"id = {marker[1]}"), now)  # fmt: skip
            if lake_marker:
                bare.saw(warehouse_value(port, "bare", database.bare_table(marker[0]), "name",
                                         f"id = {marker[1]}"), now)  # fmt: skip
                if now - lake_read >= 1.0:
                    lake_read = now
                    applied = lake_applied(database.lake_table(marker[0]), marker_topic)
                    lake.saw(f"m-{applied - base - 1}", now)  # markers are its only events
            pending = [n for n in range(len(markers.committed)) if n not in zync.seen]
            lag = now - markers.committed[pending[0]] if pending else 0.0
            trace.append((now - t0, phase, lag))
            time.sleep(0.25)

    def events() -> int:
        return sum(sum(p.values()) for p in high_marks(watermarks(kafka, topics)).values())

    def step(rate: int, seconds: float, phase: str) -> tuple[dict[str, object], float, bool]:
        first, before, done = len(markers.committed), events(), load.done
        started = time.monotonic()
        load.rate = rate
        poll_until(started + seconds, phase)
        last = len(markers.committed)
        took = time.monotonic() - started
        tx, evs = load.done - done, events() - before
        load.rate = 0
        poll_until(time.monotonic() + 0.1, phase)
        drain = time.monotonic() + max_lag_s
        while zync.shown < last - 1 and time.monotonic() < drain:
            poll_until(time.monotonic() + 1, phase)
        lags = zync.lags(markers, first, last)
        minute = max(1, int(60 / markers.every_s))
        head, tail = lags[:minute], lags[-minute:]
        p95 = percentiles(lags)[1] if lags else None
        head_p95 = percentiles(head)[1] if head else None
        tail_p95 = percentiles(tail)[1] if tail else None
        carried = (bool(lags) and len(lags) == last - first and max(lags) <= max_lag_s
                   and tail_p95 is not None and head_p95 is not None
                   and tail_p95 <= 2 * head_p95 + 5)  # fmt: skip
        result: dict[str, object] = {
            "rate": rate, "tx_per_s": round(tx / took, 1), "events_per_s": round(evs / took, 1),
            "p50_s": percentiles(lags)[0] if lags else None, "p95_s": p95,
            "first_minute_p95_s": head_p95, "last_minute_p95_s": tail_p95,
            "p95_growth": round(tail_p95 / head_p95, 2) if head_p95 and tail_p95 else None,
            "markers": last - first, "arrived": len(lags), "carried": carried,
        }  # fmt: skip
        if lake_marker:
            for name, copy in (("bare", bare), ("lake", lake)):
                got = copy.lags(markers, first, last)
                result[f"{name}_p50_s"], result[f"{name}_p95_s"] = (
                    percentiles(got) if got else (None, None)
                )
        print(f"{chain.name} {phase} {rate}/s:", result, flush=True)
        # the next step starts caught up (or as caught up as it gets in max_lag_s)
        catch_up = time.monotonic() + max_lag_s
        while zync.shown < len(markers.committed) - 1 and time.monotonic() < catch_up:
            poll_until(time.monotonic() + 1, "catch-up")
        return result, round(evs / took, 1), carried

    steps: list[dict[str, object]] = []
    carried_rate, best = None, 0.0
    try:
        for rate in rates:
            result, events_per_s, carried = step(rate, step_s, f"step {rate}/s")
            steps.append(result)
            if not carried:
                break
            carried_rate, best = rate, events_per_s
        held = step(carried_rate or rates[0], hold_s, "hold")[0] if hold_s else None
    finally:
        load.stop.set()
        markers.stop.set()
    return Stepped(steps, best, held, trace)


# A pass line (cli/run.py's report_timing): its stages (a maintenance stage may follow
# the tables), then how many lake tables its pacing left for the next pass.
PASS_LINE = re.compile(
    r"^pass: ([\d.]+)s \(ingest ([\d.]+)s, etl ([\d.]+)s, to-kafka ([\d.]+)s, tables ([\d.]+)s"
    r"[^)]*\)(?:; (\d+) lake tables wait)?"
)


def pass_lines(log: Path) -> list[tuple[float, ...]]:
    """(pass, ingest, etl, to-kafka, tables seconds, tables left waiting) of each pass the
    pipeline logged."""
    found = (PASS_LINE.match(line) for line in log.read_text().splitlines())
    return [tuple(float(g or 0) for g in m.groups()) for m in found if m]


def pass_figures(log: Path, skip: int, jobs: int | None) -> dict[str, object]:
    """The passes after the first `skip`: how many, the median seconds of each stage and
    of lake tables left waiting, and (given the Spark jobs they ran) jobs per pass."""
    passes = pass_lines(log)[skip:]
    figures: dict[str, object] = {"load.passes": len(passes)}
    stages = ("pass", "ingest", "etl", "to_kafka", "tables")
    for i, stage in enumerate(stages):
        values = [p[i] for p in passes]
        figures[f"load.{stage}_median_s"] = round(statistics.median(values), 2) if values else None
    waiting = [p[len(stages)] for p in passes]
    figures["load.tables_waiting_median"] = statistics.median(waiting) if waiting else None
    figures["load.spark_jobs_per_pass"] = (
        round(jobs / len(passes), 1) if jobs is not None and passes else None
    )
    return figures


def counts_mismatched(spark, database: Database) -> int:
    wrong = 0
    with database.chain.source() as source, database.chain.warehouse() as wh, psycopg.connect(
        postgres.dsn(database.chain.warehouse_port, "bare"), autocommit=True
    ) as bare:  # fmt: skip
        for table in database.tables:
            want = int(source.execute(f"SELECT count(*) FROM {table.name}").fetchone()[0])  # type: ignore[index]
            path = table_path(database.lake_table(table.name))
            lake = spark.read.format("delta").load(path).count() if pool_exists(path) else -1
            got = (lake, warehouse_count(wh, database.zync_table(table.name)),
                   warehouse_count(bare, database.bare_table(table.name)))  # fmt: skip
            if any(n != want for n in got):
                print(f"counts {table.name}: source {want}, lake/zync/bare {got}", flush=True)
                wrong += 1
    return wrong


def plot(traces: dict[str, list[tuple[float, str, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, axes = plt.subplots(len(traces), 1, figsize=(10, 3.2 * len(traces)), squeeze=False)
    for ax, (name, trace) in zip(axes[:, 0], traces.items(), strict=True):
        phases = list(dict.fromkeys(p for _, p, _ in trace if p != "catch-up"))
        for phase in [*phases, "catch-up"]:
            points = [(t, lag) for t, p, lag in trace if p == phase]
            if points:
                ax.plot(*zip(*points, strict=True), ".", markersize=2, label=phase)
        ax.set_title(f"{name}: oldest marker not yet in zync's warehouse")
        ax.set_xlabel("seconds")
        ax.set_ylabel("lag (s)")
        ax.legend(fontsize=7, markerscale=4)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=60)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--small-rows", type=int, default=5_000, help="per small table")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--steps", default="50,100,200,500,1000")
    parser.add_argument("--step-seconds", type=float, default=180.0)
    parser.add_argument("--hold-seconds", type=float, default=600.0)
    parser.add_argument("--max-lag", type=float, default=60.0)
    parser.add_argument("--one-table-rows", type=int, default=100_000)
    parser.add_argument(
        "--snapshot-only",
        action="store_true",
        help="stop after the snapshot (its figures join the results file)",
    )
    args = parser.parse_args()
    rates = [int(r) for r in args.steps.split(",")]
    work = cdc_work("zync-bench-realdb-")
    kafka = KafkaSettings(f"127.0.0.1:{work.ports.kafka}")
    os.environ["ZYNC_KAFKA_BOOTSTRAP"] = kafka.bootstrap_servers
    os.environ["ZYNC_SCHEMA_REGISTRY_URL"] = registry_url(work.ports.registry)
    os.environ["ZYNC_CONNECT_URL"] = f"http://127.0.0.1:{work.cdc.connect}"  # for status
    figures: dict[str, object] = {"tables": args.tables, "step_seconds": args.step_seconds,
                                  "hold_seconds": args.hold_seconds, "steps": rates}  # fmt: skip
    traces: dict[str, list[tuple[float, str, float]]] = {}
    pipeline: subprocess.Popen | None = None
    try:
        stack_up(work.ports, work.home, cdc=work.cdc)
        chosen = db.tables(args.tables)
        seeded = time.monotonic()
        big = source_database("realdb", chosen, sizes(chosen, args.rows, args.small_rows), work)
        print(f"seeded {sum(big.counts.values()):,} rows in {time.monotonic() - seeded:.0f} s",
              flush=True)  # fmt: skip
        specs = [work.specs / "whole.yaml", work.specs / "views.yaml"]
        specs[0].write_text(spec_text(big))
        specs[1].write_text(views_spec_text("realdb"))
        log = work.specs.parent / "pipeline.log"
        ui_port = free_port()
        pipeline = snapshot(big, kafka, specs, log, figures, ui_port)
        if args.snapshot_only:
            return report_snapshot(figures)
        sampler = Sampler(pipeline, specs, ui_port)
        single_changes(big, kafka, args.trials, figures)
        passes_before, jobs_before = len(pass_lines(log)), spark_jobs(ui_port)
        sixty = run_steps(big, kafka, rates, args.step_seconds, args.hold_seconds, args.max_lag,
                          True, (MARKER, 1))  # fmt: skip
        jobs_after = spark_jobs(ui_port)
        sampler.stop.set()
        traces["60 tables"] = sixty.trace
        held = sixty.held or {}
        figures |= {
            "sustained.tables60_steps": sixty.steps,
            "sustained.tables60_events_per_s": sixty.best_events_per_s,
            "sustained.held": {k: v for k, v in held.items()},
            "sustained.p95_s": held.get("p95_s"),
            "sustained.p95_growth": held.get("p95_growth"),
            "sustained.tables60_lake_p95_s": held.get("lake_p95_s"),
            "status_s": round(statistics.median(sampler.status), 2) if sampler.status else None,
            "status_max_s": round(max(sampler.status), 2) if sampler.status else None,
            "rss_max_mib": round(max(sampler.rss)) if sampler.rss else None,
        }  # fmt: skip
        jobs = jobs_after - jobs_before if jobs_after is not None and jobs_before else None
        figures |= pass_figures(log, passes_before, jobs)
        from zync_assets.spark.session import spark_session

        spark, stopped = spark_session(), time.monotonic()
        while (wrong := counts_mismatched(spark, big)) and time.monotonic() - stopped < TIMEOUT_S:
            time.sleep(30)  # the backlog the load left is still on its way
        figures["counts_mismatched"] = wrong
        figures["converged_after_load_s"] = round(time.monotonic() - stopped)
        pipeline.terminate()
        pipeline.wait(timeout=300)
        one_table = [db.Table("t01", "plain")]
        one = source_database("onedb", one_table, {"t01": args.one_table_rows}, work, "one_")
        one_spec = work.specs / "one.yaml"
        one_spec.write_text(spec_text(one))
        capture(one)
        register_sink(one.chain.addresses, "onedb-sink", [], "avro", topics_regex="onedb_wh_.*")
        pipeline = start_pipeline([one_spec], work.specs.parent / "one.log")
        with one.chain.warehouse() as wh:
            wait_until(lambda: warehouse_count(wh, one.zync_table("t01")) == args.one_table_rows,
                       "the one-table warehouse", 2.0)  # fmt: skip
        with one.chain.source(autocommit=True) as conn:
            db.insert(conn, one_table[0], args.one_table_rows + 1000)
        single = run_steps(one, kafka, rates, args.step_seconds, 0, args.max_lag, False,
                           ("t01", args.one_table_rows + 1000))  # fmt: skip
        traces["1 table"] = single.trace
        figures["sustained.tables1_steps"] = single.steps
        figures["sustained.tables1_events_per_s"] = single.best_events_per_s
    finally:
        if pipeline is not None:
            pipeline.terminate()
            pipeline.wait(timeout=300)
        stack_down(work.home)
    plot(traces, Path("docs/img/real_database_lag.png"))
    report(figures)


def _cell(value: object) -> str:
    return "–" if value is None else str(value)


def report(figures: dict[str, object]) -> None:
    f = figures
    rows = []
    for name in ("tables60_steps", "tables1_steps"):
        for s in f.get(f"sustained.{name}", []):  # type: ignore[attr-defined]
            rows.append(f"| {name[:-6]} | {s['rate']} | {s['tx_per_s']} | {s['events_per_s']} | "
                        f"{_cell(s['p50_s'])} / {_cell(s['p95_s'])} | "
                        f"{_cell(s.get('bare_p95_s'))} | {_cell(s.get('lake_p95_s'))} | "
                        f"{'yes' if s['carried'] else 'no'} |")  # fmt: skip
    text = "\n".join([
        "", f"### A real database through the chain, zync beside the bare chain, "
        f"{dt.date.today()} — {machine()}", "",
        f"`python -m bench.real_database_bench`: {f['tables']} tables, "
        f"{f['snapshot.rows']:,} rows; `zync run --follow` (default configuration) of the "
        "whole-database spec and a three-way-join view spec; the bare chain is Debezium's "
        "JDBC sink on Debezium's topics (no zync).", "",
        "| figure | zync | bare chain |", "|---|---:|---:|",
        f"| snapshot → lake tables, rows/s | {f['snapshot.lake_rows_per_s']} | – |",
        f"| snapshot → warehouse, rows/s | {f['snapshot.warehouse_rows_per_s']} | "
        f"{f['snapshot.bare_rows_per_s']} |",
        f"| Debezium's snapshot into Kafka, rows/s | – | {f['snapshot.debezium_rows_per_s']} |",
        f"| one change → warehouse, p50 / p95 s | {f['single.p50_s']} / {f['single.p95_s']} | "
        f"{f['single.bare_p50_s']} / {f['single.bare_p95_s']} |",
        f"| one change → lake table, p50 / p95 s | {f['single.tables_p50_s']} / "
        f"{f['single.tables_p95_s']} | – |",
        f"| one change → the three-way view's row, p50 / p95 s | {f['single.views_p50_s']} / "
        f"{f['single.views_p95_s']} | – |",
        f"| highest carried load, 60 tables, events/s | "
        f"{f['sustained.tables60_events_per_s']} | – |",
        f"| highest carried load, 1 table, events/s | "
        f"{f.get('sustained.tables1_events_per_s')} | – |",
        f"| held {f['hold_seconds']:.0f} s: p95 to the warehouse, last minute over first | "
        f"{_cell(f['sustained.p95_s'])} s, {_cell(f['sustained.p95_growth'])} | – |",
        f"| `zync status` under load, median / max s | {_cell(f['status_s'])} / "
        f"{_cell(f['status_max_s'])} | – |",
        f"| the pipeline's RSS, peak MiB: snapshot / after it | "
        f"{_cell(f.get('snapshot.rss_max_mib'))} / {_cell(f['rss_max_mib'])} | – |",
        f"| passes under the load (60 tables): count, median s | {f['load.passes']}, "
        f"{_cell(f['load.pass_median_s'])} | – |",
        f"| … of which ingest / ETL / to-kafka / lake tables, median s | "
        f"{_cell(f['load.ingest_median_s'])} / {_cell(f['load.etl_median_s'])} / "
        f"{_cell(f['load.to_kafka_median_s'])} / {_cell(f['load.tables_median_s'])} | – |",
        f"| … Spark jobs per pass (Spark's UI on for the count); lake tables left waiting, "
        f"median | {_cell(f['load.spark_jobs_per_pass'])}; "
        f"{_cell(f['load.tables_waiting_median'])} | – |",
        f"| after the load stopped: converged in s | {f['converged_after_load_s']} | – |",
        f"| tables whose counts differ after the load | {f['counts_mismatched']} | |", "",
        f"Steps of {f['step_seconds']:.0f} s (a marker row every 2 s; lags in seconds):", "",
        "| database | target tx/s | tx/s | events/s | zync warehouse p50 / p95 | bare p95 "
        "| lake p95 | carried |",
        "|---|---:|---:|---:|---:|---:|---:|---|", *rows, "",
        "![lag over time](img/real_database_lag.png)", "",
    ])  # fmt: skip
    publish("real_database", text, figures)


def report_snapshot(figures: dict[str, object]) -> None:
    """--snapshot-only: the snapshot's figures, joined to the results file."""
    f = figures
    text = "\n".join([
        "", f"### A real database's snapshot, zync beside the bare chain, {dt.date.today()} "
        f"— {machine()}", "",
        f"`python -m bench.real_database_bench --snapshot-only`: {f['tables']} tables, "
        f"{f['snapshot.rows']:,} rows. The bare chain's two sinks read Debezium's topics at "
        "the same time: the stack's (zync's isolating connector and timed converter) and "
        "Debezium's own connector with Apicurio's own converter.", "",
        "| figure | rows/s | seconds |", "|---|---:|---:|",
        f"| Debezium's snapshot into Kafka | {f['snapshot.debezium_rows_per_s']} | "
        f"{f['snapshot.debezium_s']} |",
        f"| → bare warehouse, the stack's sink | {f['snapshot.bare_rows_per_s']} | "
        f"{f['snapshot.bare_s']} |",
        f"| → bare warehouse, Debezium's plain sink | {f['snapshot.bare_plain_rows_per_s']} | "
        f"{f['snapshot.bare_plain_s']} |",
        f"| → zync's lake tables | {f['snapshot.lake_rows_per_s']} | {f['snapshot.lake_s']} |",
        f"| → zync's warehouse | {f['snapshot.warehouse_rows_per_s']} | "
        f"{f['snapshot.warehouse_s']} |", "",
        f"Isolation's cost: plain seconds / the stack's = {f['snapshot.isolation_ratio']}. "
        f"The pipeline's resident memory (its process tree) peaked at "
        f"{_cell(f.get('snapshot.rss_max_mib'))} MiB.", "",
    ])  # fmt: skip
    publish("real_database", text, figures)


if __name__ == "__main__":
    main()
