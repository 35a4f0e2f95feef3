"""Read queries on the API's pool: one connection (and one transaction) per request."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import tuple_row
from starlette.requests import Request

from metastore.problems import ProblemError


@contextlib.asynccontextmanager
async def connection(
    request: Request, *, reserved: bool = False
) -> AsyncIterator[AsyncConnection[Any]]:
    """A read connection; `reserved`: one of the few kept for /status and the probes, which
    reads cannot take (metastore/app.py)."""
    pool = request.app.state.reserved_pool if reserved else request.app.state.pool
    async with pool.connection() as conn:
        yield conn


async def rows(conn: AsyncConnection[Any], query: str, params: Any = None) -> list[Any]:
    async with conn.cursor(row_factory=tuple_row) as cur:
        await cur.execute(query, params)
        return await cur.fetchall()


async def row(conn: AsyncConnection[Any], query: str, params: Any = None) -> Any:
    async with conn.cursor(row_factory=tuple_row) as cur:
        await cur.execute(query, params)
        return await cur.fetchone()


def not_found(what: str, value: object) -> ProblemError:
    return ProblemError(404, f"no {what} with id {value}")
