"""Error paths that had no test: each is one line that says what went wrong and what to do,
and a non-zero exit."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from zync_assets_tests.conftest import Stack, free_port, produce_json, produce_many, run_zync

pytestmark = pytest.mark.integration

NOT_A_MASTER = (
    "is not a Spark master: give local[*], spark://host:port (a standalone cluster) or "
    "sc://host:port (a Spark Connect server), or unset it to run Spark in this process"
)


def only_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if not line.startswith("spark ready")]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize("master", ["bogus", "sc:host", "sc://", "spark:/nohost"])
def test_a_spark_master_setting_that_is_none_is_one_line(tmp_path: Path, master: str) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ZYNC_SPARK_MASTER": master}
    done = run_zync("query", "SELECT 1", env=env, process=True)
    assert done.returncode == 1
    assert only_line(done.stderr) == f"zync: error: ZYNC_SPARK_MASTER={master!r} {NOT_A_MASTER}"


def test_a_standalone_master_that_does_not_answer_is_one_line(tmp_path: Path) -> None:
    master = f"spark://127.0.0.1:{free_port()}"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ZYNC_SPARK_MASTER": master,
           "ZYNC_LAKE": str(tmp_path / "lake")}  # fmt: skip
    done = run_zync("query", "SELECT 1", env=env, process=True)
    assert done.returncode == 1
    assert only_line(done.stderr) == (
        f"zync: error: no Spark master answers at {master} (ZYNC_SPARK_MASTER): start it "
        "(`zync stack up --spark-workers 2` starts a local one), or unset ZYNC_SPARK_MASTER to "
        "run Spark in this process"
    )


def test_a_secured_stack_with_cdc_is_refused_before_anything_starts(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ZYNC_HOME": str(home)}
    done = run_zync("stack", "up", "--secure", "--cdc", env=env, process=True)
    assert done.returncode == 1
    assert only_line(done.stderr) == (
        "zync: error: --secure with --cdc is not supported yet: the Kafka Connect worker's "
        "converters do not carry the secured registry's credentials; start the CDC stack "
        "unsecured"
    )
    assert not list(home.glob("**/*.json")), "a service was started"  # no PID file


def test_consume_over_undecodable_messages_prints_the_rest_and_fails_naming_each(
    stack: Stack, topic: str
) -> None:
    produce_many(stack, topic, 6, every_bad=3)  # offsets 2 and 5 are garbage
    done = run_zync("consume", "-t", topic, "--from-beginning", "--exit-after", "2s",
                    env=stack.env())  # fmt: skip
    assert done.returncode == 1
    assert len(done.stdout.splitlines()) == 4  # the decodable ones, each once
    *warnings, last = done.stderr.strip().splitlines()
    assert [w.split(":")[2].strip() for w in warnings] == [f"{topic}/0@2", f"{topic}/0@5"]
    assert all(w.startswith("zync: warning: ") for w in warnings), warnings
    assert last == "zync: error: 2 messages could not be decoded (see warnings above)"


def test_offsets_deleted_by_retention_before_ingest_are_a_data_loss_line(
    stack: Stack, topic: str, tmp_path: Path
) -> None:
    env = stack.env(ZYNC_LAKE=str(tmp_path / "lake"))
    ingest = ("from-kafka", "-t", topic, "-p", "Retained", "--once")
    produce_many(stack, topic, 5)
    first = run_zync(*ingest, env=env)
    assert first.returncode == 0, first.stderr  # the pool's cursor: offset 5
    produce_many(stack, topic, 15)
    admin = AdminClient(stack.kafka.client_config())
    (deleted,) = admin.delete_records([TopicPartition(topic, 0, 10)]).values()
    assert deleted.result().low_watermark == 10  # as retention would: 0..9 are gone
    again = run_zync(*ingest, env=env)
    assert again.returncode == 1
    assert only_line(again.stderr) == (
        f"zync: error: {topic}[0]: offsets 5..9 were deleted from Kafka (retention) before "
        "they were ingested; raise the topic's retention, or acknowledge the loss by "
        "re-creating the pool"
    )


def _view_spec(tmp_path: Path, p: str, key: str) -> Path:
    spec = tmp_path / "view.yaml"
    spec.write_text(f"""
inputs:
  - {{topic: {p}.accounts, pool: {p}_raw}}
  - {{topic: {p}.customers, pool: {p}_raw}}
outputs:
  - {{topic: {p}_view, pool: {p}_staging}}
transforms:
  - type: view
    inputs: {{a: {p}.accounts, c: {p}.customers}}
    key: {key}
    out: {p}_view
    sql: |
      SELECT a.after:id::bigint AS id, c.after:id::bigint AS customer_id,
             c.after:name::string AS customer
      FROM a JOIN c ON a.after:customer_id::bigint = c.after:id::bigint
""")
    return spec


def _ingested(spark, stack: Stack, spec: Path) -> None:
    from zync_assets.ingest.ingest import ingest
    from zync_assets.kafka.registry import Registry
    from zync_assets.specs.model import load_spec

    loaded = load_spec(spec)
    for pool, topics in loaded.raw_pools().items():
        ingest(spark, pool, topics, stack.kafka, Registry(stack.registry_settings),
               formats=loaded.formats())  # fmt: skip


def test_a_view_input_change_without_a_kafka_key_is_one_line(
    spark, stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = f"vk{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv("ZYNC_LAKE", str(tmp_path / "lake"))
    spec = _view_spec(tmp_path, p, "id")
    produce_json(
        stack, f"{p}.customers", [({"id": 1}, {"op": "c", "after": {"id": 1, "name": "x"}})]
    )
    produce_json(
        stack, f"{p}.accounts", [(None, {"op": "c", "after": {"id": 7, "customer_id": 1}})]
    )
    _ingested(spark, stack, spec)
    done = run_zync("etl", str(spec), env=stack.env(ZYNC_LAKE=str(tmp_path / "lake")))
    assert done.returncode == 1
    assert only_line(done.stderr) == (
        f"zync: error: {spec}: transforms[1]: 1 change(s) of view input {p}.accounts have no "
        "Kafka key (first: partition 0 offset 0); a view keeps rows by their key: give the "
        "source table a primary key (or a message key), or read the topic with another rule"
    )


def test_a_view_yielding_two_rows_for_one_key_is_one_line(
    spark, stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = f"v2{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv("ZYNC_LAKE", str(tmp_path / "lake"))
    spec = _view_spec(tmp_path, p, "customer_id")  # two accounts of one customer: two rows
    produce_json(
        stack, f"{p}.customers", [({"id": 1}, {"op": "c", "after": {"id": 1, "name": "x"}})]
    )
    produce_json(stack, f"{p}.accounts", [
        ({"id": n}, {"op": "c", "after": {"id": n, "customer_id": 1}}) for n in (7, 8)
    ])  # fmt: skip
    _ingested(spark, stack, spec)
    done = run_zync("etl", str(spec), env=stack.env(ZYNC_LAKE=str(tmp_path / "lake")))
    assert done.returncode == 1
    line = only_line(done.stderr)
    assert line.startswith(f"zync: error: {spec}: transforms[1] key: the view yields 2 rows "), line
    assert line.endswith(
        "its key (customer_id) must name one row: add the columns that tell them apart (e.g. "
        "each joined table's key)"
    ), line


def test_a_truncate_under_a_mirror_with_its_own_sql_is_one_line(
    spark, stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = f"mt{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv("ZYNC_LAKE", str(tmp_path / "lake"))
    spec = tmp_path / "mirror.yaml"
    spec.write_text(
        f"inputs:\n  - {{topics: '{p}\\.public\\..*', pool: {p}_raw}}\n"
        f"transforms:\n  - {{type: mirror, topics: '{p}\\.public\\..*', out: 'wh_{p}.{{table}}',\n"
        f"     pool: {p}_mirror, sql: \"named_struct('k', in.after:id) AS key, in.after AS value\"}}\n"
    )
    topic = f"{p}.public.t"
    env = stack.env(ZYNC_LAKE=str(tmp_path / "lake"))
    ingest = ("from-kafka", "-t", topic, "-p", f"{p}_raw", "--once")
    produce_json(stack, topic, [({"id": 1}, {"op": "c", "after": {"id": 1}})])
    for step in (ingest, ("etl", str(spec))):  # the row is mirrored: sent with the mirror's keys
        assert (done := run_zync(*step, env=env)).returncode == 0, done.stderr
    produce_json(stack, topic, [(None, {"op": "t"})])  # then the table is truncated
    assert (ingested := run_zync(*ingest, env=env)).returncode == 0, ingested.stderr
    done = run_zync("etl", str(spec), env=env)
    assert done.returncode == 1
    line = only_line(done.stderr)
    assert line.startswith("zync: error: "), line
    assert line.endswith(
        f"topic {topic} was truncated, and mirror rule 1 makes its own keys (sql:), so zync "
        "cannot tell which rows the truncate removed: use the mirror's default sql for "
        "truncated tables"
    ), line
