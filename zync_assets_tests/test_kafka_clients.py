"""The process's kept Kafka client (kafka/clients.py's connected_admin): kept across
calls, and never carried into a forked child, whose inherited librdkafka client would
have no threads to answer it."""

from __future__ import annotations

import json
import os
import select

from zync_assets.kafka import clients
from zync_assets.kafka.offsets import high_marks, watermarks
from zync_assets_tests.conftest import Stack, produce_bytes

CHILD_WAIT_S = 60


def test_one_client_is_kept_per_process_and_settings(stack: Stack, topic: str) -> None:
    produce_bytes(stack, topic, [(None, b"a")])
    first = clients.connected_admin(stack.kafka)
    assert watermarks(stack.kafka, [topic])[topic][0].high == 1
    assert clients.connected_admin(stack.kafka) is first


def test_a_forked_child_reads_offsets_over_a_client_of_its_own(stack: Stack, topic: str) -> None:
    produce_bytes(stack, topic, [(None, b"a"), (None, b"b")])
    parent = high_marks(watermarks(stack.kafka, [topic]))  # the parent keeps its client
    kept = clients.connected_admin(stack.kafka)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: its answer, or its error, down the pipe
        try:
            fresh = clients.connected_admin(stack.kafka) is not kept
            answer = {"marks": high_marks(watermarks(stack.kafka, [topic])), "fresh": fresh}
            os.write(write, json.dumps(answer).encode())
            os._exit(0)
        except BaseException as exc:  # any failure is the child's answer
            os.write(write, json.dumps({"error": repr(exc)}).encode())
            os._exit(1)
    os.close(write)
    ready, _, _ = select.select([read], [], [], CHILD_WAIT_S)
    assert ready, f"the forked child did not answer within {CHILD_WAIT_S} s"
    answer = json.loads(os.read(read, 65536) or b"{}")
    os.close(read)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0, answer
    assert answer["fresh"], "the child used the client it inherited"
    assert answer["marks"] == {topic: {str(p): end for p, end in parent[topic].items()}}
