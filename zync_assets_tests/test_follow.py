"""Continuous mode's outage rule, as a pure function: retry an unavailable service for a
bounded time, saying so; a single pass fails at once; other errors are never retried."""

from __future__ import annotations

import pytest

from zync_assets.core.errors import Unavailable, ZyncError
from zync_assets.kafka.failures import is_transient
from zync_assets.pipeline import follow as follow_module
from zync_assets.pipeline.follow import follow


@pytest.fixture(autouse=True)
def instant(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """No real sleeping: a fake clock that the pauses advance."""
    clock = [0.0]
    monkeypatch.setattr(follow_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(follow_module.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    return clock


def passes(*outcomes):
    """A run_once that fails or returns as `outcomes` say, in turn."""
    queue = list(outcomes)

    def run_once():
        outcome = queue.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return run_once


def run(run_once, idle_timeout, warned: list[str]) -> int:
    return follow(run_once, lambda _r: None, did_work=bool, interval=1.0,
                  idle_timeout=idle_timeout, stop_requested=lambda: False,
                  warn=warned.append)  # fmt: skip


def test_a_continuous_run_retries_an_outage_and_says_when_it_is_back(monkeypatch) -> None:
    monkeypatch.setenv("ZYNC_OUTAGE_RETRY", "1m")
    warned: list[str] = []
    down = Unavailable("cannot reach Kafka")
    assert run(passes(down, down, [1], [], []), idle_timeout=1.0, warned=warned) == 1
    assert [w.split(" — ")[1] for w in warned[:2]] == [
        "retrying in 5s (for up to 60s more)", "retrying in 5s (for up to 55s more)",
    ]  # fmt: skip
    assert warned[2] == "back after 10s; continuing"


def test_retrying_stops_at_its_bound_with_the_services_error(monkeypatch) -> None:
    monkeypatch.setenv("ZYNC_OUTAGE_RETRY", "12s")
    warned: list[str] = []
    down = Unavailable("cannot reach Kafka")
    with pytest.raises(Unavailable, match="cannot reach Kafka"):
        run(passes(*[down] * 10), idle_timeout=None, warned=warned)
    assert len(warned) == 4 and warned[-1] == "gave up after 15s of retrying"


def test_a_single_pass_and_other_errors_fail_at_once() -> None:
    warned: list[str] = []
    with pytest.raises(Unavailable):
        run(passes(Unavailable("away")), idle_timeout=0.0, warned=warned)
    with pytest.raises(ZyncError, match="refused"):
        run(passes(ZyncError("refused the credentials")), idle_timeout=None, warned=warned)
    assert warned == []


@pytest.mark.parametrize(
    ("reason", "transient"),
    [
        ("TimeoutException: Timeout expired after 10000ms while awaiting EndTxn(true)", True),
        ('KafkaError{code=_TRANSPORT,val=-195,str="Local: Broker transport failure"}', True),
        ("org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node", True),
        ("ProducerFencedException: There is a newer producer", False),
        ("SaslAuthenticationException: Authentication failed", False),
        ("RecordTooLargeException: The message is 2000000 bytes", False),
    ],
)
def test_which_kafka_failures_count_as_an_outage(reason: str, transient: bool) -> None:
    assert is_transient(reason) is transient


def test_a_moving_leader_is_asked_again_then_reported_as_an_outage() -> None:
    """ListOffsets during a broker restart or failover: a partition without a leader for
    a moment is asked again (not an outage); one that stays so is one, in one line."""
    from confluent_kafka import KafkaError

    from zync_assets.kafka.offsets import LeaderMoving, asking_again

    moving = LeaderMoving(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))
    answers = [moving, moving, {("t", 0): 7}]
    asked = passes(*answers)
    assert asking_again(asked, give_up=lambda e: Unavailable(e.str()), for_s=10) == {("t", 0): 7}

    def never_led() -> dict:
        raise moving

    with pytest.raises(Unavailable, match="Not leader for partition"):
        asking_again(never_led, give_up=lambda e: Unavailable(e.str()), for_s=3)
