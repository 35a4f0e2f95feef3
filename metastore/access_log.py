"""Every HTTP request as one log line (method, path, status, duration, and who: principal,
`via` and groups when authenticated) and a latency sample.

The outermost middleware, so answers of the other middlewares (401/403) and errors are
logged and timed too. The query string is not logged: it is the client's business, and
paths are enough to tell what was asked. The duration runs until the application returns,
which for a stream is its last byte.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from metastore.auth import SCOPE_PREFIXES
from metastore.metrics import REQUEST_DURATION
from metastore.principal import principal_of

log = logging.getLogger("metastore.access")

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def route_label(scope: Scope, root_path: str) -> str:
    """The matched route's template (`/api/v1/jobs/{id}`), so label values stay few."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        mounted = scope.get("root_path", "")[len(root_path) :]
        return mounted + path
    for prefix, _ in SCOPE_PREFIXES:  # refused before routing, or no such route
        if scope["path"] == prefix or scope["path"].startswith(prefix + "/"):
            return prefix + "/*"
    return "unmatched"


class AccessLog:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        # The latency histogram's children by their labels, so `labels()` runs
        # once per label set, not on every request; label values are few (see route_label).
        self._durations: dict[tuple[str, str, int], Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        root_path = scope.get("root_path", "")
        status = 500  # what the client gets when the application fails before answering
        started = time.perf_counter()

        async def send_and_note_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note_status)
        finally:
            duration = time.perf_counter() - started
            method = scope["method"]
            labels = (
                method if method in _METHODS else "other",
                route_label(scope, root_path),
                status,
            )
            child = self._durations.get(labels)
            if child is None:
                child = self._durations[labels] = REQUEST_DURATION.labels(
                    labels[0], labels[1], str(status)
                )
            child.observe(duration)
            client = scope.get("client")
            extra = {
                "method": method,
                "path": scope["path"],
                "status": status,
                "duration_ms": round(duration * 1000, 2),
                "client": client[0] if client else None,
            }
            principal = principal_of(scope)  # who, as authentication found it (or refused)
            if principal.name:
                extra["principal"] = principal.name
                extra["via"] = principal.via  # the service acting for the user
                extra["groups"] = list(principal.groups)  # what its decisions used
            log.info("request", extra=extra)
