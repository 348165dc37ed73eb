"""Configuration precedence and validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zync_assets.core.errors import ZyncError
from zync_assets.core.settings import SinkSettings, kafka_settings, registry_settings, sink_settings
from zync_assets.core.timeparse import parse_duration


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "resources").mkdir()
    return tmp_path


def test_defaults_point_at_the_local_stack(workdir: Path) -> None:
    assert kafka_settings({}).bootstrap_servers == "127.0.0.1:9092"
    assert registry_settings({}).url == "http://127.0.0.1:8081/apis/ccompat/v7"


def test_zync_json_keys_are_accepted_and_env_wins(workdir: Path) -> None:
    (workdir / "resources" / "kafka.json").write_text(
        json.dumps(
            {
                "bootstrap_servers": "broker:9093",
                "security_protocol": "SASL_SSL",
                "sasl_mechanisms": "SCRAM-SHA-512",
                "sasl_username": "u",
                "sasl_password": "secret",
            }
        )
    )
    settings = kafka_settings({"ZYNC_KAFKA_BOOTSTRAP": "other:9094"})
    config = settings.client_config()
    assert config["bootstrap.servers"] == "other:9094"
    assert config["sasl.mechanism"] == "SCRAM-SHA-512"
    assert config["sasl.password"] == "secret"
    assert "secret" not in settings.describe()


def test_home_zync_folder_is_read_when_resources_has_none(workdir: Path) -> None:
    home = workdir / "home" / ".zync"
    home.mkdir(parents=True)
    (home / "schema_registry.json").write_text(
        json.dumps({"url": "http://reg:1/", "user": "a", "password": "b"})
    )
    settings = registry_settings({})
    assert settings.url == "http://reg:1"
    assert settings.client_config()["basic.auth.user.info"] == "a:b"


def test_bad_security_settings_are_refused(workdir: Path) -> None:
    with pytest.raises(ZyncError, match="unknown Kafka security protocol 'TLS'"):
        kafka_settings({"ZYNC_KAFKA_SECURITY_PROTOCOL": "tls"})
    with pytest.raises(ZyncError, match="unknown SASL mechanism"):
        kafka_settings({"ZYNC_KAFKA_SASL_MECHANISM": "OAUTH"})


def test_malformed_config_file_is_named(workdir: Path) -> None:
    (workdir / "resources" / "kafka.json").write_text("{nope")
    with pytest.raises(ZyncError, match=r"kafka\.json: not valid JSON"):
        kafka_settings({})


@pytest.mark.parametrize(("text", "seconds"), [("5s", 5), ("500ms", 0.5), ("1m30s", 90), ("2", 2)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_bad_duration() -> None:
    with pytest.raises(ZyncError, match="bad duration"):
        parse_duration("5 parsecs")


def test_the_sensor_interval_reads_durations_and_refuses_nonsense() -> None:
    from zync_assets.core.settings import sensor_interval_seconds

    assert sensor_interval_seconds({}) == 1  # every loop of Dagster's sensor daemon
    assert sensor_interval_seconds({"ZYNC_SENSOR_INTERVAL": "1m"}) == 60
    with pytest.raises(ZyncError, match="ZYNC_SENSOR_INTERVAL: bad duration"):
        sensor_interval_seconds({"ZYNC_SENSOR_INTERVAL": "often"})
    with pytest.raises(ZyncError, match="at least 1s"):
        sensor_interval_seconds({"ZYNC_SENSOR_INTERVAL": "200ms"})


def test_outage_retry_defaults_to_five_minutes_and_refuses_nonsense() -> None:
    from zync_assets.core.settings import outage_retry_seconds

    assert outage_retry_seconds({}) == 300
    assert outage_retry_seconds({"ZYNC_OUTAGE_RETRY": "0"}) == 0
    with pytest.raises(ZyncError, match="ZYNC_OUTAGE_RETRY"):
        outage_retry_seconds({"ZYNC_OUTAGE_RETRY": "soon"})


def test_the_variables_written_for_a_child_process_read_back_as_the_same_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kafka_env/registry_env name the variables a second time (the stack hands them to
    Dagster and the pipeline service): a round trip keeps the two lists in step."""
    from zync_assets.core.settings import KafkaSettings, RegistrySettings, kafka_env, registry_env

    monkeypatch.chdir(tmp_path)  # no resources/*.json to mix in
    monkeypatch.setenv("HOME", str(tmp_path))
    kafka = KafkaSettings("b:9094", "SASL_SSL", "SCRAM-SHA-512", "u", "p", "/ca", "/c", "/k")
    registry = RegistrySettings("https://r/apis/ccompat/v7", "u", "p", "/ca")
    assert kafka_settings(kafka_env(kafka)) == kafka
    assert registry_settings(registry_env(registry)) == registry


def test_the_sinks_settings_default_to_the_stacks_connect_and_refuse_a_non_url() -> None:
    assert sink_settings({}) == SinkSettings("http://127.0.0.1:8083", ())
    named = sink_settings({"ZYNC_CONNECT_URL": "https://connect:8083/", "ZYNC_SINKS": "a, b,"})
    assert named == SinkSettings("https://connect:8083", ("a", "b"))
    with pytest.raises(ZyncError, match=r"^ZYNC_CONNECT_URL='connect:8083' is not a URL: give"):
        sink_settings({"ZYNC_CONNECT_URL": "connect:8083"})
