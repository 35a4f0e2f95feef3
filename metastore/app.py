"""The API process's Starlette application: ingest, read API, export feed, health."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import psycopg
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Router
from starlette.types import ASGIApp, Receive, Scope, Send

from metastore import api, export, health, ingest, metrics_endpoint
from metastore.access import NamespaceCandidates
from metastore.access_log import AccessLog
from metastore.api.bulkhead import Bulkhead, shares
from metastore.api.readmodels import ReadModelVersions
from metastore.auth import BearerAuth
from metastore.authz import authorizer_for
from metastore.config import Settings
from metastore.db import (
    DATABASE_UNAVAILABLE,
    RESERVED_CONNECTIONS,
    create_pool,
    database_unavailable,
    read_models_missing,
    read_session,
    statement_timed_out,
    tune_ingest_session,
)
from metastore.group_commit import WORKERS, GroupCommitter
from metastore.inflight import InflightBudget
from metastore.metrics import READ_TIMEOUTS
from metastore.problems import ProblemError, from_error, problem_response


async def _problem(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ProblemError)
    return from_error(exc, instance=request.url.path)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    detail = exc.detail
    if request.method == "POST" and exc.status_code in (404, 405):
        # Most likely an emitter pointed at the wrong path: say where events go.
        what = "no such path" if exc.status_code == 404 else "POST is not allowed here"
        detail = f"{what} ({request.url.path}): {ingest.WAY_IN}"
    return problem_response(exc.status_code, detail, headers=exc.headers)


async def _database_unavailable(request: Request, exc: Exception) -> Response:
    return database_unavailable(exc)


async def _query_canceled(request: Request, exc: Exception) -> Response:
    """A read past METASTORE_READ_TIMEOUT: a 503 of its own type, naming the limit."""
    if not statement_timed_out(exc):
        return database_unavailable(exc)
    route = request.scope.get("route")
    READ_TIMEOUTS.labels(getattr(route, "path", "other")).inc()
    limit = request.app.state.settings.read_timeout
    return problem_response(
        503,
        f"the read took longer than its time limit of {limit:g} s (METASTORE_READ_TIMEOUT) "
        "and was stopped; ask for less (a smaller depth or limit, no as_of) or retry later",
        instance=request.url.path,
        kind="read-timeout",
    )


async def _read_models_missing(request: Request, exc: Exception) -> Response:
    return read_models_missing(exc)


class IngestFirst:
    """Sends requests for the ingest endpoints to the ingest app, all others to `app`."""

    def __init__(self, ingest_app: ASGIApp, app: ASGIApp) -> None:
        self.ingest_app = ingest_app
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and ingest.ingest_endpoint(scope["method"], scope["path"]):
            await self.ingest_app(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def _no_slash_redirects(router: Router) -> None:
    """A path with a stray (or missing) trailing slash is a 404, never a redirect.

    Starlette builds the redirect's Location from the client's Host header, so any client
    could make the API send its callers elsewhere.
    """
    router.redirect_slashes = False
    for route in router.routes:
        if isinstance(route, Mount) and isinstance(route.app, Router):
            _no_slash_redirects(route.app)


def create_app(settings: Settings) -> ASGIApp:
    # /api/v1 and the export feed read through `pool`: from the streaming replica when
    # METASTORE_READ_DATABASE_URL names one; ingest and the log notifier keep the primary.
    # Each statement of a read runs METASTORE_READ_TIMEOUT at most.
    reads = read_session(settings.read_timeout, settings.cadence_overrides)
    pool = create_pool(settings, url=settings.read_database_url, configure=reads)
    # /readyz, /api/v1/status and the /metrics scrape have connections of their own, so
    # reads holding every connection of `pool` cannot starve them.
    reserved_pool = create_pool(
        settings,
        max_size=RESERVED_CONNECTIONS,
        url=settings.read_database_url,
        name="metastore-reserved",
        configure=reads,
    )
    # /readyz and the scrape's projections and lease ask the primary: on the reserved
    # connections when that is the primary, else on two of their own (the committer's are
    # for appends, and a probe must not queue behind them, nor behind a scrape).
    primary_pool = reserved_pool
    if settings.read_database_url is not None:
        primary_pool = create_pool(settings, max_size=2, name="metastore-primary", configure=reads)
    # The committer's own connections, in autocommit: each group is one statement, so one
    # round trip commits it (metastore/eventlog.py), and readers never wait behind ingest
    # for a connection. One per worker, and one for keeping the partitions.
    ingest_pool = create_pool(
        settings,
        min_size=WORKERS,
        max_size=WORKERS + 1,
        autocommit=True,
        name="metastore-ingest",
        configure=tune_ingest_session,
    )
    committer = GroupCommitter(ingest_pool)
    assert settings.database_url is not None
    notifier = export.LogNotifier(
        settings.database_url, reads_replica=settings.read_database_url is not None
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await pool.open(wait=False)
        await reserved_pool.open(wait=False)
        if primary_pool is not reserved_pool:
            await primary_pool.open(wait=False)
        await ingest_pool.open(wait=False)
        await committer.start()
        await notifier.start()
        try:
            yield
        finally:
            await notifier.stop()
            await committer.stop()
            await ingest_pool.close()
            if primary_pool is not reserved_pool:
                await primary_pool.close()
            await reserved_pool.close()
            await pool.close()

    routes: list[BaseRoute] = [
        *health.routes,
        *export.routes,
        *metrics_endpoint.routes,
    ]
    routes.append(Mount("/api/v1", routes=api.routes))
    # Each read route's series is there at 0 from the start: Prometheus's increase() counts
    # from a series' first sample, so an alert would miss the first read timeout.
    for route in (*api.routes, *export.routes):
        READ_TIMEOUTS.labels(getattr(route, "path", "other"))
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={
            ProblemError: _problem,
            HTTPException: _http_error,
            **{cls: _database_unavailable for cls in DATABASE_UNAVAILABLE},
            psycopg.errors.QueryCanceled: _query_canceled,
            psycopg.errors.UndefinedTable: _read_models_missing,
        },
    )
    _no_slash_redirects(app.router)
    budget = InflightBudget(settings.max_inflight_bytes)
    app.state.settings = settings
    app.state.inflight_budget = budget
    app.state.pool = pool
    # expensive reads take a bounded share of `pool`'s connections (api/bulkhead.py)
    app.state.bulkhead = Bulkhead(*shares(settings.pool_size), wait_s=settings.read_timeout)
    app.state.read_model_versions = ReadModelVersions()
    authorizer = authorizer_for(settings)
    app.state.authorizer = authorizer
    app.state.namespace_candidates = NamespaceCandidates()
    app.state.reserved_pool = reserved_pool
    app.state.primary_pool = primary_pool
    app.state.ingest_pool = ingest_pool
    app.state.group_committer = committer
    app.state.log_notifier = notifier
    # The access log is outermost, so it sees the 401/403 of the auth middleware; ingest,
    # the hot path, is answered before Starlette's router (metastore/ingest.py says why).
    return AccessLog(
        BearerAuth(
            IngestFirst(ingest.IngestApp(committer, settings, budget, authorizer), app),
            settings=settings,
        )
    )
