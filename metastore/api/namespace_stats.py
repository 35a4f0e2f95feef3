"""GET /namespace-stats: a namespace's health at a glance, in one call.

The jobs failing now (their latest run, by start, failed or aborted), the runs that failed
in the last 24 hours (by when they failed), and how many jobs are late by their learned
cadence: from the runs projection's failing_spans (the spans holding the moment), runs (a
range of the namespace's failed runs) and job_cadence, never by paging runs.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Annotated, Literal

import msgspec
from msgspec import Meta
from starlette.requests import Request
from starlette.responses import Response

from metastore.access import access_of
from metastore.api import asof, lateness, limits, params
from metastore.api.db import connection, row
from metastore.api.models import JobRef, Struct, Time
from metastore.api.operation import Operation, Resource
from metastore.api.responses import json_response
from metastore.api.visibility import job_visible, run_visible
from metastore.problems import ProblemError

WINDOW = dt.timedelta(hours=24)
CAP = limits.EMBEDDED_REFS
Count = Annotated[int, Meta(ge=0)]


class FailedRun(Struct):
    """A run that failed or was aborted."""

    id: Annotated[uuid.UUID, Meta(description="The run's id (its runId).")]
    job: Annotated[JobRef, Meta(description="Its job.")]
    state: Annotated[Literal["FAIL", "ABORT"], Meta(description="How it ended.")]
    failed_at: Annotated[Time, Meta(description="The eventTime of its FAIL or ABORT.")]
    error_message: Annotated[str | None, Meta(description="Its errorMessage facet's message.")]


class NamespaceRunStats(Struct):
    namespace: Annotated[str, Meta(description="The namespace (of its jobs).")]
    window_start: Annotated[Time, Meta(description="24 hours before `window_end`.")]
    window_end: Annotated[Time, Meta(description="The moment answered (`as_of`, else now).")]
    job_count: Annotated[Count, Meta(description="Its jobs (first seen by then).")]
    failing_jobs: Annotated[
        list[FailedRun],
        Meta(
            description="The jobs failing then: each one's latest run (by start) failed or "
            f"aborted; that run, latest failure first (the first {CAP})."
        ),
    ]
    failing_job_count: Annotated[Count, Meta(description="How many jobs are failing.")]
    failures: Annotated[
        list[FailedRun],
        Meta(
            description="The runs that failed or aborted in the window, by when they did, "
            f"latest first (the first {CAP})."
        ),
    ]
    failure_count: Annotated[Count, Meta(description="How many runs failed in the window.")]
    late_job_count: Annotated[
        Count,
        Meta(description="Jobs whose next run is late or missed now (their `lateness`)."),
    ]
    missed_job_count: Annotated[Count, Meta(description="Of those, the ones missed.")]


class StatsQuery(msgspec.Struct, frozen=True):
    namespace: Annotated[
        str,
        Meta(pattern=params.NO_NUL, max_length=2000, description="The namespace (exact)."),
    ]
    as_of: asof.AsOf = None


STATS = Operation(
    "GET",
    "/namespace-stats",
    "getNamespaceStats",
    "A namespace's run statistics",
    NamespaceRunStats,
    tag="namespaces",
    query=StatsQuery,
    not_found=True,
    description="The jobs of `namespace` failing now (their latest run failed or aborted), "
    "the runs that failed in the 24 hours up to `as_of` (else now) by when they failed, and "
    "how many jobs are late by the cadence learned from their runs (judged now). As of T: "
    "the runs started by then, in the state they had then. An unknown namespace answers 404.",
)

_RUN = """json_build_object('id', {r}.id, 'job', json_build_object('id', {r}.job_id,
    'namespace', {r}.job_namespace, 'name', {r}.job_name), 'state', {r}.state,
    'failed_at', {r}.state_time, 'error_message', {r}.error_message)"""
GET_STATS = f"""
WITH failing AS (
    -- (the namespace is readable, so are its jobs' spans; a span starts at the failure)
    SELECT f.run_id, lower(f.span) AS failed_at FROM readmodel.failing_spans f
    WHERE f.span @> %(state_at)s::timestamptz AND f.job_namespace = %(namespace)s
),
failures AS (
    SELECT r.id, r.job_id, r.job_namespace, r.job_name, r.state, r.state_time,
           r.error_message
    FROM readmodel.runs r
    WHERE r.job_namespace = %(namespace)s AND r.state IN ('FAIL', 'ABORT')
      AND r.state_time > %(since)s AND r.state_time <= %(until)s {{runs_visible}}
)
SELECT (SELECT count(*) FROM readmodel.jobs j
        WHERE j.namespace = %(namespace)s {{seen_by}} {{jobs_visible}}),
       (SELECT coalesce(json_agg({_RUN.format(r="r")} ORDER BY r.state_time DESC, r.id), '[]')
        FROM (SELECT * FROM failing ORDER BY failed_at DESC, run_id LIMIT {CAP}) f
        JOIN readmodel.runs r ON r.id = f.run_id)::text,
       (SELECT count(*) FROM failing),
       (SELECT coalesce(json_agg({_RUN.format(r="f")} ORDER BY f.state_time DESC, f.id), '[]')
        FROM (SELECT * FROM failures ORDER BY state_time DESC, id LIMIT {CAP}) f)::text,
       (SELECT count(*) FROM failures),
       late.late, late.missed,
       EXISTS (SELECT 1 FROM readmodel.namespaces WHERE name = %(namespace)s)
FROM (SELECT count(*) AS late, count(*) FILTER (WHERE k.missed) AS missed
      FROM {lateness.late_jobs("%(namespace)s")} k) late
"""
# As of T, the jobs first seen by then (now: all, counted from the name index alone).
SEEN_BY = "AND j.first_seen <= %(state_at)s"
resource = Resource()
_runs = msgspec.json.Decoder(list[FailedRun])


@resource.add(STATS)
async def get_namespace_stats(request: Request) -> Response:
    query: StatsQuery = STATS.parse_query(request)
    access = await access_of(request)
    if not access.reads(query.namespace):  # (hidden: as absent as an unknown one)
        raise ProblemError(404, f"no namespace {query.namespace!r}")
    until = query.as_of or dt.datetime.now(dt.UTC)
    args = {
        "namespace": query.namespace,
        "since": until - WINDOW,
        "until": until,
        "state_at": query.as_of or asof.NOW,
        **access.sql_params(),
    }
    sql = GET_STATS.format(
        seen_by=SEEN_BY if query.as_of is not None else "",
        jobs_visible=job_visible(access),
        runs_visible=run_visible(access),
    )
    async with connection(request) as conn:
        r = await row(conn, sql, args)
    if not r[7]:
        raise ProblemError(404, f"no namespace {query.namespace!r}")
    return json_response(
        request,
        NamespaceRunStats(
            namespace=query.namespace,
            window_start=until - WINDOW,
            window_end=until,
            job_count=r[0],
            failing_jobs=_runs.decode(r[1]),
            failing_job_count=r[2],
            failures=_runs.decode(r[3]),
            failure_count=r[4],
            late_job_count=r[5],
            missed_job_count=r[6],
        ),
    )
