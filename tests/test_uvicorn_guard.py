"""The guard on the uvicorn internals that metastore/http_protocol.py relies on.

The API's HTTP protocol subclasses uvicorn's `HttpToolsProtocol`, overrides its hooks and
reads and replaces parts of its request cycle (for the request timeout and one send() per
answer). None of that is uvicorn's public interface, so a uvicorn release can change it
without notice. These tests fail first, each naming what is missing, and say which range
was tested; an override that uvicorn no longer calls would otherwise switch the timeout or
the single send off without any error.

To move to a new uvicorn: install it, run this file and tests/test_ingest.py, then widen
TESTED_UVICORN and the bound in pyproject.toml together (and `make lock`).
"""

from __future__ import annotations

import asyncio
import inspect
import socket
import threading
import time
import tomllib
from collections.abc import Iterator
from importlib.metadata import version
from typing import Any

import pytest
import uvicorn
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from metastore import http_protocol
from metastore.http_protocol import (
    CYCLE_ATTRIBUTES,
    PROTOCOL_ATTRIBUTES,
    TESTED_UVICORN,
    api_http_protocol,
)
from tests.support import ROOT

INSTALLED = version("uvicorn")
WHERE = f"uvicorn {INSTALLED} (metastore/http_protocol.py was tested with uvicorn{TESTED_UVICORN})"
PROTOCOL = api_http_protocol(30.0)
OVERRIDDEN = sorted(
    name
    for name, value in vars(PROTOCOL).items()
    if not name.startswith("_") and inspect.isfunction(value)
)
# Hooks uvicorn calls only for a request it cannot parse.
ON_MALFORMED_HTTP = {"send_400_response"}


def test_the_installed_uvicorn_is_in_the_tested_range() -> None:
    assert INSTALLED in SpecifierSet(TESTED_UVICORN), (
        f"{WHERE}: run tests/test_uvicorn_guard.py and tests/test_ingest.py against it, then "
        "widen TESTED_UVICORN in metastore/http_protocol.py and the bound in pyproject.toml"
    )


def test_pyproject_bounds_uvicorn_to_the_tested_range() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    uvicorn_requirements = [
        Requirement(line) for line in project["dependencies"] if line.startswith("uvicorn")
    ]
    assert [str(r.specifier) for r in uvicorn_requirements] == [
        str(SpecifierSet(TESTED_UVICORN))
    ], f"pyproject.toml must bound uvicorn to the tested range {TESTED_UVICORN}"


@pytest.mark.parametrize("hook", OVERRIDDEN)
def test_uvicorn_has_every_hook_the_protocol_overrides(hook: str) -> None:
    assert inspect.isfunction(getattr(HttpToolsProtocol, hook, None)), (
        f"{WHERE}: HttpToolsProtocol has no method {hook}(), which the API's protocol "
        "overrides; uvicorn would never call the override"
    )


def test_the_cycle_is_made_with_the_fields_the_protocol_reads() -> None:
    # uvicorn sets them in __init__: a renamed field shows in its source before any request.
    source = inspect.getsource(RequestResponseCycle.__init__)
    for field in CYCLE_ATTRIBUTES:
        assert f"self.{field} =" in source, (
            f"{WHERE}: RequestResponseCycle no longer sets `{field}`, which the API's "
            "protocol reads (the 408 decision) or replaces (one send per answer)"
        )


class _CountingTransport:
    """The socket's transport, counting the writes that reach it (a write is a send())."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _Observed:
    """What one connection showed of uvicorn's protocol while serving two requests."""

    hooks: list[str]
    transport: _CountingTransport
    protocol_attributes: set[str]
    cycles: list[dict[str, Any]]
    completed_at_close: bool | None


def _observing_protocol(observed: _Observed) -> type[HttpToolsProtocol]:
    def recorded(name: str) -> Any:
        def hook(self: Any, *args: Any) -> Any:
            observed.hooks.append(name)
            if name == "connection_made":
                observed.transport = _CountingTransport(args[0])
                args = (observed.transport,)
            if name == "connection_lost" and self.cycle is not None:
                observed.completed_at_close = self.cycle.response_complete
            result = getattr(PROTOCOL, name)(self, *args)
            if name == "on_headers_complete":
                observed.protocol_attributes = {a for a in PROTOCOL_ATTRIBUTES if hasattr(self, a)}
                cycle = self.cycle
                observed.cycles.append(
                    {
                        "fields": {a for a in CYCLE_ATTRIBUTES if hasattr(cycle, a)},
                        "held": isinstance(cycle.transport, http_protocol._OneSendPerTurn),
                        "started": cycle.response_started,
                    }
                )
            return result

        return hook

    return type("Observing", (PROTOCOL,), {name: recorded(name) for name in OVERRIDDEN})


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    assert scope["type"] == "http"
    body = b'{"path":"%s"}' % scope["path"].encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", b"%d" % len(body)),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
def served() -> Iterator[tuple[_Observed, socket.socket, uvicorn.Server]]:
    observed = _Observed()
    observed.hooks, observed.cycles, observed.completed_at_close = [], [], None
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        _app, http=_observing_protocol(observed), lifespan="off", loop="asyncio", log_level="error"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    client = socket.create_connection(listener.getsockname(), timeout=30)
    try:
        yield observed, client, server
    finally:
        client.close()
        server.should_exit = True
        thread.join(30)
        listener.close()


def _answer(client: socket.socket) -> bytes:
    received = b""
    while b"}" not in received:
        chunk = client.recv(65536)
        assert chunk, f"the connection closed after {received!r}"
        received += chunk
    return received


def test_each_answer_leaves_in_one_send_and_every_hook_is_called(
    served: tuple[_Observed, socket.socket, uvicorn.Server],
) -> None:
    observed, client, server = served
    answers = []
    for path in ("/first", "/second"):  # two requests on one kept-alive connection
        client.sendall(b"GET %s HTTP/1.1\r\nhost: test\r\n\r\n" % path.encode())
        answers.append(_answer(client))
    assert [a.split(b"\r\n", 1)[0] for a in answers] == [b"HTTP/1.1 200 OK"] * 2
    assert answers[1].endswith(b'{"path":"/second"}')

    assert observed.protocol_attributes == set(PROTOCOL_ATTRIBUTES), (
        f"{WHERE}: HttpToolsProtocol lacks "
        f"{set(PROTOCOL_ATTRIBUTES) - observed.protocol_attributes}"
    )
    assert len(observed.cycles) == 2
    for cycle in observed.cycles:
        assert cycle["fields"] == set(CYCLE_ATTRIBUTES), (
            f"{WHERE}: the request cycle lacks {set(CYCLE_ATTRIBUTES) - cycle['fields']}"
        )
        assert cycle["held"], f"{WHERE}: the cycle no longer writes through `cycle.transport`"
        assert cycle["started"] is False
    # The head and the body of each answer reached the socket in one write.
    assert observed.transport.writes == answers, (
        f"{WHERE}: {len(observed.transport.writes)} writes for 2 answers: uvicorn no longer "
        "writes an answer through the cycle's transport"
    )

    server.should_exit = True  # with the connection still open: uvicorn shuts it down
    deadline = time.monotonic() + 30
    while "connection_lost" not in observed.hooks:
        assert time.monotonic() < deadline, f"connection not closed; hooks: {observed.hooks}"
        time.sleep(0.02)
    called = set(observed.hooks)
    expected = set(OVERRIDDEN) - ON_MALFORMED_HTTP
    assert called == expected, f"{WHERE}: never called {expected - called}"
    assert observed.completed_at_close is True


def test_malformed_http_reaches_the_protocols_400_hook(
    served: tuple[_Observed, socket.socket, uvicorn.Server],
) -> None:
    observed, client, _ = served
    client.sendall(b"NOT HTTP AT ALL\r\n\r\n")
    received = b""
    while chunk := client.recv(65536):
        received += chunk
    assert set(observed.hooks) >= ON_MALFORMED_HTTP, (
        f"{WHERE}: uvicorn no longer calls {ON_MALFORMED_HTTP - set(observed.hooks)} on "
        "malformed HTTP, so it answers in text/plain instead of problem+json"
    )
    assert received.startswith(b"HTTP/1.1 400 ")
    assert b"application/problem+json" in received
