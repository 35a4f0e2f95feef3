"""The API's connection pools, and what a database outage looks like to clients."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from starlette.responses import Response

from metastore.config import Settings
from metastore.problems import problem_response

log = logging.getLogger("metastore.api")

# How long a request waits for a connection before it is answered 503 (clients retry).
POOL_TIMEOUT_S = 5.0
RETRY_AFTER_S = "5"

DATABASE_UNAVAILABLE = (psycopg.OperationalError, PoolTimeout)


def create_pool(
    settings: Settings,
    *,
    min_size: int = 1,
    max_size: int | None = None,
    autocommit: bool = False,
    name: str = "metastore-api",
    configure: Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]] | None = None,
) -> AsyncConnectionPool[Any]:
    assert settings.database_url is not None
    return AsyncConnectionPool(
        settings.database_url,
        min_size=min_size,
        max_size=max(settings.pool_size if max_size is None else max_size, min_size),
        timeout=POOL_TIMEOUT_S,
        # Fails fast while PostgreSQL is down (503 to the client) and reconnects by itself.
        kwargs={"connect_timeout": 5, "autocommit": autocommit},
        reconnect_timeout=0,
        open=False,
        name=name,
        configure=configure,
    )


async def prefer_lz4(conn: psycopg.AsyncConnection[Any]) -> None:
    """Compresses what this (autocommit) session stores with lz4, when the server has it.

    For the event log's appends: lz4 stores the events' JSON faster than the default pglz
    (ARCHITECTURE.md, Throughput). Only new values are affected; nothing is rewritten.
    """
    with contextlib.suppress(psycopg.Error):  # a server built without lz4 keeps pglz
        await conn.execute("SET default_toast_compression = 'lz4'")


def database_unavailable(exc: Exception) -> Response:
    """The answer while PostgreSQL cannot be reached: 503 with Retry-After (clients retry)."""
    log.warning("database unavailable", extra={"error": type(exc).__name__})
    return problem_response(
        503, "the database is unavailable; retry later", headers={"Retry-After": RETRY_AFTER_S}
    )
