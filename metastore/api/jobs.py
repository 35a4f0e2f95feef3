"""GET /jobs and /jobs/{job_id}: jobs with their latest run, parents, children, datasets."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from metastore.api import asof, models, params
from metastore.api.db import connection, not_found, row, rows
from metastore.api.operation import Operation, Resource
from metastore.api.pagination import decode_cursor, page
from metastore.api.responses import json_response
from metastore.api.sqlparts import edge_datasets, job_datasets_at, like_substring

LIST_JOBS = """
SELECT j.id, j.namespace, j.name, j.job_type, j.processing_type, j.integration,
       j.parent_job_id, j.first_seen, j.last_seen,
       r.id, r.state, r.state_time, r.started_at, r.ended_at
FROM readmodel.jobs j
LEFT JOIN readmodel.runs r ON r.id = j.latest_run_id
WHERE true {filters}
ORDER BY j.namespace, j.name
LIMIT %(limit)s
"""
FILTER_NAMESPACE = "AND j.namespace = %(namespace)s"
FILTER_NAME = "AND lower(j.name) LIKE %(pattern)s"
FILTER_STATE = "AND r.state = %(state)s"
AFTER = "AND (j.namespace, j.name) > (%(after_namespace)s, %(after_name)s)"

GET_JOB = f"""
SELECT j.id, j.namespace, j.name, j.job_type, j.processing_type, j.integration,
       j.facets::text, j.first_seen, j.last_seen,
       p.id, p.namespace, p.name,
       r.id, r.state, r.state_time, r.started_at, r.ended_at,
       coalesce((
           SELECT json_agg(json_build_object('id', c.id, 'namespace', c.namespace,
                                             'name', c.name) ORDER BY c.namespace, c.name)
           FROM readmodel.jobs c WHERE c.parent_job_id = j.id
       ), '[]')::text,
       {edge_datasets("job_edges", "job_id", "j.id", "input")},
       {edge_datasets("job_edges", "job_id", "j.id", "output")}
FROM readmodel.jobs j
LEFT JOIN readmodel.jobs p ON p.id = j.parent_job_id
LEFT JOIN readmodel.runs r ON r.id = j.latest_run_id
WHERE j.id = %(id)s
"""

# As of T: the latest run started by then, in the state its events up to T gave it (read
# from the log: a terminal event wins, as in the runs projection), and the datasets of
# that run (and static lineage declared by then). Names, facets, parent and children are
# today's: they say what the job is, not what it did.
GET_JOB_AS_OF = f"""
SELECT j.id, j.namespace, j.name, j.job_type, j.processing_type, j.integration,
       j.facets::text, j.first_seen,
       coalesce((SELECT max(l.event_time) FROM event_log l
                 WHERE l.job_namespace = j.namespace AND l.job_name = j.name
                   AND l.event_time <= %(as_of)s), j.first_seen),
       p.id, p.namespace, p.name,
       r.id, coalesce(s.event_type, 'RUNNING'), coalesce(s.event_time, lr.started_at),
       CASE WHEN r.started_at <= %(as_of)s THEN r.started_at END,
       CASE WHEN s.event_type IN ('COMPLETE', 'FAIL', 'ABORT') THEN s.event_time END,
       coalesce((
           SELECT json_agg(json_build_object('id', c.id, 'namespace', c.namespace,
                                             'name', c.name) ORDER BY c.namespace, c.name)
           FROM readmodel.jobs c WHERE c.parent_job_id = j.id
       ), '[]')::text,
       {job_datasets_at("j.id", "input")},
       {job_datasets_at("j.id", "output")}
FROM readmodel.jobs j
LEFT JOIN readmodel.jobs p ON p.id = j.parent_job_id
LEFT JOIN readmodel.lineage_runs lr ON lr.run_id = {asof.latest_run("j.id")}
LEFT JOIN readmodel.runs r ON r.id = lr.run_id
LEFT JOIN LATERAL (
    SELECT l.event_type, l.event_time FROM event_log l
    WHERE l.run_id = r.id AND l.event_time <= %(as_of)s
      AND l.event_type IN ('START', 'RUNNING', 'COMPLETE', 'FAIL', 'ABORT', 'OTHER')
    ORDER BY l.event_type IN ('COMPLETE', 'FAIL', 'ABORT') DESC, l.event_time DESC, l.seq DESC
    LIMIT 1
) s ON true
WHERE j.id = %(id)s
"""


class ListQuery(msgspec.Struct, frozen=True):
    namespace: params.NamespaceName = None
    q: params.Substring = None
    state: models.RunState | None = None
    limit: params.Limit = params.DEFAULT_LIMIT
    cursor: params.Cursor = None


class JobPath(msgspec.Struct, frozen=True):
    job_id: uuid.UUID


class JobQuery(msgspec.Struct, frozen=True):
    as_of: asof.AsOf = None


LIST = Operation(
    "GET",
    "/jobs",
    "listJobs",
    "List jobs",
    models.JobPage,
    tag="jobs",
    query=ListQuery,
    description="Jobs by namespace and name. `state` filters on the state of the latest run.",
)
GET = Operation(
    "GET",
    "/jobs/{job_id}",
    "getJob",
    "A job",
    models.Job,
    tag="jobs",
    path_params=JobPath,
    query=JobQuery,
    not_found=True,
    description="Names, facets, job type, parent and child jobs, latest run, and the "
    "datasets it reads and writes (over all its runs and its static lineage). With "
    "`as_of`: its latest run started at or before then, in the state it had then, and the "
    "datasets that run read and wrote (plus static lineage declared by then); `last_seen` "
    "as of then; names, facets, parent and children as they are now. A job first seen "
    "after `as_of` answers 404.",
)
resource = Resource()


def _latest_run(r: Any) -> models.LatestRun | None:
    if r[0] is None:
        return None
    return models.LatestRun(id=r[0], state=r[1], state_time=r[2], started_at=r[3], ended_at=r[4])


@resource.add(LIST)
async def list_jobs(request: Request) -> Response:
    query: ListQuery = LIST.parse_query(request)
    filters: list[str] = []
    args: dict[str, Any] = {"limit": query.limit + 1}
    if query.namespace is not None:
        filters.append(FILTER_NAMESPACE)
        args["namespace"] = query.namespace
    if query.q:
        filters.append(FILTER_NAME)
        args["pattern"] = like_substring(query.q)
    if query.state is not None:
        filters.append(FILTER_STATE)
        args["state"] = query.state
    if query.cursor is not None:
        args["after_namespace"], args["after_name"] = decode_cursor(
            query.cursor, "jobs", [str, str]
        )
        filters.append(AFTER)
    async with connection(request) as conn:
        found = await rows(conn, LIST_JOBS.format(filters="\n  ".join(filters)), args)
    items, next_cursor = page(found, query.limit, "jobs", lambda r: (r[1], r[2]))
    return json_response(
        request,
        models.JobPage(
            items=[
                models.JobSummary(
                    id=r[0],
                    namespace=r[1],
                    name=r[2],
                    job_type=r[3],
                    processing_type=r[4],
                    integration=r[5],
                    parent_job_id=r[6],
                    first_seen=r[7],
                    last_seen=r[8],
                    latest_run=_latest_run(r[9:14]),
                )
                for r in items
            ],
            next_cursor=next_cursor,
        ),
    )


_refs = msgspec.json.Decoder(list[models.JobRef])
_datasets = msgspec.json.Decoder(list[models.DatasetRef])


@resource.add(GET)
async def get_job(request: Request) -> Response:
    path: JobPath = GET.parse_path(request)
    query: JobQuery = GET.parse_query(request)
    args = {"id": path.job_id, "as_of": query.as_of}
    async with connection(request) as conn:
        r = await row(conn, GET_JOB if query.as_of is None else GET_JOB_AS_OF, args)
    if r is None:
        raise not_found("job", path.job_id)
    asof.check_seen("job", path.job_id, r[7], query.as_of)
    return json_response(
        request,
        models.Job(
            id=r[0],
            namespace=r[1],
            name=r[2],
            job_type=r[3],
            processing_type=r[4],
            integration=r[5],
            facets=msgspec.Raw(r[6]),
            first_seen=r[7],
            last_seen=r[8],
            parent=models.JobRef(id=r[9], namespace=r[10], name=r[11]) if r[9] else None,
            latest_run=_latest_run(r[12:17]),
            children=_refs.decode(r[17]),
            inputs=_datasets.decode(r[18]),
            outputs=_datasets.decode(r[19]),
        ),
    )
