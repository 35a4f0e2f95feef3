"""Read queries on the API's pool: one connection (and one transaction) per request."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row
from starlette.requests import Request

from metastore.api.readmodels import OTHER_LAYOUT, ReadModelVersions
from metastore.problems import ProblemError


@contextlib.asynccontextmanager
async def connection(
    request: Request, *, reserved: bool = False
) -> AsyncIterator[AsyncConnection[Any]]:
    """A read connection; `reserved`: one of the few kept for /status and the probes, which
    reads cannot take (metastore/app.py). A read of read models of another release than
    this one is a 503 `read-models-rebuilding` (metastore/api/readmodels.py)."""
    pool = request.app.state.reserved_pool if reserved else request.app.state.pool
    versions: ReadModelVersions = request.app.state.read_model_versions
    async with pool.connection() as conn:
        if reserved:  # (/status and the probes read the bookkeeping, not the read models)
            yield conn
            return
        await versions.require(conn)
        try:
            yield conn
        except OTHER_LAYOUT as exc:
            raise versions.unreadable(exc) from exc
        except ProblemError:
            # An answer (a 404, a 400), not a failure: the read ends with COMMIT as a 200's
            # does. Left to the pool's ROLLBACK, psycopg forgot every statement it had
            # prepared on the connection, so each read after one was planned again.
            if conn.info.transaction_status == TransactionStatus.INTRANS:
                with contextlib.suppress(psycopg.Error):  # (the answer stands; the pool
                    await conn.commit()  # replaces a connection that broke meanwhile)
            raise


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
