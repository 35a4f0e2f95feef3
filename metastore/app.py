"""The API process's Starlette application: ingest, read API, export feed, health."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount

from metastore import api, export, health, ingest, metrics_endpoint
from metastore.access_log import AccessLog
from metastore.auth import BearerAuth
from metastore.config import Settings
from metastore.db import DATABASE_UNAVAILABLE, RETRY_AFTER_S, create_pool
from metastore.group_commit import GroupCommitter
from metastore.problems import ProblemError, from_error, problem_response

log = logging.getLogger("metastore.api")


async def _problem(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ProblemError)
    return from_error(exc, instance=request.url.path)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return problem_response(exc.status_code, exc.detail, headers=exc.headers)


async def _database_unavailable(request: Request, exc: Exception) -> Response:
    log.warning("database unavailable", extra={"error": type(exc).__name__})
    return problem_response(
        503, "the database is unavailable; retry later", headers={"Retry-After": RETRY_AFTER_S}
    )


def create_app(settings: Settings) -> Starlette:
    pool = create_pool(settings)
    committer = GroupCommitter(pool)
    assert settings.database_url is not None
    notifier = export.LogNotifier(settings.database_url)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await pool.open(wait=False)
        await committer.start()
        await notifier.start()
        try:
            yield
        finally:
            await notifier.stop()
            await committer.stop()
            await pool.close()

    routes: list[BaseRoute] = [
        *health.routes,
        *ingest.routes,
        *export.routes,
        *metrics_endpoint.routes,
    ]
    routes.append(Mount("/api/v1", routes=api.routes))
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        # The access log is outermost, so it sees the 401/403 of the auth middleware.
        middleware=[Middleware(AccessLog), Middleware(BearerAuth, settings=settings)],
        exception_handlers={
            ProblemError: _problem,
            HTTPException: _http_error,
            **{cls: _database_unavailable for cls in DATABASE_UNAVAILABLE},
        },
    )
    app.state.settings = settings
    app.state.pool = pool
    app.state.group_committer = committer
    app.state.log_notifier = notifier
    return app
