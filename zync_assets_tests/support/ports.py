"""Ports for the private stacks tests and benchmarks start."""

from __future__ import annotations

import socket

_GIVEN: set[int] = set()


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on now (the OS picks it), and not one this
    process was given before: the OS may pick a port again as soon as it is closed, and a
    stack given one port twice fails to start (Kafka's storage tool refuses two
    listeners on one port: a whole worker's tests errored so)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port
