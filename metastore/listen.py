"""Listening sockets whose failure is one line naming the variable that chose the port.

A port already in use was a traceback from the projector (http.server) and a log line
about `[Errno 98]` from the API (uvicorn); both processes now bind through here, and
`metastore dev` checks its ports with it before it starts anything.
"""

from __future__ import annotations

import errno
import socket

BACKLOG = 2048  # uvicorn's default


class PortUnavailable(Exception):
    """The port cannot be listened on; the message names the variable that chose it."""


def unavailable(variable: str, host: str, port: int, exc: OSError) -> PortUnavailable:
    if exc.errno == errno.EADDRINUSE:
        return PortUnavailable(
            f"{variable}={port}: port {port} is already in use on {host}; stop what listens "
            f"there or set {variable} to another port"
        )
    return PortUnavailable(
        f"{variable}={port}: cannot listen on {host}:{port}: {exc.strerror or exc}"
    )


def listening_socket(host: str, port: int, variable: str) -> socket.socket:
    """A TCP socket listening on host:port (as uvicorn would bind it), or PortUnavailable."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except OSError as exc:
        raise unavailable(variable, host, port, exc) from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise unavailable(variable, host, port, exc) from None
    return sock


def check_free(host: str, port: int, variable: str) -> None:
    """Raises PortUnavailable unless host:port could be listened on now."""
    listening_socket(host, port, variable).close()
