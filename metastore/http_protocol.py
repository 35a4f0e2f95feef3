"""The API's HTTP protocol: uvicorn's httptools protocol with a request timeout, and one
send() per answer.

METASTORE_REQUEST_TIMEOUT bounds the time from a request's first byte (or the
connection's opening) to its last. uvicorn has no such timeout: a client sending a byte a
second, in its headers or its body, would hold its connection (and an ingest request's
task) forever (slowloris). This protocol closes a connection whose request is not
complete in time: with a 408 when a request had begun and nothing has been answered yet,
silently when nothing was sent (as after a keep-alive, a client may send its next request
just then and must not read a 408 as its answer). One timer per request covers the
headers and the body alike, and costs less than timing the body in the application.

uvicorn writes an answer's head and body with a system call each; here they leave
together (`_OneSendPerTurn`; docs/PERFORMANCE.md, "One send per answer").

Neither can be had through uvicorn's public interface (an ASGI app never sees the
connection, and uvicorn has no request timeout), so this module subclasses uvicorn's
`HttpToolsProtocol` and reads and replaces parts of its request cycle. What it relies on
is listed below and checked by tests/test_uvicorn_guard.py, which fails naming the
missing part when an installed uvicorn lacks one; TESTED_UVICORN is the range it passed
with, and pyproject.toml bounds uvicorn to it.

The request head (request line and headers) is limited to HEAD_LIMIT bytes: past it the
answer is 431. httptools sets no limit and gathers a header in memory until it ends (a
200 MB header was read and answered 200), so the bytes of a head still coming are counted
as they arrive, before the parser sees them, and the connection is closed after the 431; a
head that came whole (behind a pipelined request) is measured when parsed. Malformed HTTP
is answered 400 in problem+json, like every other refusal.
"""

from __future__ import annotations

import asyncio
import logging

from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from metastore.problems import problem_body, problem_response

log = logging.getLogger("metastore.access")

# The uvicorn releases this module was tested with (the bound in pyproject.toml).
TESTED_UVICORN = ">=0.30,<0.56"
# What it uses of uvicorn's protocol and of its request cycle, besides the hooks it
# overrides (every public method of APIHttpProtocol is one of HttpToolsProtocol's).
PROTOCOL_ATTRIBUTES = ("cycle", "transport", "loop", "url", "headers", "app")
CYCLE_ATTRIBUTES = ("transport", "response_started", "response_complete")

# Request line and headers together; nginx allows 32 KB, Node.js 16 KB. A JWT bearer token
# of a few KB fits many times over.
HEAD_LIMIT = 64 * 1024
HEAD_END = b"\r\n\r\n"
# After a 431 the client is most likely still sending its head: what comes is read and
# dropped this long before the connection closes, as closing at once would reset it, and a
# reset can discard the answer before the client reads it (nginx's "lingering close").
LINGER_S = 2.0


def closing_answer(status: int, reason: str, detail: str) -> bytes:
    """A whole problem+json answer that closes the connection, written by the protocol."""
    body = problem_body(status, detail, title=reason)
    return (
        b"HTTP/1.1 %d %b\r\n"
        b"content-type: application/problem+json\r\n"
        b"connection: close\r\n"
        b"content-length: %d\r\n\r\n%b"
    ) % (status, reason.encode(), len(body), body)


HEAD_TOO_LARGE_DETAIL = (
    f"the request line and headers are larger than the limit of {HEAD_LIMIT} bytes"
)
HEAD_TOO_LARGE = closing_answer(431, "Request Header Fields Too Large", HEAD_TOO_LARGE_DETAIL)


def _refusing(status: int, detail: str) -> ASGIApp:
    """An ASGI app answering every request with this problem (the body is then dropped).

    It stands in for the whole application, access log included, so it logs the refusal.
    """
    response = problem_response(status, detail)

    async def refuse(scope: Scope, receive: Receive, send: Send) -> None:
        extra = {"status": status, "method": scope["method"], "path": scope["path"]}
        log.warning("request refused", extra={**extra, "detail": detail})
        await response(scope, receive, send)

    return refuse


_HEAD_TOO_LARGE_APP = _refusing(431, HEAD_TOO_LARGE_DETAIL)


def head_refusal(url: bytes, headers: list[tuple[bytes, bytes]]) -> ASGIApp | None:
    """The app answering 431 to a parsed head past HEAD_LIMIT, or None to serve it.

    The whole head is measured here too: one that came in a single read (behind a
    pipelined request, say) was not counted on its way in.
    """
    size = len(url)
    for name, value in headers:
        size += len(name) + len(value) + 4
    return _HEAD_TOO_LARGE_APP if size > HEAD_LIMIT else None


class _OneSendPerTurn:
    """A response's transport whose writes in one turn of the event loop leave as one.

    uvicorn writes a response's head and its body separately: two send() system calls for
    every answer. Held until the end of the loop's turn, the head leaves with the body; a
    streamed response still leaves chunk by chunk, each at the end of the turn that wrote
    it. Closing sends what is held first, and past HOLD_BYTES a write is sent at once, so
    a large streamed answer meets the transport's flow control as before.
    """

    HOLD_BYTES = 64 * 1024

    __slots__ = ("_held", "_held_bytes", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []
        self._held_bytes = 0

    def write(self, data: bytes) -> None:
        if not self._held:
            self._loop.call_soon(self.flush)
        self._held.append(data)
        self._held_bytes += len(data)
        if self._held_bytes >= self.HOLD_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self._held:
            return
        data = self._held[0] if len(self._held) == 1 else b"".join(self._held)
        self._held = []
        self._held_bytes = 0
        if not self._transport.is_closing():
            self._transport.write(data)

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def close(self) -> None:
        self.flush()
        self._transport.close()


def api_http_protocol(timeout: float) -> type[HttpToolsProtocol]:
    """The protocol class, closing connections whose request takes over `timeout` s."""
    answer = closing_answer(
        408, "Request Timeout", f"the request did not arrive within {timeout:g} s"
    )

    class APIHttpProtocol(HttpToolsProtocol):
        _deadline: asyncio.TimerHandle | None = None
        _request_begun = False
        _headers_complete = False
        _head_bytes = 0  # of the head still coming, as received (HEAD_LIMIT)
        _refused = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        # Whatever the protocol writes or closes itself goes after what a response holds.
        def data_received(self, data: bytes) -> None:
            self._send_held()
            if self._refused:
                return
            if not self._headers_complete:
                self._head_bytes += len(data)
                # Past the limit, the head must end within what the limit leaves of this data.
                if self._head_bytes > HEAD_LIMIT and (
                    data.find(HEAD_END, 0, HEAD_LIMIT - (self._head_bytes - len(data))) < 0
                ):
                    self._refuse_head()
                    return
            super().data_received(data)

        def send_400_response(self, msg: str) -> None:
            if self._refused:  # answered already; nothing more is read
                return
            self._refused = True
            self.transport.write(closing_answer(400, "Bad Request", f"{msg} (malformed HTTP)"))
            self.transport.close()

        def _refuse_head(self) -> None:
            """431 for a head past the limit (nothing of it goes to the parser)."""
            self._refused = True
            self._disarm()
            self._send_held()
            # Not inside the previous request's answer, still being written: only close.
            if self.cycle is not None and not self.cycle.response_complete:
                self.transport.close()
                return
            log.warning("request refused", extra={"status": 431, "detail": HEAD_TOO_LARGE_DETAIL})
            self.transport.write(HEAD_TOO_LARGE)
            if self.transport.can_write_eof():
                self.transport.write_eof()
            self.loop.call_later(LINGER_S, self.transport.close)

        def shutdown(self) -> None:
            self._send_held()
            super().shutdown()

        def _send_held(self) -> None:
            if self.cycle is not None and isinstance(self.cycle.transport, _OneSendPerTurn):
                self.cycle.transport.flush()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._request_begun = True
            if self._deadline is None:  # the next request on a kept-alive connection
                self._arm()

        def on_headers_complete(self) -> None:
            self._headers_complete = True
            self._head_bytes = 0
            refusal = head_refusal(self.url, self.headers)
            if refusal is None:
                super().on_headers_complete()
            else:
                # Answered like uvicorn's own 503 past limit_concurrency: another app.
                app, self.app = self.app, refusal
                try:
                    super().on_headers_complete()
                finally:
                    self.app = app
            # The request's cycle (made just now) answers through _OneSendPerTurn.
            if self.cycle is not None and self.cycle.transport is self.transport:
                held = _OneSendPerTurn(self.transport, self.loop)
                self.cycle.transport = held  # type: ignore[assignment]

        def on_message_complete(self) -> None:
            self._disarm()
            self._request_begun = self._headers_complete = False
            super().on_message_complete()

        def _arm(self) -> None:
            self._deadline = self.loop.call_later(timeout, self._too_slow)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _too_slow(self) -> None:
            self._deadline = None
            if self.transport.is_closing():
                return
            self._send_held()
            # Never inside an answer: this request's, which the application may have begun
            # early (a 413 on the declared length) while the body is still coming, or, with
            # its headers still coming, the previous request's.
            if self._headers_complete:
                answering = self.cycle is not None and self.cycle.response_started
            else:
                answering = self.cycle is not None and not self.cycle.response_complete
            if self._request_begun and not answering:
                self.transport.write(answer)
            # The application, if it was reading the body, sees the client disconnect.
            self.transport.close()

    return APIHttpProtocol
