"""/healthz (the process is alive) and /readyz (the database answers, the schema is current;
the body names projections stalled, see metastore.stalls)."""

from __future__ import annotations

from typing import Any

from psycopg_pool import AsyncConnectionPool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from metastore import login
from metastore.db import DATABASE_UNAVAILABLE, within
from metastore.migrations import migration_ids
from metastore.stalls import stalled_projections_async
from metastore.store_health import STALL_LOG

MISSING_MIGRATIONS = """
SELECT m FROM unnest(%s::text[]) AS m
WHERE NOT EXISTS (SELECT 1 FROM _yoyo_migration WHERE migration_id = m)
"""

# /readyz answers within their sum (under a second) whatever the database does: down or
# refusing (no connection within the wait: "unreachable"), or hung (no answer within the
# timeout). The chart's probes time out after 3 s. A replica that is down cannot fail the
# probe.
PRIMARY_PROBE_TIMEOUT_S, PRIMARY_CONNECTION_WAIT_S = 0.7, 0.5
REPLICA_PROBE_TIMEOUT_S, REPLICA_CONNECTION_WAIT_S = 0.25, 0.2


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    """Ready when the primary answers with a current schema. A read replica that is down
    is reported but does not make the pod unready: ingest, on the primary, still works."""
    state = request.app.state
    try:
        missing, stalled = await within(
            PRIMARY_PROBE_TIMEOUT_S,
            _readiness(state.primary_pool, state.settings.stall_timeout),
        )
    except DATABASE_UNAVAILABLE:
        reason = login.gate(state.settings.database_url or "").unavailable_reason()
        return JSONResponse({"status": "unavailable", "reason": reason}, 503)
    except TimeoutError:
        reason = f"database did not answer within {PRIMARY_PROBE_TIMEOUT_S} s"
        return JSONResponse({"status": "unavailable", "reason": reason}, 503)
    if missing:
        return JSONResponse(
            {
                "status": "unavailable",
                "reason": "schema behind; run `metastore migrate`",
                "missing_migrations": missing,
            },
            503,
        )
    # A stalled projection leaves the API ready (ingest and reads still work; the events
    # wait in the log) but not "ok": the projector's own /readyz fails.
    STALL_LOG.observe(stalled, state.settings.stall_timeout)
    body: dict[str, Any] = {"status": "ok"}
    if stalled:
        body = {"status": "degraded", "stalled_projections": stalled}
    if state.settings.read_database_url is None:
        return JSONResponse(body)
    try:
        await within(REPLICA_PROBE_TIMEOUT_S, _select_1(state.reserved_pool))
        replica = "ok"
    except (*DATABASE_UNAVAILABLE, TimeoutError):
        replica = "unreachable"
    return JSONResponse({**body, "read_database": replica})


async def _readiness(
    pool: AsyncConnectionPool[Any], stall_timeout: float
) -> tuple[list[str], list[str]]:
    """The migrations missing, and (when none) the projections stalled."""
    async with pool.connection(timeout=PRIMARY_CONNECTION_WAIT_S) as conn:
        cur = await conn.execute(MISSING_MIGRATIONS, (migration_ids(),))
        missing = [row[0] for row in await cur.fetchall()]
        stalled = [] if missing else await stalled_projections_async(conn, stall_timeout)
        return missing, stalled


async def _select_1(pool: AsyncConnectionPool[Any]) -> None:
    async with pool.connection(timeout=REPLICA_CONNECTION_WAIT_S) as conn:
        await conn.execute("SELECT 1")


routes = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
]
