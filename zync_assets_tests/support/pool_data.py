"""Synthetic pool contents, written the way zync writes them: raw events as ingest commits
them (offsets in the commit), staging outputs as ETL leaves them. Tests that need a pool of
a given size and benchmarks that time a stage over it share these (Kafka is not involved:
they measure or test the stage after it).
"""

from __future__ import annotations

import uuid

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

KAFKA = "struct<topic: string, partition: int, offset: bigint, timestamp: timestamp>"
DEAD = "struct<reason: string, key: binary, value: binary>"


def commit_raw(spark: SparkSession, pool: str, run: int, rows: DataFrame, ends: dict) -> None:
    """Append `rows` to raw pool `pool` as ingest's run `run`, recording each topic's end
    offset (partition 0) in the commit."""
    from zync_assets.lake.delta_writes import append_once
    from zync_assets.lake.pools import pool_path
    from zync_assets.lake.progress import app_id, commit_metadata

    meta = commit_metadata(run, uuid.uuid4().hex, {t: {0: end} for t, end in ends.items()})
    append_once(rows, pool_path(pool), app_id(pool), run, meta)


# Orders and their payments, paired by a denorm rule ----------------------------------------
PAIRS_SPEC = """
inputs:
  - {topic: orders, pool: %(raw)s}
  - {topic: payments, pool: %(raw)s}
outputs:
  - {topic: paid_orders, pool: %(staging)s}
transforms:
  - type: denorm
    where: op IN ('c', 'r')
    left: orders
    right: payments
    join-on: left.after:id::bigint = right.after:order_id::bigint
    out: paid_orders
    sql: |
      left.key AS key,
      named_struct('id', left.after:id::bigint, 'customer', left.after:customer::string,
                   'amount', right.after:amount::decimal(12,2)) AS value
  - type: stateless
    where: op = 'u'
    in: payments
    out: paid_orders
    sql: |
      named_struct('id', in.after:order_id::bigint) AS key,
      named_struct('id', in.after:order_id::bigint,
                   'amount', in.after:amount::decimal(12,2)) AS value
"""


def pair_rows(spark: SparkSession, first: int, count: int) -> DataFrame:
    """`count` orders and `count` payments: order i and payment i pair; offsets first.."""
    ids = spark.range(first, first + count)
    stamp = F.timestamp_seconds(F.lit(1_767_225_600) + F.col("id"))

    def rows(topic: str, value: str) -> DataFrame:
        return ids.select(
            F.struct(F.lit(topic).alias("topic"), F.lit(0).alias("partition"),
                     F.col("id").alias("offset"), stamp.alias("timestamp")).alias("kafka"),
            F.parse_json(F.format_string('{"id": %d}', "id")).alias("key"),
            F.parse_json(F.format_string(value, "id", "id")).alias("value"),
            F.lit(None).cast("struct<reason: string, key: binary, value: binary>").alias("dead_letter"),
        )  # fmt: skip

    orders = rows("orders", '{"op": "c", "after": {"id": %d, "customer": "customer-%d"}}')
    payments = rows(
        "payments", '{"op": "c", "after": {"order_id": %d, "amount": 12.50, "ref": "p-%d"}}'
    )
    return orders.unionByName(payments)


def append_pairs(spark: SparkSession, pool: str, run: int, first: int, count: int) -> None:
    end = first + count
    commit_raw(spark, pool, run, pair_rows(spark, first, count), {"orders": end, "payments": end})


# Source transactions across two topics, with Debezium's BEGIN and END records ------------
PER_TOPIC = 5  # events (or staging records) per topic per source transaction
TOPICS = ("bench.public.orders", "bench.public.items")
TRANSACTIONS = "bench.transaction"
RULE = """
  - type: stateless
    in: %(topic)s
    out: bench_out%(gate)s
    sql: in.key AS key, named_struct('id', in.after:id::bigint, 'txn', in.value:transaction.id::string) AS value"""


TXN_RULE = f"""
  - type: txn
    inputs: [{", ".join(TOPICS)}]
    complete-when: debezium-transaction
    out: bench_out
    sql: SELECT txn, key, named_struct('id', after:id::bigint, 'txn', txn) AS value FROM events"""


def transactions_spec(raw: str, staging: str, gated: bool, txn_rule: bool = False) -> str:
    inputs = [*TOPICS, TRANSACTIONS] if gated or txn_rule else list(TOPICS)
    gate = "\n    gate: transaction" if gated else ""
    rules = TXN_RULE if txn_rule else "".join(RULE % {"topic": t, "gate": gate} for t in TOPICS)
    return (
        "inputs:\n"
        + "".join(f"  - {{topic: {t}, pool: {raw}}}\n" for t in inputs)
        + f"outputs:\n  - {{topic: bench_out, pool: {staging}}}\ntransforms:"
        + rules
        + "\n"
    )


def _row(topic: str, offset: Column, millis: Column, key: Column, value: Column) -> list:
    stamp = F.timestamp_millis(F.lit(1_767_225_600_000) + millis)
    return [
        F.struct(F.lit(topic), F.lit(0), offset, stamp).cast(KAFKA).alias("kafka"),
        F.parse_json(key).alias("key"),
        F.parse_json(value).alias("value"),
        F.lit(None).cast(DEAD).alias("dead_letter"),
    ]


def transaction_rows(
    spark: SparkSession, first: int, count: int, per_topic: int, base: dict[str, int]
) -> DataFrame:
    """Transactions `first`..`first + count - 1`: `per_topic` creates on each topic, then
    BEGIN and END on the transaction topic; each topic's offsets from `base[topic]` on."""
    events = spark.range(first * per_topic, (first + count) * per_topic)
    n = F.col("id")
    txn, index_in_txn = F.floor(n / per_topic), n % per_topic
    rank = n - first * per_topic  # the event's place among this call's events of a topic
    parts = []
    for index, topic in enumerate(TOPICS):
        value = F.format_string(
            '{"op": "c", "after": {"id": %d}, "transaction": {"id": "tx-%d", '
            '"total_order": %d, "data_collection_order": %d}}',
            n, txn, index_in_txn + 1 + index * per_topic, index_in_txn + 1,
        )  # fmt: skip
        key = F.format_string('{"id": %d}', n)
        offset = F.lit(base[topic]) + rank
        parts.append(events.select(*_row(topic, offset, 3 * n + index, key, value)))
    t = F.col("id")
    collections = ", ".join(
        f'{{"data_collection": "{topic.split(".", 1)[1]}", "event_count": {per_topic}}}'
        for topic in TOPICS
    )
    end = F.format_string(
        '{"status": "END", "id": "tx-%d", "event_count": '
        f'{per_topic * len(TOPICS)}, "data_collections": [{collections}]}}',
        t,
    )
    begin = F.format_string('{"status": "BEGIN", "id": "tx-%d"}', t)
    key = F.format_string('{"id": "tx-%d"}', t)
    last = 3 * (t + 1) * per_topic  # after the transaction's last event
    at = F.lit(base[TRANSACTIONS]) + 2 * (t - first)
    ids = spark.range(first, first + count)
    parts.append(ids.select(*_row(TRANSACTIONS, at, last - 2, key, begin)))
    parts.append(ids.select(*_row(TRANSACTIONS, at + 1, last, key, end)))
    rows = parts[0]
    for part in parts[1:]:
        rows = rows.unionByName(part)
    return rows


def append_transactions(
    spark: SparkSession, raw: str, run: int, first: int, count: int, per_topic: int,
    base: dict[str, int],
) -> dict[str, int]:  # fmt: skip
    """Commit the transactions to `raw` as ingest's run `run`; each topic's end offset."""
    ends = {t: base[t] + count * per_topic for t in TOPICS}
    ends[TRANSACTIONS] = base[TRANSACTIONS] + 2 * count
    commit_raw(spark, raw, run, transaction_rows(spark, first, count, per_topic, base), ends)
    return ends


NO_OFFSETS = dict.fromkeys((*TOPICS, TRANSACTIONS), 0)


# Staging outputs, as ETL writes them ---------------------------------------------------


def write_outputs(spark: SparkSession, pool: str, topic: str, count: int, first: int = 0) -> None:
    """`count` output records of `topic` (offsets first..), in the layout `zync etl` writes:
    invoice-like rows, every tenth one a partial update (a second shape)."""
    from zync_assets.lake.pools import pool_path

    ids = spark.range(first, first + count)
    full = F.to_variant_object(F.struct(
        F.col("id").alias("ID"), F.format_string("customer-%d", F.col("id") % 9973).alias("customer"),
        F.lit("household goods").alias("item"),
        (F.col("id") % 100_000 / 100).cast("decimal(12,2)").alias("amount"),
        F.lit("pending").alias("invoice_status"),
        F.timestamp_seconds(F.lit(1_767_225_600) + F.col("id")).alias("created_at"),
    ))  # fmt: skip
    partial = F.to_variant_object(
        F.struct(F.col("id").alias("ID"), F.lit("paid").alias("invoice_status"))
    )
    frame = ids.select(
        F.lit("output").alias("kind"),
        F.struct(F.lit(topic).alias("topic"), F.lit(0).alias("partition"), F.col("id").alias("offset"),
                 F.timestamp_seconds(F.lit(1_767_225_600)).alias("timestamp")).alias("kafka"),
        F.to_variant_object(F.struct(F.col("id").alias("ID"))).alias("key"),
        F.when(F.col("id") % 10 == 9, partial).otherwise(full).alias("value"),
    )  # fmt: skip
    frame.write.format("delta").mode("append").partitionBy("kind").save(pool_path(pool))


def write_outputs_together(
    spark: SparkSession, pool: str, topics: list[str], count: int, first: int, txn: bool,
    run: int | None = None,
) -> None:  # fmt: skip
    """`count` output records for each of `topics` (offsets first..), source transaction
    `offset // PER_TOPIC` (the same in every topic), with a `txn` column if `txn`, and
    the ETL `run` that wrote them, if given."""
    from zync_assets.lake.pools import pool_path

    for topic in topics:
        ids = spark.range(first, first + count)
        value = F.to_variant_object(F.struct(
            F.col("id").alias("ID"), F.format_string("customer-%d", F.col("id") % 9973).alias("customer"),
            (F.col("id") % 100_000 / 100).cast("decimal(12,2)").alias("amount"),
            F.lit(topic).alias("table"),
        ))  # fmt: skip
        columns = [
            F.lit("output").alias("kind"),
            F.struct(F.lit(topic).alias("topic"), F.lit(0).alias("partition"),
                     F.col("id").alias("offset"),
                     F.timestamp_seconds(F.lit(1_767_225_600)).alias("timestamp")).alias("kafka"),
            F.to_variant_object(F.struct(F.col("id").alias("ID"))).alias("key"),
            value.alias("value"),
        ]  # fmt: skip
        if run is not None:
            columns.append(F.lit(run).cast("long").alias("run"))
        if txn:
            columns.append(
                F.format_string("%d:1", (F.col("id") / PER_TOPIC).cast("long")).alias("txn")
            )
        frame = ids.select(*columns)
        frame.write.format("delta").mode("append").option("mergeSchema", "true").partitionBy(
            "kind"
        ).save(pool_path(pool))
