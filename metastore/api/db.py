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
async def connection(request: Request) -> AsyncIterator[AsyncConnection[Any]]:
    async with request.app.state.pool.connection() as conn:
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
