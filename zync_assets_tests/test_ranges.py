"""Pure planning functions of ingest and ETL."""

from __future__ import annotations

import json

import pytest

from zync_assets.core.errors import ZyncError
from zync_assets.core.offsets import (
    OffsetRange,
    advance,
    lag,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    spark_offsets_json,
)
from zync_assets.core.settings import KafkaSettings
from zync_assets.ingest.ingest import _cap
from zync_assets.ingest.source import java_client_options
from zync_assets.specs.expiry import Expiry, parse_expiry


def test_ranges_start_at_progress_or_the_low_watermark_and_skip_empty_ones() -> None:
    progress = {"a": {0: 5}}
    low = {"a": {0: 0, 1: 3}, "b": {0: 0}}
    end = {"a": {0: 9, 1: 3}, "b": {0: 2}}
    assert plan_ranges(progress, low, end) == [OffsetRange("a", 0, 5, 9), OffsetRange("b", 0, 0, 2)]


def test_advance_moves_only_the_ranges_partitions() -> None:
    after = advance({"a": {0: 5, 1: 7}}, [OffsetRange("a", 0, 5, 9), OffsetRange("b", 2, 0, 4)])
    assert after == {"a": {0: 9, 1: 7}, "b": {2: 4}}


def test_cap_keeps_order_and_the_budget() -> None:
    ranges = [OffsetRange("a", 0, 0, 10), OffsetRange("a", 1, 5, 10), OffsetRange("b", 0, 0, 3)]
    assert _cap(ranges, 12) == [OffsetRange("a", 0, 0, 10), OffsetRange("a", 1, 5, 7)]


def test_offsets_json_round_trip_and_spark_form() -> None:
    offsets = {"t": {0: 4, 2: 9}}
    assert offsets_from_json(json.loads(json.dumps(offsets_to_json(offsets)))) == offsets
    ranges = [OffsetRange("t", 0, 1, 4), OffsetRange("t", 2, 3, 9)]
    assert json.loads(spark_offsets_json(ranges, "start")) == {"t": {"0": 1, "2": 3}}
    assert lag({"t": {0: 1}}, {"t": {0: 4, 2: 2}}) == 5


def test_java_client_options_carry_sasl_and_tls(tmp_path) -> None:
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    cert.write_text("CERT")
    key.write_text("KEY")
    settings = KafkaSettings(
        "b:9093", "SASL_SSL", "SCRAM-SHA-512", "user", 'pa"ss', str(tmp_path / "ca.pem"),
        str(cert), str(key),
    )  # fmt: skip
    options = java_client_options(settings)
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert "ScramLoginModule required" in options["kafka.sasl.jaas.config"]
    assert 'password="pa\\"ss"' in options["kafka.sasl.jaas.config"]
    assert options["kafka.ssl.truststore.type"] == "PEM"
    assert options["kafka.ssl.keystore.certificate.chain"] == "CERT"
    assert options["kafka.isolation.level"] == "read_committed"
    plain = java_client_options(KafkaSettings("b:9092"))
    assert not any("sasl" in k or "ssl" in k for k in plain)
    # Kafka's 500 ms would hold each task's last, empty fetch (bench/ingest_topics_bench.py)
    assert int(plain["kafka.fetch.max.wait.ms"]) <= 50


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1000 offsets", Expiry(offsets=1000)), ("1 offset", Expiry(offsets=1)),
     ("7d", Expiry(seconds=7 * 86400)), ("90m", Expiry(seconds=5400))],
)  # fmt: skip
def test_expiry_forms(text: str, expected: Expiry) -> None:
    assert parse_expiry(text) == expected


def test_bad_expiry() -> None:
    with pytest.raises(ZyncError, match="neither a count of offsets"):
        parse_expiry("a while")


def test_offsets_in_dagster_metadata_read_typed_or_as_older_text() -> None:
    from zync_assets.core.offsets import offsets_from_metadata

    assert offsets_from_metadata({"t": {"0": 5}}) == {"t": {0: 5}}
    assert offsets_from_metadata('{"t": {"0": 5}}') == {"t": {0: 5}}  # before typed metadata
    with pytest.raises(ValueError, match="expected offsets"):
        offsets_from_metadata("[1, 2]")
