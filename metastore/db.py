"""The API's connection pools, and what a database outage looks like to clients."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import select
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from starlette.responses import Response

from metastore.cadence_overrides import SETTING as cadence_overrides_setting
from metastore.config import Settings
from metastore.eventlog import catch_up_order_async
from metastore.login import GatedAsyncConnection
from metastore.problems import problem_response

log = logging.getLogger("metastore.api")

# How long a request waits for a connection before it is answered 503 (clients retry).
POOL_TIMEOUT_S = 5.0
RETRY_AFTER_S = "5"

# OperationalError includes a replica's "conflict with recovery" (SQLSTATE 40001): a read
# its replay cancelled is answered 503 with Retry-After too.
DATABASE_UNAVAILABLE = (psycopg.OperationalError, PoolTimeout)
# Connections /readyz and /api/v1/status keep to themselves: reads (and their statement
# timeout) can hold every connection of the read pool, and the probes must still answer.
RESERVED_CONNECTIONS = 2

T = TypeVar("T")


def create_pool(
    settings: Settings,
    *,
    min_size: int = 1,
    max_size: int | None = None,
    autocommit: bool = False,
    name: str = "metastore-api",
    configure: Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]] | None = None,
    url: str | None = None,
) -> AsyncConnectionPool[Any]:
    """A pool on `url`, by default the primary (METASTORE_DATABASE_URL)."""
    url = url or settings.database_url
    assert url is not None

    async def configure_session(conn: psycopg.AsyncConnection[Any]) -> None:
        # psycopg hands timestamptz out in the session's zone: without this the API's times
        # followed the server's TimeZone setting (`+05:30` on a server set to Asia/Kolkata).
        await conn.execute("SET TimeZone = 'UTC'")
        if configure is not None:
            await configure(conn)
        if not conn.autocommit:
            await conn.commit()  # a pool takes connections back idle only

    async def check(conn: psycopg.AsyncConnection[Any]) -> None:
        try:
            await drop_if_closed(conn)
        except psycopg.Error:
            # What closed this connection (a restart) closed the pool's others too: replace
            # them all now, rather than meet them one by one behind the pool's back-off
            # between failed checks (0, 1, 2, 4 s: past the pool's timeout with 4 of them).
            await pool.check()
            raise

    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        url,
        min_size=min_size,
        max_size=max(settings.pool_size if max_size is None else max_size, min_size),
        timeout=POOL_TIMEOUT_S,
        # A request fails fast while PostgreSQL is down (503 after `timeout`); the pool keeps
        # trying to connect for as long (at 0, 1, 3 and 5 s), so a request that began
        # waiting in an outage is served soon after PostgreSQL is back, not at its timeout.
        kwargs={"connect_timeout": 5, "autocommit": autocommit},
        reconnect_timeout=POOL_TIMEOUT_S,
        open=False,
        # A refused login holds back every pool's attempts (metastore/login.py).
        connection_class=GatedAsyncConnection,
        name=name,
        configure=configure_session,
        check=check,
    )
    return pool


async def drop_if_closed(conn: psycopg.AsyncConnection[Any]) -> None:
    """The pools' `check`, run before a connection is handed out: one that PostgreSQL has
    closed since its last use (a restart, pg_terminate_backend) raises, and the pool
    replaces it, so the first request after a restart does not fail on it.

    A closed connection has its FATAL message or EOF waiting on its socket, which a
    zero-timeout poll sees without a round trip; only such a connection is tried with
    psycopg_pool's own check (an empty query, a round trip on every checkout otherwise).
    """
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    if poller.poll(0):
        await AsyncConnectionPool.check_connection(conn)


_abandoned: set[asyncio.Task[Any]] = set()


async def within(seconds: float, work: Awaitable[T]) -> T:
    """`work`'s result, or TimeoutError after `seconds` whatever the database does.

    Unlike asyncio.timeout it does not wait for the cancelled work to end: psycopg first
    asks the server to cancel a running query, which a hung server leaves unanswered for
    up to 10 s. The work is cancelled and left to finish in the background.
    """
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    finally:
        if not task.done():
            task.cancel()
            _abandoned.add(task)
            task.add_done_callback(_forget)
    if task not in done:
        raise TimeoutError
    return task.result()


def _forget(task: asyncio.Task[Any]) -> None:
    _abandoned.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log it as never retrieved


# A full group (group_commit.MAX_GROUP_BYTES, 4 MB of JSON) is hashed and sorted by the
# append; with the default 4 MB of work_mem both spilled to temporary files under load.
INGEST_WORK_MEM = "16MB"


async def tune_ingest_session(conn: psycopg.AsyncConnection[Any]) -> None:
    """Session settings of the group committer's (autocommit) connections.

    lz4 stores the events' JSON faster than the default pglz (docs/PERFORMANCE.md, "The log
    keeps the event as json"),
    where the server has it; only new values are affected, nothing is rewritten. work_mem
    big enough for a full group (INGEST_WORK_MEM). The log's order caught up with the
    server's transaction counter (eventlog.catch_up_order).
    """
    await conn.execute(f"SET work_mem = '{INGEST_WORK_MEM}'")
    with contextlib.suppress(psycopg.Error):  # a server built without lz4 keeps pglz
        await conn.execute("SET default_toast_compression = 'lz4'")
    # Before this connection's first append: a server the store was moved to (a restore)
    # would otherwise key new events behind the restored ones, where no reader looks.
    await catch_up_order_async(conn)


def read_session(
    timeout_s: float, cadence_overrides: str | None = None
) -> Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]]:
    """The session settings of read connections: a statement runs `timeout_s` at most,
    and is planned without JIT compilation; `cadence_overrides` (compiled: metastore/
    cadence_overrides.py) are the session's setting the lateness reads apply.

    JIT pays off for long analytical scans; the reads are index lookups, but a recursive
    walk's row estimate can run into millions, past jit_above_cost, and then compiling
    took 0.5-1.2 s of a 20 ms query (docs/PERFORMANCE.md, "Reads without JIT").
    """

    async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute(f"SET statement_timeout = {round(timeout_s * 1000)}")
        await conn.execute("SET jit = off")
        if cadence_overrides is not None:  # (read by api/lateness.py's statements)
            await conn.execute(
                "SELECT set_config(%s, %s, false)", (cadence_overrides_setting, cadence_overrides)
            )

    return configure


def statement_timed_out(exc: BaseException) -> bool:
    """Whether `exc` is PostgreSQL cancelling a statement at its statement_timeout (not a
    cancel by an operator, nor a replica's conflict with recovery)."""
    return isinstance(exc, psycopg.errors.QueryCanceled) and "statement timeout" in str(exc)


def database_unavailable(exc: Exception) -> Response:
    """The answer while PostgreSQL cannot be reached: 503 with Retry-After (clients retry)."""
    log.warning("database unavailable", extra={"error": type(exc).__name__})
    return problem_response(
        503, "the database is unavailable; retry later", headers={"Retry-After": RETRY_AFTER_S}
    )


READ_MODELS_MISSING = (
    "the read models are not created yet (the projector creates them when it starts); retry later"
)


def read_models_missing(exc: Exception) -> Response:
    """The answer to a read before the projector's first start has created the read-model
    tables (a fresh install's first seconds): 503 with Retry-After, not a server error."""
    log.warning("read models not created yet", extra={"error": type(exc).__name__})
    return problem_response(503, READ_MODELS_MISSING, headers={"Retry-After": RETRY_AFTER_S})
