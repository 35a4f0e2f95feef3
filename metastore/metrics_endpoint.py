"""`GET /metrics` in the Prometheus text format; the gauges of the pool, the log, the
projections and the projector lease are read at scrape time, so they are as fresh as the
scrape.

`metrics_response()` serves the projector's port as well: one registry per process.
"""

from __future__ import annotations

import logging
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from psycopg_pool import AsyncConnectionPool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from metastore.db import DATABASE_UNAVAILABLE, within
from metastore.inflight import InflightBudget
from metastore.metrics import (
    INGEST_INFLIGHT_BYTES,
    INGEST_INFLIGHT_LIMIT_BYTES,
    LOG_BYTES,
    LOG_EVENTS,
    POOL_IN_USE,
    POOL_MAX,
    POOL_SIZE,
    POOL_WAITING,
)
from metastore.store_health import StoreHealth, publish, read_store_health_async

log = logging.getLogger("metastore.metrics")

# A scrape must not queue behind a busy pool for long: the gauges keep their last value.
SCRAPE_POOL_TIMEOUT_S = 1.0
# ...nor wait for a hung server longer than this (the statement's own timeout is 2 s).
SCRAPE_READ_TIMEOUT_S = 2.5

# The highest seq is the number of events appended (seq gaps come only from rolled-back
# appends); both figures come from indexes and the catalog, never from a scan.
LOG_SIZE = """
SELECT (SELECT seq FROM event_log ORDER BY seq DESC LIMIT 1),
       (SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits
        WHERE inhparent = 'event_log'::regclass)
"""


def metrics_response() -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


def observe_pool(pool: AsyncConnectionPool[Any], label: str) -> None:
    stats = pool.get_stats()
    size = stats.get("pool_size", 0)
    POOL_SIZE.labels(label).set(size)
    POOL_IN_USE.labels(label).set(size - stats.get("pool_available", 0))
    POOL_WAITING.labels(label).set(stats.get("requests_waiting", 0))
    POOL_MAX.labels(label).set(pool.max_size)


async def observe_log(pool: AsyncConnectionPool[Any]) -> None:
    try:
        async with pool.connection(timeout=SCRAPE_POOL_TIMEOUT_S) as conn:
            cur = await conn.execute(LOG_SIZE)
            row = await cur.fetchone()
    except DATABASE_UNAVAILABLE as exc:
        log.warning("log size not measured", extra={"error": type(exc).__name__})
        return
    assert row is not None
    LOG_EVENTS.set(row[0] or 0)
    LOG_BYTES.set(row[1] or 0)


async def observe_projections(pool: AsyncConnectionPool[Any], stall_timeout: float) -> None:
    """The projections' gauges and the lease's, from the primary (a replica's pg_locks
    shows none of the primary's locks); on failure they keep their last values."""
    try:
        health = await within(SCRAPE_READ_TIMEOUT_S, _read_store_health(pool))
    except (*DATABASE_UNAVAILABLE, TimeoutError) as exc:
        log.warning("projections not measured", extra={"error": type(exc).__name__})
        return
    publish(health, stall_timeout)


async def _read_store_health(pool: AsyncConnectionPool[Any]) -> StoreHealth:
    async with pool.connection(timeout=SCRAPE_POOL_TIMEOUT_S) as conn:
        return await read_store_health_async(conn)


async def metrics(request: Request) -> Response:
    reserved: AsyncConnectionPool[Any] = request.app.state.reserved_pool
    await observe_log(reserved)
    await observe_projections(
        request.app.state.primary_pool, request.app.state.settings.stall_timeout
    )
    observe_pool(request.app.state.pool, "api")
    observe_pool(reserved, "reserved")  # after the log query, which itself used a connection
    observe_pool(request.app.state.ingest_pool, "ingest")
    budget: InflightBudget = request.app.state.inflight_budget
    INGEST_INFLIGHT_BYTES.set(budget.held)
    INGEST_INFLIGHT_LIMIT_BYTES.set(budget.limit)
    return metrics_response()


routes = [Route("/metrics", metrics, methods=["GET"])]
