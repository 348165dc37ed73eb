"""The local stack's secured Kafka: a private CA, the broker's and a client's certificates,
and one SASL user, made once per stack home (`.zync/secure/`) and reused.

The files are what a managed Kafka hands its users — a CA to trust, a user and password,
a client certificate for mutual TLS — so `zync stack up --secure` exercises the same
client settings (`resources/kafka.json`, `ZYNC_KAFKA_*`) a production cluster needs.
Keys are EC P-256 (fast to make; TLS 1.2/1.3 and both Kafka clients accept them).
"""

from __future__ import annotations

import datetime
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # cryptography is imported where keys are made, not at start-up
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

SASL_USER = "zync"
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
CLIENT_COMMON_NAME = "zync-client"
_VALID_DAYS = 825  # the longest a TLS client accepts for a server certificate


@dataclass(frozen=True)
class LocalCredentials:
    folder: Path

    @property
    def ca(self) -> Path:
        return self.folder / "ca.pem"

    @property
    def server_cert(self) -> Path:
        """The stack's server certificate (127.0.0.1, localhost): broker and registry."""
        return self.folder / "server.pem"

    @property
    def server_key(self) -> Path:
        return self.folder / "server-key.pem"

    @property
    def broker_keystore(self) -> Path:
        """The broker's key and certificate chain in one PEM file (Kafka's PEM keystore)."""
        return self.folder / "broker.pem"

    @property
    def client_cert(self) -> Path:
        return self.folder / "client.pem"

    @property
    def client_key(self) -> Path:
        return self.folder / "client-key.pem"

    @property
    def password_file(self) -> Path:
        return self.folder / "password"

    def password(self) -> str:
        return self.password_file.read_text().strip()

    def sasl_client_settings(self, bootstrap: str, mechanism: str = "SCRAM-SHA-512") -> dict:
        """A `resources/kafka.json` for the SASL_SSL listener."""
        return {
            "bootstrap_servers": bootstrap,
            "security_protocol": "SASL_SSL",
            "sasl_mechanisms": mechanism,
            "sasl_username": SASL_USER,
            "sasl_password": self.password(),
            "tls_server_ca_cert_file": str(self.ca),
        }

    def registry_client_settings(self, url: str) -> dict:
        """A `resources/schema_registry.json` for the secured registry."""
        return {
            "url": url,
            "user": SASL_USER,
            "password": self.password(),
            "ca_cert_file": str(self.ca),
        }

    def mtls_client_settings(self, bootstrap: str) -> dict:
        """A `resources/kafka.json` for the mutual-TLS listener."""
        return {
            "bootstrap_servers": bootstrap,
            "security_protocol": "SSL",
            "tls_server_ca_cert_file": str(self.ca),
            "tls_client_cert_file": str(self.client_cert),
            "tls_client_key_file": str(self.client_key),
        }


def local_credentials(home: Path) -> LocalCredentials:
    """The stack's CA, certificates and SASL password, made on first use."""
    credentials = LocalCredentials(home / "secure")
    if credentials.client_key.exists() and credentials.password_file.exists():
        return credentials
    credentials.folder.mkdir(parents=True, exist_ok=True)
    os.chmod(credentials.folder, 0o700)
    ca_key, ca_cert = _make_ca()
    server_key, server_cert = _issue(ca_key, ca_cert, "zync-local-server", server=True)
    client_key, client_cert = _issue(ca_key, ca_cert, CLIENT_COMMON_NAME, server=False)
    _write(credentials.ca, _cert_pem(ca_cert))
    _write(credentials.server_cert, _cert_pem(server_cert))
    _write(credentials.server_key, _key_pem(server_key))
    _write(credentials.broker_keystore, _key_pem(server_key) + _cert_pem(server_cert))
    _write(credentials.client_cert, _cert_pem(client_cert))
    _write(credentials.client_key, _key_pem(client_key))
    _write(credentials.password_file, secrets.token_urlsafe(24).encode() + b"\n")
    return credentials


def write_client_settings(credentials: LocalCredentials, name: str, settings: dict) -> Path:
    """Save client settings beside the credentials (owner-only: they hold the password)."""
    path = credentials.folder / name
    _write(path, (json.dumps(settings, indent=2) + "\n").encode())
    return path


def _write(path: Path, data: bytes) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)


def _make_ca() -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "zync-local-ca")])
    cert = (
        _builder(name, name, key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _issue(
    ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate, common_name: str, server: bool
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, common_name)])
    usage = x509.ExtendedKeyUsageOID.SERVER_AUTH if server else x509.ExtendedKeyUsageOID.CLIENT_AUTH
    builder = _builder(subject, ca_cert.subject, key.public_key()).add_extension(
        x509.ExtendedKeyUsage([usage]), critical=False
    )
    if server:  # the stack listens on loopback only; clients verify the address they dialled
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    from cryptography import x509

    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    # PKCS#8: the only unencrypted private-key form Kafka's PEM keystore reads.
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
