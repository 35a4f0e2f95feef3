"""/healthz (the process is alive) and /readyz (the database answers, the schema is current;
the body names projections stalled, see metastore.stalls)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from metastore.db import DATABASE_UNAVAILABLE
from metastore.migrations import migration_ids
from metastore.stalls import stalled_projections_async

MISSING_MIGRATIONS = """
SELECT m FROM unnest(%s::text[]) AS m
WHERE NOT EXISTS (SELECT 1 FROM _yoyo_migration WHERE migration_id = m)
"""

# Well inside the probe's own timeout, so a replica that is down cannot fail the probe.
REPLICA_PROBE_TIMEOUT_S = 1.0


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    """Ready when the primary answers with a current schema. A read replica that is down
    is reported but does not make the pod unready: ingest, on the primary, still works."""
    state = request.app.state
    try:
        async with state.primary_pool.connection() as conn:
            cur = await conn.execute(MISSING_MIGRATIONS, (migration_ids(),))
            missing = [row[0] for row in await cur.fetchall()]
            stalled = (
                []
                if missing
                else await stalled_projections_async(conn, state.settings.stall_timeout)
            )
    except DATABASE_UNAVAILABLE:
        return JSONResponse({"status": "unavailable", "reason": "database unreachable"}, 503)
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
    body: dict[str, Any] = {"status": "ok"}
    if stalled:
        body = {"status": "degraded", "stalled_projections": stalled}
    if state.settings.read_database_url is None:
        return JSONResponse(body)
    try:
        async with state.pool.connection(timeout=REPLICA_PROBE_TIMEOUT_S) as conn:
            await conn.execute("SELECT 1")
        replica = "ok"
    except DATABASE_UNAVAILABLE:
        replica = "unreachable"
    return JSONResponse({**body, "read_database": replica})


routes = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
]
