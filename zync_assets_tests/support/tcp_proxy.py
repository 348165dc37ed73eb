"""A TCP proxy on 127.0.0.1 that can turn into a black hole: while `swallowing`, it accepts
connections and reads what they send but forwards nothing either way, on new and open
connections alike, so a request sent then is never answered (a lost request on a kept-alive
connection, a network that drops packets). Afterwards new connections are forwarded again;
a connection that lost bytes stays silent, as such a connection does."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from zync_assets_tests.support.ports import free_port

_CHUNK = 65536


class BlackHoleProxy:
    def __init__(self, target_port: int) -> None:
        self.port = free_port()
        self._target = ("127.0.0.1", target_port)
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._swallowing = threading.Event()
        self._closed = threading.Event()
        self._broken: set[socket.socket] = set()  # connections that lost bytes: silent for good
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self.swallowed_bytes = 0  # what the black hole took: the fault landed
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    @contextmanager
    def swallowing(self) -> Iterator[None]:
        self._swallowing.set()
        try:
            yield
        finally:
            self._swallowing.clear()

    def close(self) -> None:
        """Stop listening and close every connection (a client parked on one wakes up)."""
        self._closed.set()
        self._listener.close()
        with self._lock:
            for end in self._open:
                with suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
                end.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(
                    target=self._pipe, args=(source, sink, client), name="proxy-pipe", daemon=True
                ).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, client: socket.socket) -> None:
        try:
            while not self._closed.is_set():
                data = source.recv(_CHUNK)
                if not data:
                    break
                with self._lock:
                    if self._swallowing.is_set():
                        self._broken.add(client)
                    if client in self._broken:
                        self.swallowed_bytes += len(data)
                        continue
                sink.sendall(data)
        except OSError:
            pass
        finally:
            # A connection that lost bytes is never told its upstream went: it stays open
            # and silent, as the connection of a lost request does.
            silent = client in self._broken and sink is client
            for end in (source,) if silent else (source, sink):
                with suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
