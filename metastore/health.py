"""/healthz (the process is alive) and /readyz (the database answers, the schema is current)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from metastore.db import DATABASE_UNAVAILABLE
from metastore.migrations import migration_ids

MISSING_MIGRATIONS = """
SELECT m FROM unnest(%s::text[]) AS m
WHERE NOT EXISTS (SELECT 1 FROM _yoyo_migration WHERE migration_id = m)
"""


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    pool = request.app.state.pool
    try:
        async with pool.connection() as conn:
            cur = await conn.execute(MISSING_MIGRATIONS, (migration_ids(),))
            missing = [row[0] for row in await cur.fetchall()]
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
    return JSONResponse({"status": "ok"})


routes = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
]
