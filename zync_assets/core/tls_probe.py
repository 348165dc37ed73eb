"""Whether an address answers TLS: the cause of "connection closed" when a client spoke
plaintext to a TLS-only service (a Kafka SSL listener, an https registry)."""

from __future__ import annotations

import socket
import ssl


def speaks_tls(address: str, timeout: float = 2.0) -> bool:
    """Whether `host:port` answers a TLS handshake: completes it (nothing verified,
    nothing sent), or refuses it with a TLS alert (a listener that wants a client
    certificate), rather than closing the connection as a plaintext service does."""
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
    except ssl.SSLError as exc:
        return "ALERT" in str(exc.reason or "").upper()
    except (OSError, ValueError):
        return False
