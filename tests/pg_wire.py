"""Round trips to PostgreSQL counted on the wire: a TCP relay between a process and the
server that reads what the client sends and counts the messages after which it waits for
the server (Sync: a statement of the extended protocol, or a pipeline of them; Query: a
simple one). A pipelined statement counts nothing of its own, as it costs no wait, which
counting logged statements (support.statements_logged) cannot tell apart."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import urllib.parse
from collections.abc import Iterator

# Untyped requests before the startup message (SSL, GSSAPI encryption, cancel).
_BEFORE_STARTUP = {80877103, 80877104, 80877102}
_WAITED_ON = {ord("S"), ord("Q")}


class RoundTrips:
    """A relay to the server of `url` (`url()`: the same database through the relay);
    `take()` gives the round trips since its previous call, over all connections."""

    def __init__(self, url: str) -> None:
        self._target = urllib.parse.urlsplit(url)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._count = 0
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = [self._listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self) -> str:
        port = self._listener.getsockname()[1]
        netloc = self._target.netloc.rsplit(":", 1)[0] + f":{port}"
        query = "&".join(q for q in (self._target.query, "sslmode=disable") if q)  # (readable)
        return urllib.parse.urlunsplit(self._target._replace(netloc=netloc, query=query))

    def take(self) -> int:
        with self._lock:
            found, self._count = self._count, 0
        return found

    def close(self) -> None:
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # (closed)
                return
            server = socket.create_connection((self._target.hostname, self._target.port))
            self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, from_client: bool) -> None:
        buffer, started = b"", False
        try:
            while data := source.recv(65536):
                sink.sendall(data)
                if from_client:
                    buffer, started = self._read(buffer + data, started)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _read(self, buffer: bytes, started: bool) -> tuple[bytes, bool]:
        """Counts the whole client messages in `buffer`; the rest, and whether the startup
        message has passed."""
        while True:
            if len(buffer) < (5 if started else 8):
                return buffer, started
            if started:
                length = struct.unpack("!i", buffer[1:5])[0] + 1
            else:
                length, code = struct.unpack("!ii", buffer[:8])
            if len(buffer) < length:
                return buffer, started
            if started and buffer[0] in _WAITED_ON:
                with self._lock:
                    self._count += 1
            started = started or code not in _BEFORE_STARTUP
            buffer = buffer[length:]


@contextlib.contextmanager
def round_trips(url: str) -> Iterator[RoundTrips]:
    relay = RoundTrips(url)
    try:
        yield relay
    finally:
        relay.close()
