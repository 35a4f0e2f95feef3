"""GET /jobs and /jobs/{job_id}: jobs with their latest run, parents, children, datasets.

Restricted (api/visibility.py): the jobs of readable namespaces; another's job is a 404
as an unknown id is, its sensitive facets left out unless its namespace shows them.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta
from starlette.requests import Request
from starlette.responses import Response

from metastore.access import access_of
from metastore.api import asof, facets, lateness, models, params
from metastore.api.db import connection, not_found, row, rows
from metastore.api.operation import Operation, Resource
from metastore.api.pagination import bound_kind, count_capped, decode_cursor, page, page_with_total
from metastore.api.responses import json_response
from metastore.api.sqlparts import (
    DATASETS_PAGE,
    DATASETS_PAGE_VISIBLE,
    JOB_EDGES_OF,
    description,
    duration,
    job_datasets_at,
    job_datasets_now,
    jobs_with_runs,
    latest_run,
    like_substring,
    owners,
    started,
    tags,
)
from metastore.api.visibility import both, for_access, job_visible, mark

# The latest run's columns (id, state, state_time, started_at, ended_at, duration) of
# readmodel.runs row `r`.
LATEST_RUN = f"r.id, r.state, r.state_time, {started('r')}, r.ended_at, {duration('r')}"

# Sort keys: name (namespace, name); latest_run (its start, newest first; jobs never run
# last, at the year 1); failed_first (a latest run that failed or aborted first, then as
# latest_run).
NEVER = "'0001-01-01T00:00:00Z'::timestamptz"
LIST_JOBS = f"""
SELECT j.id, j.namespace, j.name, j.job_type, j.processing_type, j.integration,
       {description("j.facets")}, p.id, p.namespace, p.name, j.first_seen, j.last_seen,
       {LATEST_RUN},
       coalesce({started("r")}, {NEVER}) AS sort_time,
       CASE WHEN r.state IN ('FAIL', 'ABORT') THEN 0 ELSE 1 END AS sort_failed,
       {latest_run("pr")}::text, {lateness.of_job("j.id")}
FROM readmodel.jobs j
LEFT JOIN readmodel.runs r ON r.id = j.latest_run_id
LEFT JOIN readmodel.jobs p ON p.id = j.parent_job_id{mark("job", "p")}
LEFT JOIN readmodel.runs pr ON pr.id = p.latest_run_id
WHERE true {{filters}}
ORDER BY {{order}}
LIMIT %(limit)s
"""
# (restricted: a parent of a hidden namespace is left out)
LISTS_JOBS = both(LIST_JOBS)
COUNT_JOBS = count_capped("""SELECT 1 FROM readmodel.jobs j
LEFT JOIN readmodel.runs r ON r.id = j.latest_run_id
WHERE true {filters}""")
FILTER_NAMESPACE = "AND j.namespace = %(namespace)s"
FILTER_NAME = "AND lower(j.name) LIKE %(pattern)s"
FILTER_STATE = "AND r.state = ANY(%(state)s)"
SORTS: dict[str, tuple[str, str, list[type]]] = {
    "name": (
        "j.namespace, j.name",
        "AND (j.namespace, j.name) > (%(a0)s, %(a1)s)",
        [str, str],
    ),
    "latest_run": (
        "sort_time DESC, j.namespace, j.name",
        f"""AND (coalesce({started("r")}, {NEVER}) < %(a0)s
             OR (coalesce({started("r")}, {NEVER}) = %(a0)s
                 AND (j.namespace, j.name) > (%(a1)s, %(a2)s)))""",
        [dt.datetime, str, str],
    ),
    "failed_first": (
        "sort_failed, sort_time DESC, j.namespace, j.name",
        f"""AND (CASE WHEN r.state IN ('FAIL', 'ABORT') THEN 0 ELSE 1 END > %(a0)s
             OR (CASE WHEN r.state IN ('FAIL', 'ABORT') THEN 0 ELSE 1 END = %(a0)s
                 AND (coalesce({started("r")}, {NEVER}) < %(a1)s
                      OR (coalesce({started("r")}, {NEVER}) = %(a1)s
                          AND (j.namespace, j.name) > (%(a2)s, %(a3)s)))))""",
        [int, dt.datetime, str, str],
    ),
}

# Its parent (a list of one or none) and its first EMBEDDED_REFS children by name, each
# with its latest run, and how many children there are.
# (restricted: the visible ones)
PARENT_OF = "p.id = j.parent_job_id" + mark("job", "p")
CHILDREN_OF = "c.parent_job_id = j.id" + mark("job", "c")
PARENT = jobs_with_runs("p", PARENT_OF, as_of=False)
CHILDREN = jobs_with_runs("c", CHILDREN_OF, as_of=False)
CHILD_COUNT = f"(SELECT count(*) FROM readmodel.jobs c WHERE {CHILDREN_OF})"
CATALOGUE = f"""{description("j.facets")}, {owners("j.facets")}, {tags("j.facets")}"""
RUN_COUNT = "(SELECT count(*) FROM readmodel.runs c WHERE c.job_id = j.id)"


def get_job_sql(restricted: bool) -> str:
    return for_access(
        f"""
SELECT j.id, j.namespace, j.name, j.job_type, j.processing_type, j.integration,
       j.facets::text, j.first_seen, j.last_seen,
       {PARENT},
       {LATEST_RUN},
       {CHILDREN},
       {job_datasets_now("j.id", "input", restricted)},
       {job_datasets_now("j.id", "output", restricted)},
       {CATALOGUE}, {RUN_COUNT}, {CHILD_COUNT}, {lateness.of_job("j.id")}
FROM readmodel.jobs j
LEFT JOIN readmodel.runs r ON r.id = j.latest_run_id
WHERE j.id = %(id)s
""",
        restricted,
    )


# As of T: the latest run started by then, in the state its events up to T gave it (read
# from the log: a terminal event wins, as in the runs projection), and the datasets of
# that run (and static lineage declared by then). Names, facets, parent and children are
# today's: they say what the job is, not what it did (their latest runs are those at T).
# Runs counted: those started by T.
def get_job_as_of_sql(restricted: bool) -> str:
    return for_access(
        f"""
SELECT j.id, j.namespace, j.name, j.job_type, j.processing_type, j.integration,
       j.facets::text, j.first_seen,
       coalesce((SELECT max(l.event_time) FROM event_log l
                 WHERE l.job_namespace = j.namespace AND l.job_name = j.name
                   AND l.event_time <= %(as_of)s), j.first_seen),
       {jobs_with_runs("p", PARENT_OF, as_of=True)},
       {asof.RUN_AT_COLUMNS},
       {jobs_with_runs("c", CHILDREN_OF, as_of=True)},
       {job_datasets_at("j.id", "input", restricted)},
       {job_datasets_at("j.id", "output", restricted)},
       {CATALOGUE},
       (SELECT count(*) FROM readmodel.lineage_runs c
        WHERE c.job_id = j.id AND c.started_at <= %(as_of)s),
       {CHILD_COUNT}, {lateness.of_job("j.id")}
FROM readmodel.jobs j
{asof.latest_run_at_joins("j.id")}
WHERE j.id = %(id)s
""",
        restricted,
    )


# By Access.restricted: a job now, and as of a moment.
GET_JOB = {restricted: get_job_sql(restricted) for restricted in (False, True)}
GET_JOB_AS_OF = {restricted: get_job_as_of_sql(restricted) for restricted in (False, True)}


class ListQuery(msgspec.Struct, frozen=True):
    namespace: params.NamespaceName = None
    q: params.Substring = None
    state: Annotated[
        params.RunStates | None,
        Meta(
            description="Only jobs whose latest run is in one of these states, "
            "comma-separated (`state=FAIL,ABORT`)."
        ),
    ] = None
    sort: Annotated[
        Literal["name", "latest_run", "failed_first"],
        Meta(
            description="`name`: by namespace and name; `latest_run`: the latest run's start, "
            "newest first (jobs never run last); `failed_first`: jobs whose latest run "
            "failed or aborted first, then as `latest_run`."
        ),
    ] = "name"
    late: Annotated[
        bool | None,
        Meta(
            description="`true`: only jobs whose next run is late or missed now, by the "
            "cadence learned from their runs (`lateness`); `false`: only the others."
        ),
    ] = None
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
    description="Jobs with their latest run (state, start, end, duration), by namespace "
    "and name, or as `sort` says. `state` filters on the state of the latest run, `late` on "
    "whether its next run is late by the cadence learned from its runs.",
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
    description="Names, facets, job type, description, owners and tags, parent and child "
    "jobs (each with its latest run), latest run, run count, and the datasets it reads and "
    "writes (over all its runs and its static lineage; the first 100 of each by name, with "
    "their counts; the first 100 children likewise). With "
    "`as_of`: its latest run started at or before then, in the state it had then, and the "
    "datasets that run read and wrote (plus static lineage declared by then); `last_seen` "
    "as of then; names, facets, parent and children as they are now. A job first seen "
    "after `as_of` answers 404.",
)


class DatasetsQuery(msgspec.Struct, frozen=True):
    direction: Annotated[
        Literal["input", "output"],
        Meta(description="`input`: the datasets it reads; `output`: those it writes."),
    ]
    limit: params.Limit = params.DEFAULT_LIMIT
    cursor: params.Cursor = None


DATASETS = Operation(
    "GET",
    "/jobs/{job_id}/datasets",
    "listJobDatasets",
    "The datasets a job reads or writes",
    models.DatasetRefPage,
    tag="jobs",
    path_params=JobPath,
    query=DatasetsQuery,
    not_found=True,
    description="Every dataset the job reads (`direction=input`) or writes (output), over "
    "all its runs and its static lineage, by display name: the whole list behind the "
    "first 100 in /jobs/{job_id}.",
)
# A page of a job's or run's datasets, by Access.restricted.
DATASETS_PAGES = {False: DATASETS_PAGE, True: DATASETS_PAGE_VISIBLE}
JOB_EXISTS = "SELECT 1 FROM readmodel.jobs j WHERE j.id = %(id)s"
resource = Resource()


def _latest_run(r: Any) -> models.LatestRun | None:
    if r[0] is None:
        return None
    return models.LatestRun(
        id=r[0], state=r[1], state_time=r[2], started_at=r[3], ended_at=r[4], duration_seconds=r[5]
    )


_latest = msgspec.json.Decoder(models.LatestRun | None)


def _parent(r: Any) -> models.JobRefWithRun | None:
    """The parent of a list row: (id, namespace, name) and its latest run as JSON."""
    if r[0] is None:
        return None
    return models.JobRefWithRun(
        id=r[0], namespace=r[1], name=r[2], latest_run=_latest.decode(r[3] or "null")
    )


@resource.add(LIST)
async def list_jobs(request: Request) -> Response:
    query: ListQuery = LIST.parse_query(request)
    access = await access_of(request)
    filters: list[str] = [job_visible(access)] if access.restricted else []
    args: dict[str, Any] = {"limit": query.limit + 1, **access.sql_params()}
    if query.namespace is not None:
        filters.append(FILTER_NAMESPACE)
        args["namespace"] = query.namespace
    if query.q:
        filters.append(FILTER_NAME)
        args["pattern"] = like_substring(query.q)
    if query.state is not None:
        filters.append(FILTER_STATE)
        args["state"] = query.state
    if query.late is not None:
        overrides = request.app.state.settings.cadence_overrides is not None
        filters.append(lateness.filter_late(query.late, overrides))
    counted = COUNT_JOBS.format(filters="\n  ".join(filters))
    order, after, key_types = SORTS[query.sort]
    kind = bound_kind("jobs", query)
    if query.cursor is not None:
        key = decode_cursor(query.cursor, kind, key_types)
        args.update({f"a{i}": v for i, v in enumerate(key)})
        filters.append(after)
    sort_key = {
        "name": lambda r: (r[1], r[2]),
        "latest_run": lambda r: (r[18], r[1], r[2]),
        "failed_first": lambda r: (r[19], r[18], r[1], r[2]),
    }[query.sort]
    sql = LISTS_JOBS[access.restricted].format(filters="\n  ".join(filters), order=order)
    async with connection(request) as conn:
        items, next_cursor, count, exact = await page_with_total(
            conn, sql, counted, args, query, kind, sort_key
        )
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
                    description=r[6],
                    parent=_parent((*r[7:10], r[20])),
                    first_seen=r[10],
                    last_seen=r[11],
                    latest_run=_latest_run(r[12:18]),
                    lateness=lateness.decode_lateness(r[21]),
                )
                for r in items
            ],
            next_cursor=next_cursor,
            total=count,
            total_is_exact=exact,
        ),
    )


_refs = msgspec.json.Decoder(list[models.JobRefWithRun])
_datasets = msgspec.json.Decoder(list[models.DatasetRef])
_owners = msgspec.json.Decoder(list[models.Owner])
_tags = msgspec.json.Decoder(list[models.Tag])


@resource.add(GET)
async def get_job(request: Request) -> Response:
    path: JobPath = GET.parse_path(request)
    query: JobQuery = GET.parse_query(request)
    access = await access_of(request)
    args = {"id": path.job_id, "as_of": query.as_of or asof.NOW, **access.sql_params()}
    statements = GET_JOB if query.as_of is None else GET_JOB_AS_OF
    sql = statements[access.restricted] + job_visible(access)
    async with connection(request) as conn:
        r = await row(conn, sql, args)
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
            facets=facets.served(r[6], facets.JOB, sensitive=access.shows_sensitive(r[1])),
            first_seen=r[7],
            last_seen=r[8],
            parent=next(iter(_refs.decode(r[9])), None),
            latest_run=_latest_run(r[10:16]),
            children=_refs.decode(r[16]),
            inputs=_datasets.decode(r[17]),
            input_count=r[18],
            outputs=_datasets.decode(r[19]),
            output_count=r[20],
            description=r[21],
            owners=_owners.decode(r[22]),
            tags=_tags.decode(r[23]),
            run_count=r[24],
            child_count=r[25],
            lateness=lateness.decode_lateness(r[26]),
        ),
    )


@resource.add(DATASETS)
async def list_job_datasets(request: Request) -> Response:
    path: JobPath = DATASETS.parse_path(request)
    query: DatasetsQuery = DATASETS.parse_query(request)
    access = await access_of(request)
    answer = await datasets_page(
        request,
        DATASETS_PAGES[access.restricted].format(edges=JOB_EDGES_OF),
        JOB_EXISTS + job_visible(access),
        "job",
        path.job_id,
        query,
        bound_kind("job-datasets", query, path.job_id),
    )
    return json_response(request, answer)


async def datasets_page(
    request: Request,
    sql: str,
    exists: str,
    what: str,
    id_: uuid.UUID,
    query: Any,
    kind: str,
) -> models.DatasetRefPage:
    """A page of the datasets of a job or run (404 when the job or run is unknown or
    hidden: `exists` holds its visibility condition)."""
    access = await access_of(request)
    after: tuple[Any, ...] = (None, None, None)
    if query.cursor is not None:
        after = decode_cursor(query.cursor, kind, [str, str, uuid.UUID])
    args = {
        "id": id_,
        "direction": query.direction,
        "after_namespace": after[0],
        "after_name": after[1],
        "after_id": after[2],
        "limit": query.limit + 1,
        "as_of": asof.NOW,
        **access.sql_params(),
    }
    async with connection(request) as conn:
        if await row(conn, exists, {"id": id_, **access.sql_params()}) is None:
            raise not_found(what, id_)
        found = await rows(conn, sql, args)
    items, next_cursor = page(found, query.limit, kind, lambda r: (r[1], r[2], r[0]))
    return models.DatasetRefPage(
        items=[models.DatasetRef(id=r[0], namespace=r[1], name=r[2]) for r in items],
        next_cursor=next_cursor,
    )
