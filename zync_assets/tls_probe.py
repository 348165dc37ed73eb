"""Whether an address answers TLS: the cause of "connection closed" when a client spoke
plaintext to a TLS-only service (a Kafka SSL listener, an https registry)."""

from __future__ import annotations

import socket
import ssl


def speaks_tls(address: str, timeout: float = 2.0) -> bool:
    """Whether `host:port` completes a TLS handshake (nothing verified, nothing sent)."""
    host, _, port = address.rpartition(":")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as raw,
            context.wrap_socket(raw),
        ):
            return True
    except (OSError, ValueError):  # ssl.SSLError is an OSError
        return False
