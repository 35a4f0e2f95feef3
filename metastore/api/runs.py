"""GET /runs, /runs/{run_id} and /runs/{run_id}/events."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from metastore.api import models, params
from metastore.api.db import connection, not_found, row, rows
from metastore.api.operation import Operation, Resource
from metastore.api.pagination import decode_cursor, page
from metastore.api.responses import json_response
from metastore.api.sqlparts import edge_datasets
from metastore.problems import ProblemError

RUN_COLUMNS = """
r.id, r.job_id, r.job_namespace, r.job_name, r.state, r.state_time, r.started_at,
r.ended_at, extract(epoch FROM r.ended_at - r.started_at)::float8, r.nominal_start,
r.nominal_end, r.error_message, r.parent_run_id, r.root_run_id, r.first_seen, r.last_seen
"""

# Newest first; (first_seen DESC, id) is the order of the runs_* indexes.
LIST_RUNS = f"""
SELECT {RUN_COLUMNS}
FROM readmodel.runs r
WHERE true {{filters}}
ORDER BY r.first_seen DESC, r.id
LIMIT %(limit)s
"""
FILTER_JOB = "AND r.job_id = %(job_id)s"
FILTER_STATE = "AND r.state = %(state)s"
FILTER_SINCE = "AND r.first_seen >= %(since)s"
FILTER_UNTIL = "AND r.first_seen < %(until)s"
AFTER = (
    "AND (r.first_seen < %(after_time)s OR (r.first_seen = %(after_time)s AND r.id > %(after_id)s))"
)

RUN_REF = """
coalesce((SELECT json_agg(json_build_object(
    'id', c.id, 'job_namespace', c.job_namespace, 'job_name', c.job_name,
    'job_id', c.job_id, 'state', c.state) ORDER BY c.first_seen, c.id)
  FROM (SELECT * FROM readmodel.runs c WHERE c.parent_run_id = r.id
        ORDER BY c.first_seen, c.id LIMIT 1000) c), '[]')::text
"""

GET_RUN = f"""
SELECT {RUN_COLUMNS}, r.facets::text,
       r.parent_job_namespace, r.parent_job_name, p.job_id, p.state,
       rt.job_namespace, rt.job_name, rt.job_id, rt.state,
       {RUN_REF},
       {edge_datasets("run_edges", "run_id", "r.id", "input")},
       {edge_datasets("run_edges", "run_id", "r.id", "output")}
FROM readmodel.runs r
LEFT JOIN readmodel.runs p ON p.id = r.parent_run_id
LEFT JOIN readmodel.runs rt ON rt.id = r.root_run_id
WHERE r.id = %(id)s
"""

# The run's events in log order, below the horizon of finished transactions (see
# metastore/eventlog.py), so a page never passes over an event that commits later.
RUN_EVENTS = """
SELECT tx::text::bigint, seq, event::text
FROM event_log
WHERE run_id = %(run_id)s
  AND (tx, seq) > (%(tx)s::text::xid8, %(seq)s)
  AND tx < pg_snapshot_xmin(pg_current_snapshot())
ORDER BY tx, seq
LIMIT %(limit)s
"""
RUN_KNOWN = """
SELECT EXISTS (SELECT 1 FROM readmodel.runs WHERE id = %(run_id)s)
    OR EXISTS (SELECT 1 FROM event_log WHERE run_id = %(run_id)s)
"""


class ListQuery(msgspec.Struct, frozen=True):
    job_id: uuid.UUID | None = None
    state: models.RunState | None = None
    since: params.Timestamp | None = None
    until: params.Timestamp | None = None
    limit: params.Limit = params.DEFAULT_LIMIT
    cursor: params.Cursor = None


class PageQuery(msgspec.Struct, frozen=True):
    limit: params.Limit = params.DEFAULT_LIMIT
    cursor: params.Cursor = None


class RunPath(msgspec.Struct, frozen=True):
    run_id: uuid.UUID


LIST = Operation(
    "GET",
    "/runs",
    "listRuns",
    "List runs",
    models.RunPage,
    tag="runs",
    query=ListQuery,
    description="Runs, newest first (by the earliest eventTime of their events); `since` "
    "and `until` bound that time (since <= t < until).",
)
GET = Operation(
    "GET",
    "/runs/{run_id}",
    "getRun",
    "A run",
    models.Run,
    tag="runs",
    path_params=RunPath,
    not_found=True,
    description="A run by its OpenLineage runId: state, times, duration, nominal time, "
    "error message, facets, parent, root and child runs (up to 1,000), inputs and "
    "outputs. `root` is null for a run without a parent.",
)
EVENTS = Operation(
    "GET",
    "/runs/{run_id}/events",
    "listRunEvents",
    "The raw events of a run",
    models.RunEventPage,
    tag="runs",
    path_params=RunPath,
    query=PageQuery,
    not_found=True,
    description="The run's OpenLineage events exactly as stored, in log order.",
)
resource = Resource()


def _summary(r: Any) -> dict[str, Any]:
    return {
        "id": r[0],
        "job": models.JobRef(id=r[1], namespace=r[2], name=r[3]),
        "state": r[4],
        "state_time": r[5],
        "started_at": r[6],
        "ended_at": r[7],
        "duration_seconds": r[8],
        "nominal_start": r[9],
        "nominal_end": r[10],
        "error_message": r[11],
        "first_seen": r[14],
        "last_seen": r[15],
    }


@resource.add(LIST)
async def list_runs(request: Request) -> Response:
    query: ListQuery = LIST.parse_query(request)
    filters: list[str] = []
    args: dict[str, Any] = {"limit": query.limit + 1}
    for value, clause, name in (
        (query.job_id, FILTER_JOB, "job_id"),
        (query.state, FILTER_STATE, "state"),
        (query.since, FILTER_SINCE, "since"),
        (query.until, FILTER_UNTIL, "until"),
    ):
        if value is not None:
            filters.append(clause)
            args[name] = value
    if query.cursor is not None:
        args["after_time"], args["after_id"] = decode_cursor(
            query.cursor, "runs", [dt.datetime, uuid.UUID]
        )
        filters.append(AFTER)
    async with connection(request) as conn:
        found = await rows(conn, LIST_RUNS.format(filters="\n  ".join(filters)), args)
    items, next_cursor = page(found, query.limit, "runs", lambda r: (r[14], r[0]))
    return json_response(
        request,
        models.RunPage(
            items=[
                models.RunSummary(**_summary(r), parent_run_id=r[12], root_run_id=r[13])
                for r in items
            ],
            next_cursor=next_cursor,
        ),
    )


_run_refs = msgspec.json.Decoder(list[models.RunRef])
_datasets = msgspec.json.Decoder(list[models.DatasetRef])


@resource.add(GET)
async def get_run(request: Request) -> Response:
    path: RunPath = GET.parse_path(request)
    async with connection(request) as conn:
        r = await row(conn, GET_RUN, {"id": path.run_id})
    if r is None:
        raise not_found("run", path.run_id)
    parent = root = None
    if r[12] is not None:
        parent = models.RunRef(
            id=r[12], job_namespace=r[17], job_name=r[18], job_id=r[19], state=r[20]
        )
    if r[13] is not None and r[13] != r[0]:
        root = models.RunRef(
            id=r[13], job_namespace=r[21], job_name=r[22], job_id=r[23], state=r[24]
        )
    return json_response(
        request,
        models.Run(
            **_summary(r),
            facets=msgspec.Raw(r[16]),
            parent=parent,
            root=root,
            children=_run_refs.decode(r[25]),
            inputs=_datasets.decode(r[26]),
            outputs=_datasets.decode(r[27]),
        ),
    )


@resource.add(EVENTS)
async def list_run_events(request: Request) -> Response:
    path: RunPath = EVENTS.parse_path(request)
    query: PageQuery = EVENTS.parse_query(request)
    tx, seq = 0, 0
    if query.cursor is not None:
        tx, seq = decode_cursor(query.cursor, "run_events", [int, int])
        if tx < 0 or seq < 0:
            raise ProblemError(400, "query parameter `cursor` is invalid: out of range")
    args = {"run_id": path.run_id, "tx": tx, "seq": seq, "limit": query.limit + 1}
    async with connection(request) as conn:
        found = await rows(conn, RUN_EVENTS, args)
        if not found and query.cursor is None:
            known = await row(conn, RUN_KNOWN, {"run_id": path.run_id})
            if not known[0]:
                raise not_found("run", path.run_id)
    items, next_cursor = page(found, query.limit, "run_events", lambda r: (r[0], r[1]))
    return json_response(
        request,
        models.RunEventPage(items=[msgspec.Raw(r[2]) for r in items], next_cursor=next_cursor),
    )
