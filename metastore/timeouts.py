"""The request timeout for the part of a request the application never sees: its headers.

METASTORE_REQUEST_TIMEOUT bounds how long a client may take to send its request. Ingest
reads the body under it (408, metastore/ingest.py); the request line and headers are
parsed by uvicorn before the application is called, and uvicorn has no timeout for them,
so a client sending a header byte a second would hold its connection forever (slowloris).
This protocol closes a connection whose request headers are not complete in time: with a
408 when a request had begun, silently when nothing was sent (as after a keep-alive, a
client may send its next request just then and must not read a 408 as its answer).
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

REQUEST_TIMEOUT_ANSWER = (
    b"HTTP/1.1 408 Request Timeout\r\n"
    b"content-type: application/problem+json\r\n"
    b"connection: close\r\n"
    b"content-length: %d\r\n\r\n%b"
)
PROBLEM = (
    b'{"title":"Request Timeout","status":408,'
    b'"detail":"the request headers did not arrive in time"}'
)


def header_timeout_protocol(timeout: float) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol, closing connections whose headers take over `timeout` s."""

    class HeaderTimeoutProtocol(HttpToolsProtocol):
        _headers_deadline: asyncio.TimerHandle | None = None
        _request_begun = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._request_begun = True
            if self._headers_deadline is None:  # the next request on a kept-alive connection
                self._arm()

        def on_headers_complete(self) -> None:
            self._disarm()
            self._request_begun = False
            super().on_headers_complete()

        def _arm(self) -> None:
            self._headers_deadline = self.loop.call_later(timeout, self._headers_too_slow)

        def _disarm(self) -> None:
            if self._headers_deadline is not None:
                self._headers_deadline.cancel()
                self._headers_deadline = None

        def _headers_too_slow(self) -> None:
            self._headers_deadline = None
            if self.transport.is_closing():
                return
            answering = self.cycle is not None and not self.cycle.response_complete
            if self._request_begun and not answering:  # never inside another answer
                self.transport.write(REQUEST_TIMEOUT_ANSWER % (len(PROBLEM), PROBLEM))
            self.transport.close()

    return HeaderTimeoutProtocol
