"""GET /jobs/{job_id}/stats: a job's run statistics over a window of days, in one call.

Read from the runs read model (readmodel.runs by the job's start index), never by paging
runs. As of T, a run counts when it started by then, in the state it had then: a run whose
terminal event came after T was running (a later terminal event replacing an earlier one,
which the runs projection keeps only the latest of, is not told apart).
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Annotated

import msgspec
from msgspec import Meta
from starlette.requests import Request
from starlette.responses import Response

from metastore.access import access_of
from metastore.api import asof, lateness, models
from metastore.api.db import connection, not_found, row
from metastore.api.models import JobRef, Lateness, LatenessField, Struct, Time
from metastore.api.operation import Operation, Resource
from metastore.api.responses import json_response
from metastore.api.visibility import job_visible

MAX_DAYS = 366
Count = Annotated[int, Meta(ge=0)]
Seconds = Annotated[
    float | None, Meta(description="Seconds from start to end of its completed runs (null: none).")
]


class StateCounts(Struct):
    """Runs by their state at the moment answered."""

    complete: Annotated[Count, Meta(description="Runs that completed.")]
    fail: Annotated[Count, Meta(description="Runs that failed.")]
    abort: Annotated[Count, Meta(description="Runs that were aborted.")]
    running: Annotated[
        Count, Meta(description="Runs started and not ended (START, RUNNING, or no type).")
    ]


class DayStats(Struct):
    """One UTC day of the window: what a sparkline draws."""

    day: Annotated[dt.date, Meta(description="The UTC day its runs started on.")]
    runs: Annotated[Count, Meta(description="Runs started that day.")]
    states: Annotated[StateCounts, Meta(description="Those runs by state.")]
    duration_p50_seconds: Seconds


class JobRunStats(Struct):
    job: Annotated[JobRef, Meta(description="The job.")]
    window_start: Annotated[Time, Meta(description="The start of the window's first UTC day.")]
    window_end: Annotated[Time, Meta(description="The moment answered (`as_of`, else now).")]
    runs: Annotated[Count, Meta(description="Runs started in the window.")]
    states: Annotated[StateCounts, Meta(description="Those runs by their state then.")]
    duration_p50_seconds: Seconds
    duration_p95_seconds: Seconds
    days: Annotated[
        list[DayStats], Meta(description="Each UTC day of the window, oldest first, runs or not.")
    ]
    lateness: LatenessField


class StatsPath(msgspec.Struct, frozen=True):
    job_id: uuid.UUID


class StatsQuery(msgspec.Struct, frozen=True):
    days: Annotated[
        int,
        Meta(
            ge=1,
            le=MAX_DAYS,
            description=f"The window: this many UTC days up to the moment answered, its own "
            f"day included (at most {MAX_DAYS}).",
        ),
    ] = 30
    as_of: asof.AsOf = None


STATS = Operation(
    "GET",
    "/jobs/{job_id}/stats",
    "getJobStats",
    "A job's run statistics",
    JobRunStats,
    tag="jobs",
    path_params=StatsPath,
    query=StatsQuery,
    not_found=True,
    description="Its runs started in the window (`days` UTC days up to `as_of`, else now) "
    "counted by state, the p50 and p95 duration of those that completed, the same per day "
    "for a sparkline, and its lateness (learned from its runs). As of T: the runs started "
    "by then, in the state they had then. A job first seen after `as_of` answers 404.",
)

# A run's state at %(state_at)s: its terminal state if that came by then, else running.
_STATE = """CASE WHEN r.state_rank = 2 AND r.state_time > %(state_at)s THEN 'RUNNING'
                 ELSE r.state END"""
_COUNTS = """json_build_object(
    'complete', count(*) FILTER (WHERE w.state = 'COMPLETE'),
    'fail', count(*) FILTER (WHERE w.state = 'FAIL'),
    'abort', count(*) FILTER (WHERE w.state = 'ABORT'),
    'running', count(*) FILTER (WHERE w.state NOT IN ('COMPLETE', 'FAIL', 'ABORT')))"""
_EMPTY = "json_build_object('complete', 0, 'fail', 0, 'abort', 0, 'running', 0)"
_P50 = "percentile_cont(0.5) WITHIN GROUP (ORDER BY w.duration)"
GET_STATS = f"""
WITH span AS (
    SELECT date_trunc('day', %(until)s::timestamptz)
               - make_interval(days => %(days)s - 1) AS since,
           %(until)s::timestamptz AS until
),
windowed AS (
    SELECT date_trunc('day', coalesce(r.started_at, r.first_seen)) AS day, {_STATE} AS state,
           CASE WHEN r.state = 'COMPLETE' AND r.state_time <= %(state_at)s
                     AND r.started_at IS NOT NULL
                THEN extract(epoch FROM r.ended_at - r.started_at)::float8 END AS duration
    FROM readmodel.runs r, span
    WHERE r.job_id = %(id)s
      AND coalesce(r.started_at, r.first_seen) >= span.since
      AND coalesce(r.started_at, r.first_seen) <= span.until
),
per_day AS (
    SELECT w.day, count(*) AS runs, {_COUNTS} AS states, {_P50} AS p50
    FROM windowed w GROUP BY w.day
)
SELECT j.id, j.namespace, j.name, j.first_seen, span.since, span.until,
       (SELECT count(*) FROM windowed),
       (SELECT {_COUNTS} FROM windowed w)::text,
       (SELECT {_P50} FROM windowed w),
       (SELECT percentile_cont(0.95) WITHIN GROUP (ORDER BY w.duration) FROM windowed w),
       (SELECT json_agg(json_build_object(
                   'day', to_char(d.day, 'YYYY-MM-DD'), 'runs', coalesce(p.runs, 0),
                   'states', coalesce(p.states, {_EMPTY}), 'duration_p50_seconds', p.p50)
               ORDER BY d.day)
        FROM generate_series(span.since, date_trunc('day', span.until), interval '1 day') d(day)
        LEFT JOIN per_day p ON p.day = d.day)::text,
       {lateness.of_job("j.id")}
FROM readmodel.jobs j, span
WHERE j.id = %(id)s {{visible}}
"""
resource = Resource()
_counts = msgspec.json.Decoder(StateCounts)
_days = msgspec.json.Decoder(list[DayStats])


@resource.add(STATS)
async def get_job_stats(request: Request) -> Response:
    path: StatsPath = STATS.parse_path(request)
    query: StatsQuery = STATS.parse_query(request)
    access = await access_of(request)
    args = {
        "id": path.job_id,
        "days": query.days,
        "until": query.as_of or dt.datetime.now(dt.UTC),
        "state_at": query.as_of or asof.NOW,
        **access.sql_params(),
    }
    async with connection(request) as conn:
        r = await row(conn, GET_STATS.format(visible=job_visible(access)), args)
    if r is None:
        raise not_found("job", path.job_id)
    asof.check_seen("job", path.job_id, r[3], query.as_of)
    found: Lateness | None = lateness.decode_lateness(r[11])
    return json_response(
        request,
        JobRunStats(
            job=models.JobRef(id=r[0], namespace=r[1], name=r[2]),
            window_start=r[4],
            window_end=r[5],
            runs=r[6],
            states=_counts.decode(r[7]),
            duration_p50_seconds=r[8],
            duration_p95_seconds=r[9],
            days=_days.decode(r[10]),
            lateness=found,
        ),
    )
