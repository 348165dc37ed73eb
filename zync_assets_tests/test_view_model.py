"""View rules against SQL over the source's current rows, on random relational workloads.

Each *case* is a short story about two customers and their accounts, with its own ids
so that many cases share the topics (3 and 2 partitions) and the passes without
meeting: accounts created before or after their customer, a customer's change reaching
all of its accounts, accounts moving between customers, primary-key updates, deletes
and re-inserts on either side, accounts that stop or start matching a filter, events
Debezium sends twice, both tables changed in one round. Midway the accounts table is
truncated. After every round: ingest, one ETL pass, to-kafka; then the table an
upserting sink builds from each view's topic must equal the view's query evaluated by
SQLite over the source rows (view_source.py). Three views read the same inputs: a LEFT
join, an INNER join with a filter and a computed column, and a LEFT join that keeps the
"one" side (a customer with each of its accounts, or alone), keyed by two columns.

The default (CI) is 300 cases in 4 rounds: the first pass (the whole view), an
incremental one, the truncate (the whole view again) and an incremental one after it.
The incremental passes search the rows their changes reach (view_reach.py), as a view
above views.WHOLE_VIEW_ROWS does: this test's views are smaller, and would otherwise be
evaluated whole (that path is test_views.py's every-kind test).
Sized by what it finds: 1,000 cases took 310 s alone (560 s in the full run), 300 take
about 110 s, and still catch both of these breakages of view_reach.py (each tried by
hand; the 400-case run of seed 1 missed the second, which needs a customer whose last
account moves away in the round its row is checked):
- the search follows only a changed row's new join values, not its old ones
  (`_values_of_images` returning `after` alone): round 2, view `all`;
- a kept side's rows are not given all their partners (the `edge.preserved` re-match
  skipped): round 4, view `members`.
More by hand, e.g.
    ZYNC_VIEW_MODEL_SEED=7 ZYNC_VIEW_MODEL_CASES=5000 ZYNC_VIEW_MODEL_ROUNDS=8 \
        scripts/test.sh -k view_model
"""

from __future__ import annotations

import os
import random
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from zync_assets.etl.state import read_state
from zync_assets.kafka.registry import Registry
from zync_assets.lake.commits import commit_info
from zync_assets.lake.pools import commit_file, pool_path, pool_version
from zync_assets.pipeline.maintenance import Maintained, Maintenance
from zync_assets.specs.model import load_spec
from zync_assets.tokafka.sync import sync_pool
from zync_assets_tests.conftest import Stack
from zync_assets_tests.test_transactions import etl_pass
from zync_assets_tests.view_source import Source, reached_path, sink_table

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SEED = int(os.environ.get("ZYNC_VIEW_MODEL_SEED", "0"))
CASES = int(os.environ.get("ZYNC_VIEW_MODEL_CASES", "300"))
ROUNDS = int(os.environ.get("ZYNC_VIEW_MODEL_ROUNDS", "4"))
TRUNCATE_ROUND = 3
PRUNE_ROUND = 3  # maintenance deletes superseded row versions beside this round's pass

SPEC = """
inputs:
  - {{topic: {p}.accounts, pool: {p}_raw, format: json}}
  - {{topic: {p}.customers, pool: {p}_raw, format: json}}
outputs:
  - {{topic: {p}_all, pool: {p}_staging, format: json}}
  - {{topic: {p}_rich, pool: {p}_staging, format: json}}
  - {{topic: {p}_members, pool: {p}_staging, format: json}}
transforms:
  - type: view
    inputs: {{a: {p}.accounts, c: {p}.customers}}
    key: id
    out: {p}_all
    sql: |
      SELECT a.after:id::bigint AS id, a.after:balance::bigint AS balance,
             c.after:name::string AS customer, c.after:tier::string AS tier
      FROM a LEFT JOIN c ON a.after:customer_id::bigint = c.after:id::bigint
  - type: view
    inputs: {{accounts: {p}.accounts, customers: {p}.customers}}
    key: id
    out: {p}_rich
    sql: |
      SELECT acc.after:id::bigint AS id, cus.after:name::string AS customer,
             acc.after:balance::bigint * 2 AS doubled
      FROM accounts acc JOIN customers cus
        ON acc.after:customer_id::bigint = cus.after:id::bigint
      WHERE acc.after:balance::bigint > 0 AND cus.after:tier::string <> 'blocked'
  - type: view
    inputs: {{a: {p}.accounts, c: {p}.customers}}
    key: [customer, account]
    out: {p}_members
    sql: |
      SELECT c.after:id::bigint AS customer, a.after:id::bigint AS account,
             c.after:tier::string AS tier
      FROM c LEFT JOIN a ON a.after:customer_id::bigint = c.after:id::bigint
"""

# The views' queries over plain tables, for SQLite.
REFERENCE = {
    "all": """SELECT a.id, a.balance, c.name AS customer, c.tier
              FROM accounts a LEFT JOIN customers c ON a.customer_id = c.id""",
    "rich": """SELECT a.id, c.name AS customer, a.balance * 2 AS doubled
               FROM accounts a JOIN customers c ON a.customer_id = c.id
               WHERE a.balance > 0 AND c.tier <> 'blocked'""",
    # The "one" side kept: a customer's row without accounts must go once it has one, and
    # come back when its last account leaves.
    "members": """SELECT c.id AS customer, a.id AS account, c.tier
                  FROM customers c LEFT JOIN accounts a ON a.customer_id = c.id""",
}
KEYS = {"all": ("id",), "rich": ("id",), "members": ("customer", "account")}
TIERS = ("blue", "gold", "blocked")


class Case:
    """One story's ids: customers 10k+1 and 10k+2, accounts from 10k*100 up."""

    def __init__(self, number: int, src: Source, rng: random.Random) -> None:
        self.src, self.rng = src, rng
        self.customers = [number * 10 + 1, number * 10 + 2]
        self.next_account = number * 1000

    def _account_id(self) -> int:
        self.next_account += 1
        return self.next_account

    def _mine(self, table: str) -> list[int]:
        ids = (
            self.customers
            if table == "customers"
            else range(self.next_account - 999, self.next_account + 1)
        )
        return [i for i in ids if i in self.src.rows[table]]

    def step(self) -> None:
        """One random change of the case (or none, if it picks one that cannot happen)."""
        actions: list[Callable[[], None]] = [
            self.new_customer, self.new_account, self.new_account, self.change_customer,
            self.change_account, self.move_account, self.delete_customer, self.delete_account,
            self.resend,
        ]  # fmt: skip
        self.rng.choice(actions)()

    def new_customer(self) -> None:
        customer = self.rng.choice(self.customers)
        if customer not in self.src.rows["customers"]:
            self.src.upsert("customers", {"id": customer, "name": f"c{customer}",
                                          "tier": self.rng.choice(TIERS)})  # fmt: skip

    def new_account(self) -> None:  # its customer may not exist (yet)
        self.src.upsert("accounts", {"id": self._account_id(), "balance": self.rng.randint(-2, 9),
                                     "customer_id": self.rng.choice(self.customers)})  # fmt: skip

    def change_customer(self) -> None:  # reaches all of its accounts
        if mine := self._mine("customers"):
            row = self.src.rows["customers"][self.rng.choice(mine)]
            self.src.upsert("customers", dict(row, tier=self.rng.choice(TIERS),
                                              name=row["name"] + "'"))  # fmt: skip

    def change_account(self) -> None:  # a new balance, or another customer
        if mine := self._mine("accounts"):
            row = self.src.rows["accounts"][self.rng.choice(mine)]
            change = self.rng.choice([
                {"balance": self.rng.randint(-2, 9)},
                {"customer_id": self.rng.choice(self.customers)},
            ])  # fmt: skip
            self.src.upsert("accounts", dict(row, **change))

    def move_account(self) -> None:  # UPDATE accounts SET id = ...
        if mine := self._mine("accounts"):
            self.src.move("accounts", self.rng.choice(mine), self._account_id())

    def delete_customer(self) -> None:
        if mine := self._mine("customers"):
            self.src.delete("customers", self.rng.choice(mine))

    def delete_account(self) -> None:
        if mine := self._mine("accounts"):
            self.src.delete("accounts", self.rng.choice(mine))

    def resend(self) -> None:
        if self.src.sent:
            self.src.resend_last(self.rng.randint(1, 3))


# 300 cases in 4 rounds: about 110 s alone; 900 s leaves room for a loaded machine.
@pytest.mark.timeout(900)
def test_views_equal_their_query_over_current_rows_after_every_round(
    spark, stack: Stack, registry: Registry, lake: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    reached = reached_path(monkeypatch)
    rng = random.Random(SEED)
    src = Source(stack, f"vm{uuid.uuid4().hex[:6]}")
    spec = tmp_path / "views.yaml"
    spec.write_text(SPEC.format(p=src.p))
    cases = [Case(n, src, rng) for n in range(1, CASES + 1)]
    staging, pruned = pool_path(f"{src.p}_staging"), 0
    for round_number in range(1, ROUNDS + 1):
        if round_number == TRUNCATE_ROUND:
            src.truncate("accounts")
        for case in cases:
            for _ in range(rng.randint(0, 4)):
                case.step()
        src.flush()
        if round_number == PRUNE_ROUND:
            pruned = pass_beside_maintenance(spark, stack, registry, spec, staging)
        else:
            etl_pass(spark, stack, registry, spec)
        sync_pool(spark, f"{src.p}_staging", stack.kafka, registry, default_format="json")
        for view, sql in REFERENCE.items():
            key = KEYS[view]
            got = sink_table(stack, f"{src.p}_{view}", key)
            want = src.query(sql, keyed_by=len(key))
            differ = (k for k in got.keys() | want.keys() if got.get(k) != want.get(k))
            wrong = sorted(differ, key=repr)  # a key may hold NULLs: (7, None)
            assert not wrong, (
                f"round {round_number}, view {view}: {len(wrong)} of {len(want)} rows differ, "
                f"e.g. {wrong[0]}: sink {got.get(wrong[0])}, query {want.get(wrong[0])}"
            )
    assert len(src.rows["accounts"]) > CASES // 2  # the stories left rows to compare
    assert len(reached) >= 2 * len(REFERENCE), "an incremental pass did not search its reach"
    assert pruned > 0, "maintenance deleted no superseded row version beside the pass"
    Maintenance(spark).maintain(staging, vacuum=False)
    versions = spark.read.format("delta").load(staging).where("kind = 'view'")
    rows = versions.select("status", "kafka.topic", F.to_json("key")).distinct()
    assert versions.count() == rows.count()  # one version per row is left: the newest


def pass_beside_maintenance(
    spark, stack: Stack, registry: Registry, spec: Path, staging: str
) -> int:
    """A pass (ingest, then ETL) while maintenance deletes the view's superseded row
    versions beside it; how many it deleted. The delete must commit while the pass runs,
    before the pass's own commit (whether before or after the ETL's read of the pool is
    the machine's choice; either way the rounds after must still equal the query)."""
    read = pool_version(staging)
    done: list[Maintained] = []
    beside = threading.Thread(
        target=lambda: done.append(Maintenance(spark).maintain(staging, vacuum=False))
    )
    beside.start()
    etl_pass(spark, stack, registry, spec)
    beside.join()
    assert read is not None and done, "no pool to maintain, or the maintenance failed"
    passed = read_state(staging, load_spec(spec).name).version
    merges = [
        v for v in range(read + 1, (pool_version(staging) or 0) + 1)
        if (commit_info(commit_file(staging, v)) or {}).get("operation") == "MERGE"
    ]  # fmt: skip
    assert merges and passed is not None and merges[0] < passed, (
        f"the delete (commits {merges}) did not land while the pass ran (pool version "
        f"{read} before it, its commit {passed})"
    )
    return done[0].pruned
