"""The API's connection pool, and what a database outage looks like to clients."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from metastore.config import Settings

# How long a request waits for a connection before it is answered 503 (clients retry).
POOL_TIMEOUT_S = 5.0
RETRY_AFTER_S = "5"

DATABASE_UNAVAILABLE = (psycopg.OperationalError, PoolTimeout)


def create_pool(settings: Settings, *, min_size: int = 1) -> AsyncConnectionPool[Any]:
    assert settings.database_url is not None
    return AsyncConnectionPool(
        settings.database_url,
        min_size=min_size,
        max_size=max(settings.pool_size, min_size),
        timeout=POOL_TIMEOUT_S,
        # Fails fast while PostgreSQL is down (503 to the client) and reconnects by itself.
        kwargs={"connect_timeout": 5, "autocommit": False},
        reconnect_timeout=0,
        open=False,
        name="metastore-api",
    )
