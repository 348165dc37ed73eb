"""The Java Kafka client's properties for `KafkaSettings` (Spark's Kafka source and
to-kafka's sender in the driver JVM use the Java client, not librdkafka)."""

from __future__ import annotations

from zync_assets.core.settings import KafkaSettings

_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def java_client_config(settings: KafkaSettings) -> dict[str, str]:
    """Address, security protocol, SASL and TLS properties, without any prefix."""
    config = {
        "bootstrap.servers": settings.bootstrap_servers,
        "security.protocol": settings.security_protocol,
    }
    if settings.security_protocol.startswith("SASL_"):
        mechanism = settings.sasl_mechanism or "PLAIN"
        config["sasl.mechanism"] = mechanism
        user = (settings.sasl_username or "").replace('"', '\\"')
        password = (settings.sasl_password or "").replace('"', '\\"')
        config["sasl.jaas.config"] = (
            f'{_JAAS_MODULES[mechanism]} required username="{user}" password="{password}";'
        )
    if settings.security_protocol.endswith("SSL"):
        if settings.ssl_ca:
            config["ssl.truststore.type"] = "PEM"
            config["ssl.truststore.location"] = settings.ssl_ca
        if settings.ssl_cert and settings.ssl_key:
            config["ssl.keystore.type"] = "PEM"
            config["ssl.keystore.certificate.chain"] = _read(settings.ssl_cert)
            config["ssl.keystore.key"] = _read(settings.ssl_key)
        if settings.ssl_skip_verify:
            config["ssl.endpoint.identification.algorithm"] = ""
    return config


def _read(path: str) -> str:
    with open(path) as handle:
        return handle.read()
