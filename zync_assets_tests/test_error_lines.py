"""Error paths that had no test: each is one line that says what went wrong and what to do,
and a non-zero exit."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from zync_assets_tests.conftest import Stack, free_port, produce_many, run_zync

pytestmark = pytest.mark.integration

NOT_A_MASTER = (
    "is not a Spark master: give local[*], spark://host:port (a standalone cluster) or "
    "sc://host:port (a Spark Connect server), or unset it to run Spark in this process"
)


def only_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
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
    assert deleted.result().offset == 10  # what retention would have done: 0..9 are gone
    again = run_zync(*ingest, env=env)
    assert again.returncode == 1
    assert only_line(again.stderr) == (
        f"zync: error: {topic}[0]: offsets 5..9 were deleted from Kafka (retention) before "
        "they were ingested; raise the topic's retention, or acknowledge the loss by "
        "re-creating the pool"
    )
