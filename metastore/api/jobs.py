"""GET /jobs and /jobs/{job_id}: jobs with their latest run, parents, children, datasets.

Restricted (api/visibility.py): the jobs of readable namespaces; another's job is a 404
as an unknown id is, its sensitive facets left out unless its namespace shows them.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta
from starlette.requests import Request
from starlette.responses import Response

from metastore.access import Access, access_of
from metastore.api import asof, facets, lateness, models, models_jobs, params
from metastore.api.db import connection, not_found, row, rows
from metastore.api.listing import Filter, Listing, Sort
from metastore.api.operation import Operation, Resource
from metastore.api.pagination import bound_kind, count_capped, decode_cursor, page
from metastore.api.planner import Planner
from metastore.api.responses import json_response
from metastore.api.sqlparts import (
    DATASETS_PAGE,
    DATASETS_PAGE_VISIBLE,
    JOB_EDGES_OF,
    description,
    duration,
    failed_first,
    failed_first_parts,
    failed_first_walk,
    job_datasets_at,
    job_datasets_now,
    jobs_with_runs,
    latest_run,
    like_substring,
    owners,
    started,
    tags,
)
from metastore.api.visibility import RESTRICTED, both, for_access, job_visible, mark, visible

# The latest run's columns (id, state, state_time, started_at, ended_at, duration) of
# readmodel.runs row `r`.
LATEST_RUN = f"r.id, r.state, r.state_time, {started('r')}, r.ended_at, {duration('r')}"

# Sort keys: name (namespace, name); latest_run (its start, newest first; jobs never run
# last, at the year 1); failed_first (a latest run that failed or aborted first, then as
# latest_run).
NEVER = "'0001-01-01T00:00:00Z'::timestamptz"
_TIME = f"coalesce({started('r')}, {NEVER})"
_FAILED = failed_first("r")
LIST_JOBS = f"""
SELECT j.id, j.namespace, j.name, j.job_type, j.processing_type, j.integration,
       {description("j.facets")}, p.id, p.namespace, p.name, j.first_seen, j.last_seen,
       {LATEST_RUN},
       {_TIME} AS sort_time, {_FAILED} AS sort_failed,
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
# The count joins the latest run only for `state`: without it, a count reads no column
# outside an index of jobs, an index-only scan where the visibility map is set (a scan of
# 10,001 jobs' wide rows took 5-18 ms at 1,000,000 events).
COUNT_JOBS = count_capped("SELECT 1 FROM readmodel.jobs j WHERE true {filters}")
COUNT_JOBS_BY_STATE = count_capped("""SELECT 1 FROM readmodel.jobs j
LEFT JOIN readmodel.runs r ON r.id = j.latest_run_id
WHERE true {filters}""")
# `late=true` alone (or by namespace): the late jobs are the learned cadences due by now, a
# range of job_cadence_late (a cadence's namespace is its job's), not a probe per job.
COUNT_LATE = count_capped(
    "SELECT 1 FROM readmodel.job_cadence k WHERE k.late_at <= now(){namespace}{visible}"
)


# A page of late jobs when few are late (Listing.narrow): read from their cadences, each
# job looked up by id behind OFFSET 0 fences, then sorted. Unfenced, the planner walks every
# job in the page's order probing its cadence whenever it guesses the late ones spread
# evenly (1,007 late of 50,000 took 261-480 ms; like this 26-61 ms, load 12).
LATE_FROM = """FROM (SELECT lk.job_id FROM readmodel.job_cadence lk
      WHERE lk.late_at <= now(){namespace} OFFSET 0) lk
CROSS JOIN LATERAL (SELECT * FROM readmodel.jobs j WHERE j.id = lk.job_id OFFSET 0) j
"""
LISTS_LATE = {
    restricted: sql.replace("FROM readmodel.jobs j\n", LATE_FROM, 1)
    for restricted, sql in LISTS_JOBS.items()
}
assert all(LATE_FROM in sql for sql in LISTS_LATE.values())  # (the list's FROM, replaced)
# Up to this many matches of a filter a page read from them is bounded (some 16 buffers a
# late job: its joins and lateness come before the sort), where a walk in the page's order
# may read every job or run when the matches cluster; spread evenly, the walk is cheaper
# (994 late of 50,000: 6,621 buffers against 15,983), and past this many it finds a page
# soon whatever the order (reading at most some runs / FEW runs an item).
FEW = 1_000
LATE_FILTER = lateness.filter_late(True, False)


def _counted_late(query: Any, overrides: bool) -> bool:
    """Whether /jobs counts `query`'s jobs from their cadences (COUNT_LATE)."""
    return bool(query.late) and not overrides and not query.q and query.state is None


def _in_namespace(query: Any, alias: str, column: str = "namespace") -> str:
    return "" if query.namespace is None else f" AND {alias}.{column} = %(namespace)s"


def _count(overrides: bool) -> Callable[[Any, bool, str], str]:
    """The count of /jobs as `query` filters it (`overrides`: as for the `late` filter)."""

    def count(query: Any, restricted: bool, filters: str) -> str:
        if _counted_late(query, overrides):
            return COUNT_LATE.format(
                namespace=_in_namespace(query, "k"),
                visible=visible("namespace", RESTRICTED, "k.namespace") if restricted else "",
            )
        counted = COUNT_JOBS if query.state is None else COUNT_JOBS_BY_STATE
        return counted.format(filters=filters)

    return count


STATE_FILTER = "AND r.state = ANY(%(state)s)"
# A page of the jobs whose latest run is in one of the `state` filter's states, when few are
# (Listing.narrow): read from the runs of those states (each run's job looked up by id, its
# latest run or not), then sorted. Walked by name or by start, the page passes every job or
# run whose latest run is in another state: the 2 jobs whose latest run has started, of
# 50,000, read every job (35-100 ms at 1,000,000 events).
STATE_KEYS = """
SELECT j.id
FROM (SELECT r.* FROM readmodel.runs r WHERE r.state = ANY(%(state)s){runs} OFFSET 0) r
CROSS JOIN LATERAL (SELECT * FROM readmodel.jobs j
                    WHERE j.id = r.job_id AND j.latest_run_id = r.id OFFSET 0) j
WHERE true {filters}"""


def _narrow(overrides: bool) -> Callable[[Any, bool, str, str], str | None]:
    """The page of the jobs `query` keeps when the count finds few: the late ones read from
    their cadences; with the run sorts, those of a state from its runs, the others (a
    name's) sorted; None for the queries whose page needs no count first (unfiltered; the
    name sort walks its filters by name, a page of the matches when they are many)."""

    def narrow(query: Any, restricted: bool, filters: str, order: str) -> str | None:
        if _counted_late(query, overrides):
            assert LATE_FILTER in filters  # (the cadences read are the late ones)
            return LISTS_LATE[restricted].format(
                filters=filters.replace(LATE_FILTER, ""),
                order=order,
                namespace=_in_namespace(query, "lk"),
            )
        if not _walks(query):
            return None
        if query.state is not None and query.q is None:
            runs = _in_namespace(query, "r", "job_namespace")
            keys = STATE_KEYS.format(filters=filters, runs=runs)
            return _keyed(restricted, f"matched AS MATERIALIZED ({keys})", "TABLE matched", order)
        if query.state is not None or query.q is not None or query.late is not None:
            return LISTS_JOBS[restricted].format(filters=filters, order=order)
        return None

    return narrow


# `sort=latest_run` and `failed_first` read a page along runs_started (issue 46): each job's
# latest run among every run newest first (a job's latest run is its own: jobs.latest_run_id
# and runs.job_id both follow common.run_owners), ties by name; jobs without a latest run
# row (never run) sort last and are read only when the walk reaches their key (a one-time
# filter), failed latest runs first for failed_first. Their keys first, then the page's
# rows for those alone (one copy of the list's columns to plan). Sorting every job instead
# took 441-779 ms at 1,000,000 events; the walk reads some runs a job past the last key.
WALK_KEYS = f"""
SELECT j.id, {started("r")} AS t
FROM readmodel.runs r
JOIN readmodel.jobs j ON j.id = r.job_id AND j.latest_run_id = r.id
WHERE true {{filters}}
ORDER BY {started("r")} DESC, j.namespace, j.name
LIMIT %(limit)s"""
NEVER_RUN_KEYS = f"""
SELECT j.id, {NEVER} AS t
FROM readmodel.jobs j
LEFT JOIN readmodel.runs r ON r.id = j.latest_run_id
WHERE r.id IS NULL {{filters}}
ORDER BY j.namespace, j.name
LIMIT %(limit)s"""
LATEST_RUN_JOIN = "LEFT JOIN readmodel.runs r ON r.id = j.latest_run_id\n"
JOBS_FROM = "FROM readmodel.jobs j\n" + LATEST_RUN_JOIN
# (each job looked up by id: a hash join of the page's keys with every job looked cheaper)
KEYED_FROM = (
    "FROM ({keys}) k\n"
    "CROSS JOIN LATERAL (SELECT * FROM readmodel.jobs j WHERE j.id = k.id OFFSET 0) j\n"
) + LATEST_RUN_JOIN
_STARTED = started("r")


def _keyed(restricted: bool, ctes: str, keys: str, order: str) -> str:
    """The page of LIST_JOBS' rows for the jobs `keys` (a statement of ids, over `ctes`)."""
    listed = LISTS_JOBS[restricted].replace(JOBS_FROM, KEYED_FROM, 1)
    return f"WITH {ctes}\n" + listed.format(filters="", order=order, keys=keys)


def _walked(query: Any, restricted: bool, filters: str, order: str) -> str:
    """The page of /jobs sorted by `latest_run` or `failed_first` (see WALK_KEYS), its
    filters applied on the way."""
    cursor = query.cursor is not None
    # (a run's namespace is its job's: the walk probes no job of another)
    runs = "" if query.namespace is None else " AND r.job_namespace = %(namespace)s"
    walks: dict[str, str] = {}
    failed = "0"
    others = ""
    bound = f" AND {_STARTED} <= %(a0)s" if cursor else ""
    walked = filters
    if query.sort == "failed_first":
        after, bound = failed_first_walk("r", cursor)
        failed_part, others = failed_first_parts("r", query.state)
        if query.state is not None:
            assert STATE_FILTER in filters  # (each part's states in its place)
            walked = filters.replace(STATE_FILTER, "")
        walks["failed"] = f"{runs}{failed_part}{after}"
        failed = "(SELECT count(*) FROM failed)"
        others += f" AND {failed} < %(limit)s"
    walks["ran"] = f"{runs}{others}{bound}"
    gate = (
        f"{failed} + (SELECT count(*) FROM ran) < %(limit)s OR (SELECT min(t) FROM ran) = {NEVER}"
    )
    never = NEVER_RUN_KEYS.format(filters=f"{filters} AND ({gate})")
    return _keyed(
        restricted,
        ",\n".join(
            f"{name} AS MATERIALIZED ({WALK_KEYS.format(filters=walked + walk)})"
            for name, walk in walks.items()
        ),
        " UNION ALL ".join([*(f"SELECT * FROM {name}" for name in walks), f"({never})"]),
        order,
    )


def _walks(query: Any) -> bool:
    """Whether /jobs reads `query`'s page along the runs (WALK_KEYS): the run sorts; with a
    filter only once its count found more than FEW matches (else _narrow reads them). Not
    failed first by a name's substring: its failed jobs are few, so the walk's first pages
    pass every failed run (206 ms at 1,000,000 events, against 43 sorting the matches)."""
    return query.sort == "latest_run" or (query.sort == "failed_first" and query.q is None)


def _probe_late(late: bool, overrides: bool) -> str:
    """lateness.filter_late as a probe of each job's cadence (one row a job at most): as
    EXISTS in a walk, the planner joined every late cadence to each run it passed (1.4
    million rows for a page of 51 at 1,000,000 events)."""
    cadence = lateness.CADENCE if overrides else "readmodel.job_cadence"
    test = f"(SELECT k.late_at <= now() FROM {cadence} k WHERE k.job_id = j.id)"
    return f"AND {test}" if late else f"AND {test} IS NOT TRUE"


def _select(overrides: bool) -> Callable[[Any, bool, str, str], str]:
    """The page statement of /jobs (`overrides`: as for the `late` filter)."""

    def select(query: Any, restricted: bool, filters: str, order: str) -> str:
        if not _walks(query):
            return LISTS_JOBS[restricted].format(filters=filters, order=order)
        if query.late is not None:
            late = lateness.filter_late(query.late, overrides)
            assert late in filters  # (the filter replaced)
            filters = filters.replace(late, _probe_late(query.late, overrides))
        return _walked(query, restricted, filters, order)

    return select


# The walk's page is read with explicit sorts and parallel merges off: the planner guesses
# a job's latest run rare among the runs, so it prices sorting every job (3,000 jobs: 31 ms
# against 0.5) or walking in workers (50 ms to start them at 1,000,000 events) as cheaper.
WALK = Planner(("enable_sort", "enable_gathermerge"))
assert all(JOBS_FROM in sql for sql in LISTS_JOBS.values())  # (the list's FROM, replaced)

SORTS = {
    "name": Sort(
        "j.namespace, j.name",
        "AND (j.namespace, j.name) > (%(a0)s, %(a1)s)",
        [str, str],
        lambda r: (r[1], r[2]),
    ),
    "latest_run": Sort(
        "sort_time DESC, j.namespace, j.name",
        f"""AND ({_TIME} < %(a0)s
             OR ({_TIME} = %(a0)s
                 AND (j.namespace, j.name) > (%(a1)s, %(a2)s)))""",
        [dt.datetime, str, str],
        lambda r: (r[18], r[1], r[2]),
    ),
    "failed_first": Sort(
        "sort_failed, sort_time DESC, j.namespace, j.name",
        f"""AND ({_FAILED} > %(a0)s
             OR ({_FAILED} = %(a0)s
                 AND ({_TIME} < %(a1)s
                      OR ({_TIME} = %(a1)s
                          AND (j.namespace, j.name) > (%(a2)s, %(a3)s)))))""",
        [int, dt.datetime, str, str],
        lambda r: (r[19], r[18], r[1], r[2]),
    ),
}


def _jobs(overrides: bool) -> Listing:
    """/jobs, its `late` filter judging the learned late_at or, with `overrides` (the api has
    cadence overrides), the overridden one."""
    return Listing(
        "jobs",
        _select(overrides),
        _count(overrides),
        SORTS,
        filters=(
            Filter("namespace", "AND j.namespace = %(namespace)s"),
            Filter(
                "q", "AND lower(j.name) LIKE %(pattern)s", "pattern", like_substring, empty=False
            ),
            Filter("state", STATE_FILTER),
            Filter(
                "late",
                lambda query, _: lateness.filter_late(query.late, overrides),
                bind=None,
            ),
        ),
        visible=job_visible,
        narrow=_narrow(overrides),
        narrow_below=FEW,
        settings=lambda query: WALK if _walks(query) else None,
    )


JOBS = {False: _jobs(False), True: _jobs(True)}

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


# The job `{job}`'s last event at or before T: the newest by eventTime in each log partition
# (event_log_job_time, one probe a partition), where max() over the job index read every
# event of the job up to T, a heap row each (a run a minute for a year: 1.5 million).
JOB_SEEN_AT = """(
    SELECT l.event_time FROM event_log l
    WHERE l.job_namespace = {job}.namespace AND l.job_name = {job}.name
      AND l.event_time <= %(as_of)s
    ORDER BY l.event_time DESC LIMIT 1)"""


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
       coalesce({JOB_SEEN_AT.format(job="j")}, j.first_seen),
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


class ListQuery(params.Paged, frozen=True):
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


class JobPath(msgspec.Struct, frozen=True):
    job_id: uuid.UUID


JobQuery = asof.AsOfQuery


LIST = Operation(
    "GET",
    "/jobs",
    "listJobs",
    "List jobs",
    models_jobs.JobPage,
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
    models_jobs.Job,
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


class DatasetsQuery(params.Paged, frozen=True):
    direction: Annotated[
        Literal["input", "output"],
        Meta(description="`input`: the datasets it reads; `output`: those it writes."),
    ]


DATASETS = Operation(
    "GET",
    "/jobs/{job_id}/datasets",
    "listJobDatasets",
    "The datasets a job reads or writes",
    models_jobs.DatasetRefPage,
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


def _head(r: Any) -> dict[str, Any]:
    """A job's leading fields (JobHead but its description), the first columns of a list
    row and a job's row alike."""
    return {
        "id": r[0],
        "namespace": r[1],
        "name": r[2],
        "job_type": r[3],
        "processing_type": r[4],
        "integration": r[5],
    }


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
    # (with cadence overrides, `late` judges the overridden late_at: api/lateness.py)
    overrides = request.app.state.settings.cadence_overrides is not None
    listed = await JOBS[overrides].serve(request, LIST)
    return json_response(
        request,
        models_jobs.JobPage(
            items=[
                models_jobs.JobSummary(
                    **_head(r),
                    description=r[6],
                    parent=_parent((*r[7:10], r[20])),
                    first_seen=r[10],
                    last_seen=r[11],
                    latest_run=_latest_run(r[12:18]),
                    lateness=lateness.decode_lateness(r[21]),
                )
                for r in listed.rows
            ],
            **listed.page(),
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
        models_jobs.Job(
            **_head(r),
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


def datasets_handler(
    op: Operation, what: str, edges: str, exists: str, visible: Callable[[Access], str]
) -> Callable[[Request], Awaitable[Response]]:
    """The handler of `op`: a page of the datasets job or run (`what`) read or wrote, by
    display name (`edges`: JOB_EDGES_OF, RUN_EDGES_OF), 404 when the job or run is unknown
    or hidden (`exists` and its `visible` condition)."""

    async def handler(request: Request) -> Response:
        id_: uuid.UUID = getattr(op.parse_path(request), f"{what}_id")
        query: DatasetsQuery = op.parse_query(request)
        access = await access_of(request)
        kind = bound_kind(f"{what}-datasets", query, id_)
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
            if (
                await row(conn, exists + visible(access), {"id": id_, **access.sql_params()})
                is None
            ):
                raise not_found(what, id_)
            found = await rows(conn, DATASETS_PAGES[access.restricted].format(edges=edges), args)
        items, next_cursor = page(found, query.limit, kind, lambda r: (r[1], r[2], r[0]))
        return json_response(
            request,
            models_jobs.DatasetRefPage(
                items=[models.DatasetRef(id=r[0], namespace=r[1], name=r[2]) for r in items],
                next_cursor=next_cursor,
            ),
        )

    return handler


list_job_datasets = resource.add(DATASETS)(
    datasets_handler(DATASETS, "job", JOB_EDGES_OF, JOB_EXISTS, job_visible)
)
