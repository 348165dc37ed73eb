"""zync produce / consume / info / ls against the real broker and registry."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from zync_assets.kafka.offsets import topic_offsets
from zync_assets_tests.conftest import Stack, run_zync
from zync_assets_tests.test_codec import EVERY_TYPE, EVERY_VALUE

pytestmark = pytest.mark.integration


def consume_all(stack: Stack, topic: str, *extra: str) -> list[dict]:
    done = run_zync(
        "consume", "--topic", topic, "--from-beginning", "--exit-after", "3s", *extra,
        env=stack.env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def high_water(stack: Stack, topic: str) -> int:
    return sum(p.high for p in topic_offsets(stack.kafka, topic))


def test_every_avro_type_round_trips_through_produce_and_consume(
    stack: Stack, topic: str, tmp_path: Path
) -> None:
    schema_file = tmp_path / "value.avsc"
    schema_file.write_text(json.dumps(EVERY_TYPE))
    lines = [
        {"key": {"id": 1}, "value": EVERY_VALUE},
        {"key": {"id": 2}, "value": dict(EVERY_VALUE, either=5, maybe="x")},
        {"key": {"id": 1}, "value": None},  # tombstone
    ]
    stdin = "".join(json.dumps(line) + "\n" for line in lines)
    done = run_zync(
        "produce", "--topic", topic, "--value-schema", str(schema_file), env=stack.env(),
        stdin=stdin,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert consume_all(stack, topic) == lines


def test_inferred_schema_and_metadata(stack: Stack, topic: str) -> None:
    stdin = '{"a": 1, "b": {"c": "x"}}\n\n{"a": 2.5, "b": null}\n'
    assert run_zync("produce", "--topic", topic, env=stack.env(), stdin=stdin).returncode == 0
    records = consume_all(stack, topic, "--metadata")
    assert [r["value"] for r in records] == [{"a": 1.0, "b": {"c": "x"}}, {"a": 2.5, "b": None}]
    assert [r["key"] for r in records] == [None, None]
    assert [(r["kafka"]["topic"], r["kafka"]["offset"]) for r in records] == [
        (topic, 0),
        (topic, 1),
    ]
    assert records[0]["kafka"]["timestamp"].endswith("Z")


def test_info_and_ls(stack: Stack, topic: str) -> None:
    run_zync("produce", "--topic", topic, "--partitions", "3", env=stack.env(), stdin='{"a":1}\n')
    info = run_zync("info", "--topic", topic, env=stack.env())
    assert info.returncode == 0, info.stderr
    lines = info.stdout.splitlines()
    assert len(lines) == 3 and sum(int(line.split()[-1]) for line in lines) == 1
    listed = run_zync("ls", env=stack.env())
    assert f"subject {topic}-value:" in listed.stdout


def test_confluent_serializer_and_deserializer_interoperate(stack: Stack, topic: str) -> None:
    """Messages from confluent-kafka's own AvroSerializer decode in zync, and vice versa."""
    # Without a timeout confluent-kafka's client (httpx2) was seen, rarely, to wait forever
    # for a reply Apicurio had already sent; with one, its own retry gets through.
    client = SchemaRegistryClient({"url": stack.registry_settings.url, "timeout": 10})
    serializer = AvroSerializer(client, json.dumps(EVERY_TYPE))
    conformed = {**EVERY_VALUE, "nothing": None}
    from zync_assets.codec.conform import Conformer

    value = Conformer(EVERY_TYPE).conform(conformed)
    run_zync("produce", "--topic", topic, env=stack.env(), stdin="")  # no lines: nothing sent
    from zync_assets.kafka.clients import ensure_topic

    ensure_topic(stack.kafka, topic)
    producer = Producer({"bootstrap.servers": stack.kafka.bootstrap_servers})
    context = SerializationContext(topic, MessageField.VALUE)
    producer.produce(topic, value=serializer(value, context))
    assert producer.flush(10) == 0
    assert consume_all(stack, topic) == [{"key": None, "value": EVERY_VALUE}]

    ours = f"{topic}_ours"
    run_zync("produce", "--topic", ours, env=stack.env(), stdin='{"n": 1, "s": "x"}\n')
    consumer = Consumer({"bootstrap.servers": stack.kafka.bootstrap_servers, "group.id": ours})
    consumer.assign([TopicPartition(ours, 0, 0)])
    message = consumer.poll(10)
    consumer.close()
    assert message is not None, "the record did not come back within 10 s"
    deserializer = AvroDeserializer(client)
    decoded = deserializer(message.value(), SerializationContext(ours, MessageField.VALUE))
    assert decoded == {"n": 1, "s": "x"}


# --- bad input ------------------------------------------------------------------------


def test_bad_json_line_names_the_line_and_sends_nothing(stack: Stack, topic: str) -> None:
    run_zync("produce", "--topic", topic, env=stack.env(), stdin='{"a": 1}\n')
    before = high_water(stack, topic)
    done = run_zync(
        "produce", "--topic", topic, env=stack.env(), stdin='{"a": 2}\n{"a": 3}\n{"a": \n'
    )
    assert done.returncode == 1
    assert done.stderr.strip().startswith("zync: error: line 3: not valid JSON")
    assert len(done.stderr.strip().splitlines()) == 1
    assert high_water(stack, topic) == before


def test_value_not_fitting_the_schema_names_the_field(
    stack: Stack, topic: str, tmp_path: Path
) -> None:
    schema_file = tmp_path / "v.avsc"
    schema_file.write_text(json.dumps(EVERY_TYPE))
    bad = dict(EVERY_VALUE, amount="12.345")
    stdin = json.dumps(EVERY_VALUE) + "\n" + json.dumps(bad) + "\n"
    done = run_zync(
        "produce", "--topic", topic, "--value-schema", str(schema_file), env=stack.env(),
        stdin=stdin,
    )  # fmt: skip
    assert done.returncode == 1
    assert "line 2: value.amount:" in done.stderr and "decimal places" in done.stderr
    assert "Traceback" not in done.stderr


def test_consume_unknown_topic_is_a_clear_error(stack: Stack) -> None:
    done = run_zync("consume", "--topic", "no_such_topic", env=stack.env())
    assert done.returncode == 1
    assert "topic 'no_such_topic' does not exist" in done.stderr


def test_unreachable_broker_fails_fast(stack: Stack) -> None:
    from zync_assets_tests.conftest import free_port

    started = time.monotonic()
    done = run_zync(
        "info", "--topic", "t", env=stack.env(ZYNC_KAFKA_BOOTSTRAP=f"127.0.0.1:{free_port()}")
    )
    assert done.returncode == 1
    assert "cannot reach Kafka at 127.0.0.1:" in done.stderr
    assert time.monotonic() - started < 30


def test_wrong_security_protocol_fails_fast_instead_of_hanging(stack: Stack) -> None:
    started = time.monotonic()
    done = run_zync("info", "--topic", "t", env=stack.env(ZYNC_KAFKA_SECURITY_PROTOCOL="SSL"))
    assert done.returncode == 1
    # The cause is named: an SSL client met a plaintext listener.
    assert "did not answer in that protocol" in done.stderr and "(SSL)" in done.stderr
    assert "ZYNC_KAFKA_SECURITY_PROTOCOL" in done.stderr
    assert time.monotonic() - started < 30


def test_unreachable_registry_names_its_url(stack: Stack, topic: str) -> None:
    from zync_assets_tests.conftest import free_port

    url = f"http://127.0.0.1:{free_port()}/apis/ccompat/v7"
    done = run_zync(
        "produce", "--topic", topic, env=stack.env(ZYNC_SCHEMA_REGISTRY_URL=url), stdin='{"a":1}\n'
    )
    assert done.returncode == 1
    assert f"schema registry unreachable at {url}" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
