"""GET /runs, /runs/{run_id} and /runs/{run_id}/events.

Restricted (api/visibility.py): the runs of jobs in readable namespaces; another's run
(its page, datasets and events) is a 404 as an unknown id is, and its facets and events
leave out sensitive facets unless its job's namespace shows them.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta
from starlette.requests import Request
from starlette.responses import Response

from metastore.access import Access, access_of
from metastore.api import facets, limits, models, models_jobs, models_runs, params
from metastore.api.db import connection, not_found, row, rows
from metastore.api.jobs import DatasetsQuery, datasets_handler
from metastore.api.listing import Filter, Listing, Sort, templates
from metastore.api.operation import Operation, Resource
from metastore.api.pagination import bound_kind, count_capped, decode_cursor, page_of_bytes
from metastore.api.planner import Planner
from metastore.api.responses import json_response
from metastore.api.sqlparts import (
    RUN_EDGES_OF,
    duration,
    edge_datasets,
    failed_first,
    failed_first_parts,
    failed_first_walk,
    run_ref,
    started,
)
from metastore.api.visibility import both, for_access, mark, run_visible
from metastore.eventlog import HORIZON
from metastore.problems import ProblemError
from projections import runs as runs_fold
from projections.common import FACETS_DECODER, job_id, json_text
from projections.decode import decode_event

RUN_COLUMNS = f"""
r.id, r.job_id, r.job_namespace, r.job_name, r.state, r.state_time, {started("r")},
r.ended_at, {duration("r")}, r.nominal_start, r.nominal_end, r.error_message,
r.parent_run_id, r.parent_job_namespace, r.parent_job_name, p.state,
r.root_run_id, rt.job_id, rt.job_namespace, rt.job_name, rt.state, r.first_seen, r.last_seen
"""
# (restricted: a parent or root of a hidden job is its id alone)
PARENT_JOIN = "LEFT JOIN readmodel.runs p ON p.id = r.parent_run_id" + mark("run", "p")
ROOT_JOIN = (
    "LEFT JOIN readmodel.runs rt ON rt.id = r.root_run_id AND r.parent_run_id IS NOT NULL"
    + mark("run", "rt")
)
RUN_JOINS = f"""
{PARENT_JOIN}
{ROOT_JOIN}
"""

# Newest first by the earliest eventTime (first_seen), by start, or failed and aborted
# runs first (then by start). (first_seen DESC, id) is the order of the runs_* indexes,
# (start DESC, id) of runs_started.
LIST_RUNS = f"""
SELECT {RUN_COLUMNS}, {started("r")} AS sort_time,
       {failed_first("r")} AS sort_failed
FROM readmodel.runs r
{RUN_JOINS}
WHERE true {{filters}}
ORDER BY {{order}}
LIMIT %(limit)s
"""
LISTS_RUNS = both(LIST_RUNS)
# (the count of a list: its rows up to pagination.TOTAL_CAP, without the joins)
COUNT_RUNS = count_capped("SELECT 1 FROM readmodel.runs r WHERE true {filters}")
# With `state`, since and until bound when the run reached it ("failures of the last 24
# hours" holds a run started 25 hours ago that failed an hour ago).
SINCE = {False: "AND r.first_seen >= %(since)s", True: "AND r.state_time >= %(since)s"}
UNTIL = {False: "AND r.first_seen < %(until)s", True: "AND r.state_time < %(until)s"}
_FAILED = failed_first("r")
# One state is an equality: runs_state's range in the list's order (`= ANY` of one state
# walked runs_first_seen filtering, 1,515 runs read for a page of 51 failures).
STATES = {False: "AND r.state = ANY(%(state)s)", True: "AND r.state = %(state)s"}


def _states(states: list[str]) -> str | list[str]:
    return states[0] if len(states) == 1 else states


# `sort=failed_first` reads a page along runs_started (issue 46): the failed and aborted runs
# newest first, then, once those are done (a one-time filter), the others; their ids first,
# then the page's rows for those alone. Sorting every run took 1.8 s at 1,000,000 events;
# the walk reads some 30 runs a failed run (3.6 % failed). With filters each part is a
# `started` list of its states (the query's, split; a part none is in reads nothing), so
# the planner walks or sorts the few that match by the filters' statistics, as for
# `sort=started` (sorting every match by failed first took 1.0-1.6 s with `since`, `until`
# or `state=COMPLETE`).
WALK_IDS = f"""
SELECT r.id FROM readmodel.runs r
WHERE true {{filters}}
ORDER BY {started("r")} DESC, r.id
LIMIT %(limit)s"""
RUNS_FROM = "FROM readmodel.runs r\n"
KEYED_FROM = (
    "FROM ({ids}) k\n"
    "CROSS JOIN LATERAL (SELECT * FROM readmodel.runs r WHERE r.id = k.id OFFSET 0) r\n"
)
assert all(RUNS_FROM in sql for sql in LISTS_RUNS.values())  # (the list's FROM, replaced)
# (a run starts at or after its first event: a walk by start of the runs first seen since a
# moment ends where their start does, not at the last run)
SINCE_STARTED = f" AND {started('r')} >= %(since)s"


def _filtered(query: Any) -> bool:
    """Whether a filter besides the namespace and `since` narrows `query`'s runs (a walk
    from the newest run to `since` reads no more than the runs since then, sorted)."""
    return any(v is not None for v in (query.job_id, query.state, query.until))


def _select(query: Any, restricted: bool, filters: str, order: str) -> str:
    if query.since is not None and query.state is None and query.sort != "first_seen":
        filters += SINCE_STARTED
    if query.sort != "failed_first":
        return LISTS_RUNS[restricted].format(filters=filters, order=order)
    after, bound = failed_first_walk("r", query.cursor is not None)
    if query.state is not None:
        state = STATES[len(query.state) == 1]
        assert state in filters  # (each part's states in its place)
        filters = filters.replace(state, "")
    failed_part, ran_part = failed_first_parts("r", query.state)
    failed = WALK_IDS.format(filters=f"{filters}{failed_part}{after}")
    ran = WALK_IDS.format(
        filters=f"{filters}{ran_part} AND (SELECT count(*) FROM failed) < %(limit)s{bound}"
    )
    listed = LISTS_RUNS[restricted].replace(RUNS_FROM, KEYED_FROM, 1)
    return (
        f"WITH failed AS MATERIALIZED ({failed}),\nran AS MATERIALIZED ({ran})\n"
        + listed.format(
            filters="", order=order, ids="SELECT * FROM failed UNION ALL SELECT * FROM ran"
        )
    )


# The walk's page is read with explicit sorts off, unfiltered, by namespace or since a
# moment: the planner prices sorting every failed run (since then) as cheaper than walking
# past the others. (Another filter's statistics lead it right: it sorts the few runs of a
# rare state or a job.)
WALK = Planner(("enable_sort",))


def _settings(query: Any) -> Planner | None:
    return WALK if query.sort == "failed_first" and not _filtered(query) else None


RUNS = Listing(
    "runs",
    _select,
    templates(LISTS_RUNS, COUNT_RUNS)[1],
    {
        # (each cursor's condition bounds the first key alone too: an index condition, so a
        # next page starts at the cursor, not at the first row: 2,871 runs read past, then
        # filtered, for the second page of failures at 1,000,000 events)
        "first_seen": Sort(
            "r.first_seen DESC, r.id",
            "AND r.first_seen <= %(a0)s"
            " AND (r.first_seen < %(a0)s OR (r.first_seen = %(a0)s AND r.id > %(a1)s))",
            [dt.datetime, uuid.UUID],
            lambda r: (r[21], r[0]),
        ),
        "started": Sort(
            f"{started('r')} DESC, r.id",
            f"AND {started('r')} <= %(a0)s"
            f" AND ({started('r')} < %(a0)s OR ({started('r')} = %(a0)s AND r.id > %(a1)s))",
            [dt.datetime, uuid.UUID],
            lambda r: (r[23], r[0]),
        ),
        "failed_first": Sort(
            f"sort_failed, {started('r')} DESC, r.id",
            f"""AND ({_FAILED} > %(a0)s OR ({_FAILED} = %(a0)s
             AND ({started("r")} < %(a1)s OR ({started("r")} = %(a1)s AND r.id > %(a2)s))))""",
            [int, dt.datetime, uuid.UUID],
            lambda r: (r[24], r[23], r[0]),
        ),
    },
    filters=(
        Filter("job_id", "AND r.job_id = %(job_id)s"),
        Filter("namespace", "AND r.job_namespace = %(namespace)s"),
        Filter("state", lambda query, _: STATES[len(query.state) == 1], bind=_states),
        Filter("since", lambda query, _: SINCE[query.state is not None]),
        Filter("until", lambda query, _: UNTIL[query.state is not None]),
    ),
    visible=run_visible,
    settings=_settings,
)

CHILDREN = f"""
coalesce((SELECT json_agg({run_ref("c")} ORDER BY c.first_seen, c.id)
  FROM (SELECT * FROM readmodel.runs c WHERE c.parent_run_id = r.id{mark("run", "c")}
        ORDER BY c.first_seen, c.id LIMIT 1000) c), '[]')::text
"""

GET_RUN = {
    restricted: for_access(
        f"""
SELECT {RUN_COLUMNS}, r.facets::text,
       {CHILDREN},
       {edge_datasets("run_edges", "run_id", "r.id", "input", restricted)},
       {edge_datasets("run_edges", "run_id", "r.id", "output", restricted)},
       r.facet_times::text
FROM readmodel.runs r
{RUN_JOINS}
WHERE r.id = %(id)s
""",
        restricted,
    )
    for restricted in (False, True)
}
# The events of a run that set the facets the runs table left in the log (a Spark plan:
# projections.runs.LARGE_FACET_BYTES), by their seq (facet_times), through event_log_run.
FACET_EVENTS = """
SELECT seq, event::text FROM event_log
WHERE run_id = %(run_id)s AND seq = ANY(%(seqs)s::bigint[])
"""

# The run's events in log order, below the horizon of finished transactions (see
# metastore/eventlog.py), so a page never passes over an event that commits later.
# A page ends once it holds PAGE_BYTES of events (always its first): past it, an event is
# not read (NULL), and the page ends before it. Only its job's: another job's events
# reusing the runId are not the run's (the job of its first event in the log). The run's
# events are walked by the run index alone (OFFSET 0), then kept if its job's: with the
# job's name in the same scan and a partition not yet analyzed, PostgreSQL walked the job
# index and read every event of the job (as common.RUN_FACTS in the fold).
RUN_EVENTS = f"""
SELECT tx::text::bigint, seq,
       CASE WHEN sum(size_bytes) OVER w - size_bytes < %(page_bytes)s THEN event::text END
FROM (
    SELECT tx, seq, size_bytes, event
    FROM (
        SELECT tx, seq, size_bytes, event, job_namespace, job_name
        FROM event_log
        WHERE run_id = %(run_id)s
          AND (tx, seq) > (%(tx)s::text::xid8, %(seq)s)
          AND tx < {HORIZON}
        ORDER BY tx, seq
        OFFSET 0) e
    WHERE (job_namespace, job_name) = (
          SELECT f.job_namespace, f.job_name FROM event_log f
          WHERE f.run_id = %(run_id)s ORDER BY f.tx, f.seq LIMIT 1)
    ORDER BY tx, seq
    LIMIT %(limit)s
) p
WINDOW w AS (ORDER BY tx, seq)
ORDER BY tx, seq
"""
RUN_KNOWN = """
SELECT EXISTS (SELECT 1 FROM readmodel.runs WHERE id = %(run_id)s)
    OR EXISTS (SELECT 1 FROM event_log WHERE run_id = %(run_id)s)
"""
# Restricted: a run's events are shown when the runs table has it in a readable namespace
# (a run not yet folded is hidden until it is), each as facets.event_shown shows it.
RUN_NAMESPACE = "SELECT r.job_namespace FROM readmodel.runs r WHERE r.id = %(run_id)s"


class ListQuery(params.Paged, frozen=True):
    job_id: Annotated[uuid.UUID | None, Meta(description="Only runs of this job.")] = None
    namespace: Annotated[
        params.Name | None,
        Meta(
            description="Only runs of jobs in this namespace.",
        ),
    ] = None
    state: Annotated[
        params.RunStates | None,
        Meta(description="Only runs in one of these states, comma-separated (`state=FAIL,ABORT`)."),
    ] = None
    since: (
        Annotated[
            dt.datetime,
            Meta(
                tz=True,
                description="Only runs first seen at or after this; with `state`, runs that "
                "reached that state (`state_time`) at or after this.",
            ),
        ]
        | None
    ) = None
    until: (
        Annotated[
            dt.datetime,
            Meta(
                tz=True,
                description="Only runs first seen before this; with `state`, runs that "
                "reached that state (`state_time`) before this.",
            ),
        ]
        | None
    ) = None
    sort: Annotated[
        Literal["first_seen", "started", "failed_first"],
        Meta(
            description="`first_seen`: newest first by their earliest eventTime; `started`: "
            "newest first by `started_at`; `failed_first`: failed and aborted runs first, "
            "then by `started_at`, newest first."
        ),
    ] = "first_seen"


PageQuery = params.Paged


class RunPath(msgspec.Struct, frozen=True):
    run_id: uuid.UUID


LIST = Operation(
    "GET",
    "/runs",
    "listRuns",
    "List runs",
    models_runs.RunPage,
    tag="runs",
    etag_from_position=True,
    query=ListQuery,
    description="Runs, newest first (by the earliest eventTime of their events, or as "
    "`sort` says); `since` and `until` bound that time (since <= t < until), or with "
    "`state` the time the run reached its state (`state_time`). A namespace's failures of "
    "the last day: `namespace=...&state=FAIL,ABORT&since=<a day ago>`, runs started "
    "earlier included.",
)
GET = Operation(
    "GET",
    "/runs/{run_id}",
    "getRun",
    "A run",
    models_runs.Run,
    tag="runs",
    etag_from_position=True,
    path_params=RunPath,
    not_found=True,
    description="A run by its OpenLineage runId: state, times, duration, nominal time, "
    "error message, facets, parent, root and child runs (up to 1,000), inputs and "
    "outputs (the first 100 of each, with their counts). `root` is null for a run "
    "without a parent; `started_at` is its START eventTime, else its earliest eventTime.",
)
EVENTS = Operation(
    "GET",
    "/runs/{run_id}/events",
    "listRunEvents",
    "The raw events of a run",
    models_runs.RunEventPage,
    tag="runs",
    path_params=RunPath,
    query=PageQuery,
    not_found=True,
    description="The run's OpenLineage events exactly as stored, in log order.",
)
DATASETS = Operation(
    "GET",
    "/runs/{run_id}/datasets",
    "listRunDatasets",
    "The datasets a run read or wrote",
    models_jobs.DatasetRefPage,
    tag="runs",
    path_params=RunPath,
    query=DatasetsQuery,
    not_found=True,
    description="Every dataset the run read (`direction=input`) or wrote (output), by "
    "display name: the whole list behind the first 100 in /runs/{run_id}.",
)
RUN_EXISTS = "SELECT 1 FROM readmodel.runs r WHERE r.id = %(id)s"
resource = Resource()


def _run_ref(
    run: uuid.UUID | None,
    job: uuid.UUID | None,
    namespace: str | None,
    name: str | None,
    state: Any,
) -> models.RunRef | None:
    if run is None:
        return None
    ref = None
    if namespace is not None and name is not None:
        ref = models.JobRef(id=job or job_id(namespace, name), namespace=namespace, name=name)
    return models.RunRef(id=run, job=ref, state=state)


def _summary(r: Any, access: Access) -> dict[str, Any]:
    parent = root = None
    if r[12] is not None:
        # (the parent's job as the run's parent facet names it: left out when hidden)
        shown = r[13] is not None and access.reads(r[13])
        parent = _run_ref(r[12], None, r[13] if shown else None, r[14], r[15])
        root = _run_ref(r[16], r[17], r[18], r[19], r[20])
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
        "parent": parent,
        "root": root,
        "first_seen": r[21],
        "last_seen": r[22],
    }


@resource.add(LIST)
async def list_runs(request: Request) -> Response:
    listed = await RUNS.serve(request, LIST)
    access = await access_of(request)  # (as the list decided it)
    return json_response(
        request,
        models_runs.RunPage(
            items=[models_runs.RunSummary(**_summary(r, access)) for r in listed.rows],
            **listed.page(),
        ),
    )


_run_refs = msgspec.json.Decoder(list[models.RunRef])
_datasets = msgspec.json.Decoder(list[models.DatasetRef])


@resource.add(GET)
async def get_run(request: Request) -> Response:
    path: RunPath = GET.parse_path(request)
    access = await access_of(request)
    async with connection(request) as conn:
        args = {"id": path.run_id, **access.sql_params()}
        r = await row(conn, GET_RUN[access.restricted] + run_visible(access), args)
        if r is None:
            raise not_found("run", path.run_id)
        merged = await _facets_from_log(conn, path.run_id, r[23], r[29])
    return json_response(
        request,
        models_runs.Run(
            **_summary(r, access),
            facets=facets.served(merged, facets.RUN, sensitive=access.shows_sensitive(r[2])),
            children=_run_refs.decode(r[24]),
            inputs=_datasets.decode(r[25]),
            input_count=r[26],
            outputs=_datasets.decode(r[27]),
            output_count=r[28],
        ),
    )


@resource.add(EVENTS)
async def list_run_events(request: Request) -> Response:
    path: RunPath = EVENTS.parse_path(request)
    query: PageQuery = EVENTS.parse_query(request)
    tx, seq = 0, 0
    kind = bound_kind("run_events", query, path.run_id)  # (a cursor of this run's events)
    if query.cursor is not None:
        tx, seq = decode_cursor(query.cursor, kind, [int, int])
        if tx < 0 or seq < 0:
            raise ProblemError(400, "query parameter `cursor` is invalid: out of range")
    args = {
        "run_id": path.run_id,
        "tx": tx,
        "seq": seq,
        "limit": query.limit + 1,
        "page_bytes": limits.PAGE_BYTES,
    }
    access = await access_of(request)
    async with connection(request) as conn:
        if access.restricted:
            visible = await row(
                conn, RUN_NAMESPACE + run_visible(access), {**args, **access.sql_params()}
            )
            if visible is None:
                raise not_found("run", path.run_id)
        found = await rows(conn, RUN_EVENTS, args)
        if not found and query.cursor is None:
            known = await row(conn, RUN_KNOWN, {"run_id": path.run_id})
            if not known[0]:
                raise not_found("run", path.run_id)
    items, next_cursor = page_of_bytes(found, query.limit, kind, lambda r: (r[0], r[1]), 2)
    return json_response(
        request,
        models_runs.RunEventPage(
            items=[msgspec.Raw(facets.event_shown(r[2], access)) for r in items],
            next_cursor=next_cursor,
        ),
    )


list_run_datasets = resource.add(DATASETS)(
    datasets_handler(DATASETS, "run", RUN_EDGES_OF, RUN_EXISTS, run_visible)
)


async def _facets_from_log(conn: Any, run_id: uuid.UUID, stored: str, times: str) -> str:
    """The run's merged facets `stored` with those the runs table left in the log read
    back from the events that set them (`times`: facet_times), as sent."""
    if bytes(runs_fold.IN_LOG).decode() not in stored:
        return stored
    merged = FACETS_DECODER.decode(stored)
    set_at = msgspec.json.decode(times)
    wanted = {name: set_at[name][1] for name, raw in merged.items() if raw == runs_fold.IN_LOG}
    events = dict(
        await rows(conn, FACET_EVENTS, {"run_id": run_id, "seqs": list(set(wanted.values()))})
    )
    for name, seq in wanted.items():
        event = events.get(seq)
        run = decode_event(event).run if event is not None else None
        sent = run.facets.get(name) if run is not None and run.facets else None
        if sent is not None:
            merged[name] = sent
    return json_text(merged)
