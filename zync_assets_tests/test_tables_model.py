"""Lake tables against a reference model (table_model.py) on random CDC streams.

Each case is a few keys with a story (inserts, snapshot reads, tracked and untracked
updates, updates that change nothing, deletes with Debezium's tombstone after them,
re-inserts), delivered as a source would deliver it at its worst: out of order within a
bound, some events twice, late snapshot reads of older states. The cases share one
topic of 3 partitions (a key stays in its partition) and are cut into rounds; after each
round the events go through the real Kafka, ingest and the table passes (SCD1 and SCD2),
and both tables must equal the model's, row for row.

The default (CI) is one seed of ZYNC_TABLE_MODEL_CASES=1000 cases (2,000 until the suite
had to fit a machine 2.3 times slower; bench/tables_bench.py runs the model larger); more
by hand:
    ZYNC_TABLE_MODEL_SEEDS=10 scripts/test.sh -k tables_model
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from zync_assets.lake.pools import table_path
from zync_assets_tests.conftest import Stack, produce_json
from zync_assets_tests.table_model import Change, TableModel
from zync_assets_tests.test_etl import Pipeline
from zync_assets_tests.test_tables import ENVELOPE

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FIRST_SEED = int(os.environ.get("ZYNC_TABLE_MODEL_FIRST_SEED", "0"))
SEEDS = int(os.environ.get("ZYNC_TABLE_MODEL_SEEDS", "1"))
CASES = int(os.environ.get("ZYNC_TABLE_MODEL_CASES", "1000"))
ROUNDS = 4
BOUND = 4  # how far (in events) a delivery may move ahead of its place

SPEC = """
inputs:
  - {topic: $Items, pool: Raw}
tables:
  - {name: current, source: $Items, keys: [id], sequence-by: "source:lsn::bigint"}
  - name: history
    source: $Items
    keys: [id]
    sequence-by: source:lsn::bigint
    stored-as: scd2
    track-history-except-column-list: [note]
"""
TRACKED = [0, 2]  # name and price; note is untracked


def story(rng: random.Random, key: int) -> list[tuple[str, int | None, tuple | None]]:
    """(op, lsn, row) in the source's order; lsn steps by 10 so late snapshots fit between."""
    events: list[tuple[str, int | None, tuple | None]] = []
    lsn = 0
    row: tuple[str, str | None, str] | None = None
    for _ in range(rng.randint(1, 8)):
        lsn += 10 * rng.randint(1, 3)
        if row is None:
            row = (rng.choice("abc"), None, f"{rng.randint(1, 9)}.50")
            events.append((rng.choice("ccr"), lsn, row))
            continue
        what = rng.random()
        if what < 0.2:
            events.append(("d", lsn, None))
            if rng.random() < 0.5:
                events.append(("tombstone", None, None))
            row = None
            continue
        if what < 0.45:
            row = (rng.choice("abcd"), row[1], row[2])  # tracked (or the same name again)
        elif what < 0.7:
            row = (row[0], rng.choice(["x", "y", None]), row[2])  # untracked
        elif what < 0.85:
            row = (row[0], row[1], f"{rng.randint(1, 9)}.25")
        events.append(("u", lsn, row))  # what ≥ 0.85: an update that changes nothing
    upserts = [e for e in events if e[0] in "cru" and e[1] is not None]
    for _ in range(rng.choice([0, 0, 1, 2])):  # a snapshot read of an older state, sent late
        _op, at, state = rng.choice(upserts)
        assert at is not None  # an upsert's
        events.append(("r", at + 5, state))
    return events


def delivered(rng: random.Random, events: list) -> list:
    """Out of order within BOUND places, and some events twice."""
    placed = [(i + rng.uniform(0, BOUND), e) for i, e in enumerate(events)]
    placed += [
        (i + rng.uniform(0, 3 * BOUND), e) for i, e in enumerate(events) if rng.random() < 0.1
    ]
    return [e for _, e in sorted(placed, key=lambda p: p[0])]


def message(key: int, op: str, lsn: int | None, row: tuple | None) -> tuple[dict, dict | None]:
    if op == "tombstone":
        return {"id": key}, None
    image = None if row is None else {"id": key, "name": row[0], "price": row[2],
                                      "born": "2026-01-01", "note": row[1]}  # fmt: skip
    before = {"id": key, "name": "?", "price": "0.00", "born": "2026-01-01", "note": None}
    value = {"op": op, "before": before if op == "d" else None, "after": image,
             "source": {"lsn": lsn}}  # fmt: skip
    return {"id": key}, value


@pytest.mark.parametrize("seed", range(FIRST_SEED, FIRST_SEED + SEEDS))
def test_tables_equal_the_model(spark, stack: Stack, tmp_path: Path, lake: Path, seed: int) -> None:
    rng = random.Random(seed)
    run = Pipeline(spark, stack, tmp_path, SPEC, ["Items"])
    model = TableModel(TRACKED)
    rounds: list[list[tuple[int, tuple]]] = [[] for _ in range(ROUNDS)]
    for case in range(CASES):
        for k in range(rng.randint(1, 3)):
            key = case * 10 + k
            stream = delivered(rng, story(rng, key))
            cuts = sorted(rng.randint(0, len(stream)) for _ in range(ROUNDS - 1))
            for r, (start, end) in enumerate(zip([0, *cuts], [*cuts, len(stream)], strict=True)):
                rounds[r] += [(key, e) for e in stream[start:end]]
    for events in rounds:
        produce_json(stack, run.topic["Items"], [message(k, *e) for k, e in events],
                     value_schema=ENVELOPE, partitions=3)  # fmt: skip
        for key, (op, lsn, row) in events:
            model.add(Change(key, lsn, op == "d", row if op in "cru" else None))
        run.ingest()
        run_tables_once(run)
        assert current_table(spark) == model.scd1()
        assert history_table(spark) == model.scd2()


def run_tables_once(run: Pipeline) -> None:
    from zync_assets.kafka.registry import Registry
    from zync_assets.tables.together import run_tables

    results = run_tables(run.spark, run.spec, Registry(run.stack.registry_settings))
    assert all(r.run is not None for r in results), results


def current_table(spark) -> dict[int, tuple]:
    rows = spark.read.format("delta").load(table_path("current")).collect()
    return {r["id"]: ((r["name"], r["note"], f"{r['price']:.2f}"), r["__SEQUENCE"]) for r in rows}


def history_table(spark) -> dict[tuple[int, int], tuple]:
    rows = spark.read.format("delta").load(table_path("history")).collect()
    return {
        (r["id"], r["__START_AT"]): (
            (r["name"], r["note"], f"{r['price']:.2f}"),
            r["__END_AT"],
            r["__SEQUENCE"],
        )
        for r in rows
    }
