"""GET /lineage: the job/dataset graph around a node, now or as of a moment.

It walks the graph in PostgreSQL: a breadth-first recursive CTE over the edges each job
held at a moment (its latest run's and its static lineage: asof.job_edges_at; without
`as_of` the same at asof.NOW, so "now" is "as of now"), resolving edge names to dataset
ids through readmodel.dataset_names,
level by level with the set of nodes seen (each node expanded once). It stops past
`max_nodes` nodes or limits.VISIT_LIMIT edge rows looked at, then reads the edges between
the nodes it kept (two statements, one connection), at most limits.EDGE_LIMIT: a dense
graph answers `truncated` instead of growing without bound. Only the job nodes' latest
runs have a variant per mode (now: readmodel.runs; as of T: the state then). Field-level
lineage: metastore/api/column_lineage.py.
"""

from __future__ import annotations

import datetime as dt
import itertools
import uuid
from collections.abc import Collection, Mapping
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta
from psycopg import AsyncConnection
from starlette.requests import Request
from starlette.responses import Response

from metastore.access import EVERYTHING, Access, access_of
from metastore.api import asof, dataset_nodes, lateness, limits, models, models_lineage, visibility
from metastore.api.db import connection, not_found, rows
from metastore.api.operation import Operation, Resource
from metastore.api.responses import json_response
from metastore.api.sqlparts import duration, owners, started
from metastore.problems import InvalidParam, ProblemError

# (run_lineage and the document use them from here too)
DEFAULT_DEPTH = limits.DEFAULT_DEPTH
MAX_DEPTH = limits.MAX_DEPTH
NODE_LIMIT = limits.NODE_LIMIT

# Breadth-first, one row per level: the frontier of each walk (downstream, upstream) and
# the nodes each has seen, so a node is expanded once per walk however many paths reach
# it (a recursive CTE over single nodes repeats a node once per path length, which
# explodes on dense or cyclic graphs). The walk stops past `max_nodes` nodes, and when it
# has looked at `visit_limit` edge rows (`raw`: a dataset with 20,000 readers costs
# 20,000 rows whatever the node limit), `capped` then.
# Rows: (type, id, depth, namespace, name, reached, cut) for each node kept, nearest first.
LINEAGE_WALK = """
WITH RECURSIVE start AS ({start}),
bfs(depth, down_ds, down_jobs, up_ds, up_jobs, seen_down_ds, seen_down_jobs, seen_up_ds,
    seen_up_jobs, visited, capped) AS (
    SELECT 0, f.down_ds, f.down_jobs, f.up_ds, f.up_jobs,
           f.down_ds, f.down_jobs, f.up_ds, f.up_jobs, 0, false
    FROM start s CROSS JOIN LATERAL (SELECT
        CASE WHEN s.kind = 'dataset' AND %(down)s THEN ARRAY[s.id] ELSE ARRAY[]::uuid[] END,
        CASE WHEN s.kind = 'job' AND %(down)s THEN ARRAY[s.id] ELSE ARRAY[]::uuid[] END,
        CASE WHEN s.kind = 'dataset' AND %(up)s THEN ARRAY[s.id] ELSE ARRAY[]::uuid[] END,
        CASE WHEN s.kind = 'job' AND %(up)s THEN ARRAY[s.id] ELSE ARRAY[]::uuid[] END
    ) AS f(down_ds, down_jobs, up_ds, up_jobs)
  UNION ALL
    SELECT w.depth + 1, n.down_ds, n.down_jobs, n.up_ds, n.up_jobs,
           w.seen_down_ds || n.down_ds, w.seen_down_jobs || n.down_jobs,
           w.seen_up_ds || n.up_ds, w.seen_up_jobs || n.up_jobs,
           w.visited + cardinality(raw.down_ds) + cardinality(raw.down_jobs)
               + cardinality(raw.up_ds) + cardinality(raw.up_jobs),
           greatest(cardinality(raw.down_ds), cardinality(raw.down_jobs),
                    cardinality(raw.up_ds), cardinality(raw.up_jobs))
               >= %(visit_limit)s - w.visited
    FROM bfs w
    CROSS JOIN LATERAL (SELECT
        -- downstream: the datasets the frontier's jobs write
        ARRAY({down_datasets} LIMIT %(visit_limit)s - w.visited),
        -- downstream: the jobs that read the frontier's datasets
        ARRAY({down_jobs} LIMIT %(visit_limit)s - w.visited),
        -- upstream: the datasets the frontier's jobs read
        ARRAY({up_datasets} LIMIT %(visit_limit)s - w.visited),
        -- upstream: the jobs that write the frontier's datasets
        ARRAY({up_jobs} LIMIT %(visit_limit)s - w.visited)
        OFFSET 0  -- computed once per level (each column is used twice below)
    ) AS raw(down_ds, down_jobs, up_ds, up_jobs)
    CROSS JOIN LATERAL (SELECT
        ARRAY(SELECT unnest(raw.down_ds) EXCEPT SELECT unnest(w.seen_down_ds)),
        ARRAY(SELECT unnest(raw.down_jobs) EXCEPT SELECT unnest(w.seen_down_jobs)),
        ARRAY(SELECT unnest(raw.up_ds) EXCEPT SELECT unnest(w.seen_up_ds)),
        ARRAY(SELECT unnest(raw.up_jobs) EXCEPT SELECT unnest(w.seen_up_jobs))
        OFFSET 0  -- computed once per level (each column is used twice above)
    ) AS n(down_ds, down_jobs, up_ds, up_jobs)
    WHERE w.depth < %(depth)s AND NOT w.capped
      AND cardinality(w.down_ds) + cardinality(w.down_jobs) + cardinality(w.up_ds)
          + cardinality(w.up_jobs) > 0
      AND cardinality(w.seen_down_ds) + cardinality(w.seen_down_jobs)
          + cardinality(w.seen_up_ds) + cardinality(w.seen_up_jobs) <= %(max_nodes)s
),
reached AS (
    SELECT kind, id, min(depth) AS depth FROM (
        SELECT 'dataset' AS kind, unnest(down_ds || up_ds) AS id, depth FROM bfs
        UNION ALL
        SELECT 'job', unnest(down_jobs || up_jobs), depth FROM bfs
    ) r GROUP BY kind, id
),
kept AS (SELECT kind, id, depth FROM reached ORDER BY depth, kind, id LIMIT %(max_nodes)s),
-- the walk stopped at the node limit with nodes still to expand, short of `depth`, or
-- at the visit limit
cut AS (
    SELECT capped OR (depth < %(depth)s AND cardinality(down_ds) + cardinality(down_jobs)
           + cardinality(up_ds) + cardinality(up_jobs) > 0) AS cut
    FROM bfs ORDER BY depth DESC LIMIT 1
)
SELECT k.kind, k.id, k.depth, coalesce(j.namespace, {dataset_namespace}),
       coalesce(j.name, {dataset_name}),
       (SELECT count(*) FROM reached), (SELECT cut FROM cut), coalesce(j.first_seen, d.first_seen),
       {node_columns}
FROM kept k
LEFT JOIN readmodel.jobs j ON k.kind = 'job' AND j.id = k.id
LEFT JOIN readmodel.datasets d ON k.kind = 'dataset' AND d.id = k.id
{node_joins}
ORDER BY k.depth, k.kind, k.id
"""
# The start node (a dataset id absorbed by a merge starts at the dataset it was merged
# into); restricted, only when visible (the `{visible}` condition on `s0`).
START = """
    -- (a dataset id absorbed by a merge starts at the dataset it was merged into)
    SELECT %(kind)s::text AS kind, coalesce(
        (SELECT merged_into FROM readmodel.datasets WHERE id = %(id)s AND %(kind)s = 'dataset'),
        %(id)s::uuid) AS id
"""
START_VISIBLE = "SELECT * FROM ({start}) s0 WHERE {visible}"
# Restricted, the name a dataset node shows: its display name among its readable ones.
SHOWN = visibility.visible_display_name("d.id")
# What a graph draws a job node with: its type, integration, owners (its `ownership`
# facet, as JSON: "who do I call" without a call per job) and latest run (id, state,
# state_time, started_at, ended_at, duration), now or as of `%(as_of)s` (a latest run in
# the state it had then). A dataset node's details come from dataset_nodes.py, for all the
# graph's datasets in one statement.
JOB_COLUMNS = f"j.job_type, j.processing_type, j.integration, {owners('j.facets')}"
# Then its lateness, judged now (also as of T), by the job page's own fragment.
NODE_COLUMNS = f"""{JOB_COLUMNS},
       r.id, r.state, r.state_time, {started("r")}, r.ended_at, {duration("r")},
       {lateness.of_job("j.id")}"""
NODE_JOINS = "LEFT JOIN readmodel.runs r ON r.id = j.latest_run_id"
NODE_COLUMNS_AS_OF = f"""{JOB_COLUMNS},
       {asof.RUN_AT_COLUMNS}, {lateness.of_job("j.id")}"""
NODE_JOINS_AS_OF = asof.latest_run_at_joins("j.id")


# Each statement is built once with visibility marks and given for both kinds of access
# by visibility.for_access (a restricted one binds its namespaces as `%(readable)s`).


def _job_datasets(jobs: str, direction: str, rule: str) -> str:
    """The datasets the jobs in array `jobs` read or wrote at `%(as_of)s` (asof.NOW: now)
    by `rule` (asof.window; cumulative: in any run of the window, once each); restricted,
    the visible ones (a hidden dataset is cut: the walk goes no further through it)."""
    edges = asof.job_edges_at("j.id", direction, rule=rule)
    where = visibility.mark("dataset", "dn.dataset_id", where=True)
    return f"""SELECT {"DISTINCT " if rule == "cumulative" else ""}dn.dataset_id
              FROM unnest({jobs}) AS j(id)
              CROSS JOIN LATERAL {edges} e
              JOIN readmodel.dataset_names dn
                ON dn.namespace = e.namespace AND dn.name = e.name{where}"""


def _dataset_jobs(datasets: str, direction: str, rule: str, now: bool) -> str:
    """The jobs that read or wrote the datasets in array `datasets` at `%(as_of)s` (`now`:
    at asof.NOW, by the fold's flag); restricted, the visible ones."""
    return f"""SELECT e.job_id
              FROM readmodel.dataset_names dn
              JOIN readmodel.job_edges e
                ON e.namespace = dn.namespace AND e.name = dn.name
              WHERE dn.dataset_id = ANY({datasets}) AND e.direction = '{direction}'
                AND {asof.edge_held(rule=rule, now=now)}{visibility.mark("job_id", "e.job_id")}"""


# From a run (its job's node, kind 'job'): the first hop downstream goes to the datasets
# it wrote or attempted (`%(run_outputs)s`) instead of all its job's outputs.
RUN_OUTPUTS = """SELECT unnest(%(run_outputs)s::uuid[]) WHERE w.depth = 0
              UNION ALL
              SELECT * FROM ({job_datasets}) x WHERE w.depth > 0"""


def _walk(as_of: bool, rule: str, from_run: bool, restricted: bool = False) -> str:
    down_datasets = _job_datasets("w.down_jobs", "output", rule)
    if from_run:
        down_datasets = RUN_OUTPUTS.format(job_datasets=down_datasets)
    start = START
    dataset_namespace, dataset_name = "d.namespace", "d.name"
    node_joins = NODE_JOINS_AS_OF if as_of else NODE_JOINS
    if restricted:
        # a hidden start node is absent, as an unknown one: the walk finds nothing (404);
        # a dataset shows a readable name (a display name among its readable ones)
        visible = (
            f"(s0.kind = 'job'{visibility.mark('job_id', 's0.id')}) OR (s0.kind = "
            f"'dataset'{visibility.mark('dataset', 's0.id')})"
        )
        start = START_VISIBLE.format(start=START, visible=visible)
        dataset_namespace, dataset_name = "vd.shown[1]", "vd.shown[2]"
        node_joins += f"\nLEFT JOIN LATERAL (SELECT {SHOWN}) vd(shown) ON true"
    walk = LINEAGE_WALK.format(
        start=start,
        dataset_namespace=dataset_namespace,
        dataset_name=dataset_name,
        down_datasets=down_datasets,
        down_jobs=_dataset_jobs("w.down_ds", "input", rule, not as_of),
        up_datasets=_job_datasets("w.up_jobs", "input", rule),
        up_jobs=_dataset_jobs("w.up_ds", "output", rule, not as_of),
        node_columns=NODE_COLUMNS_AS_OF if as_of else NODE_COLUMNS,
        node_joins=node_joins,
    )
    return visibility.for_access(walk, restricted)


# The walks by (as_of given, rule, from a run, restricted): they differ in the job nodes'
# latest runs (now, or then), the edges that count (asof.window) and, restricted to an
# Access's namespaces, in the nodes they may pass through (a hidden node is cut).
WALKS = {
    key: _walk(*key)
    for key in itertools.product((False, True), asof.RULES, (False, True), (False, True))
}
LINEAGE = WALKS[(False, "latest", False, False)]

# The edges between the kept nodes and, for each kept node, how many of its neighbours
# were not kept, by edge direction (`beyond`), as a second statement: bound as arrays
# (constants to the planner, hashed and counted right), where a join against the CTE
# above would be planned with a guessed row count as a nested loop over every pair.
# Rows: ('edge', direction, job, dataset, lifecycle, NULL, first_seen, last_seen,
# last_run, its state) for each edge (with the lifecycle change the job last reported for
# an output: DROP, CREATE, ...; when the job first named the dataset that way, when it
# last did in the run that holds the edge, that run and its state now); ('job' or
# 'dataset', direction, job or NULL, dataset or NULL, NULL, count, NULL...) for the
# neighbours a kept job or dataset has along its edges of that direction that are not kept.
# Now, the runs' states are read here, each run once, not in a round trip of their own. As
# of T they come after (asof.run_states_at; the state column NULL): read here, they made
# the statement, planned for each request (its arrays are constants to the planner), plan
# every monthly partition of the log three times; now PostgreSQL mostly keeps its plan.
LATEST_LIFECYCLE = "(array_agg(e.lifecycle_state ORDER BY e.lifecycle_time DESC NULLS LAST))[1]"
LINEAGE_LINKS = """
WITH job_side AS ({job_side}),
dataset_side AS ({dataset_side}),
edges AS MATERIALIZED (
    SELECT direction, job_id, dataset_id, lifecycle, first_seen, last_seen, last_run
    FROM job_side
    WHERE dataset_id = ANY(%(datasets)s::uuid[])
    ORDER BY job_id, dataset_id, direction
    LIMIT %(max_edges)s){states}
(SELECT 'edge', e.direction, e.job_id, e.dataset_id, e.lifecycle, NULL::bigint, e.first_seen,
        e.last_seen, e.last_run, {state}
 FROM edges e{states_join}
 ORDER BY e.job_id, e.dataset_id, e.direction)
UNION ALL
SELECT 'job', direction, job_id, NULL, NULL, count(*), NULL, NULL, NULL, NULL FROM job_side
WHERE NOT dataset_id = ANY(%(datasets)s::uuid[]) GROUP BY direction, job_id
UNION ALL
SELECT 'dataset', direction, NULL, dataset_id, NULL, count(*), NULL, NULL, NULL, NULL
FROM dataset_side
WHERE NOT job_id = ANY(%(jobs)s::uuid[]) GROUP BY direction, dataset_id
"""
# The runs' states now, with the edges (LINEAGE_LINKS).
STATES_NOW = {
    "states": f""",
states AS MATERIALIZED (
    SELECT lr.run_id, {asof.STATE_AT} AS state
    FROM readmodel.lineage_runs lr{asof.RUN_AT_JOIN}
    WHERE lr.run_id = ANY(ARRAY(SELECT DISTINCT last_run FROM edges)))""",
    "state": "st.state",
    "states_join": " LEFT JOIN states st ON st.run_id = e.last_run",
}
STATES_AFTER = {"states": "", "state": "NULL::text", "states_join": ""}
# Each kept job's datasets at `%(as_of)s` (asof.NOW: now), one row per (direction, dataset).
JOB_SIDE = """
SELECT e.direction, j.id AS job_id, n.dataset_id, {lifecycle} AS lifecycle,
       min((SELECT min(x.first_seen) FROM {first_seen} x
            WHERE x.job_id = j.id AND x.direction = e.direction
              AND x.namespace = e.namespace AND x.name = e.name)) AS first_seen,
       max(e.last_seen) AS last_seen,
       (array_agg(e.run_id ORDER BY e.run_id IS NULL, e.last_seen DESC))[1] AS last_run
FROM unnest(%(jobs)s::uuid[]) AS j(id)
CROSS JOIN LATERAL (
    SELECT 'input' AS direction, i.* FROM {inputs} i
  UNION ALL
    SELECT 'output', o.* FROM {outputs} o
) e
JOIN readmodel.dataset_names n ON n.namespace = e.namespace AND n.name = e.name{visible}
GROUP BY 1, 2, 3"""
# Each kept dataset's jobs that held an edge to it then, one row per (direction, job).
DATASET_SIDE = """
SELECT DISTINCT e.direction, e.job_id, dn.dataset_id
FROM readmodel.dataset_names dn
JOIN readmodel.job_edges e ON e.namespace = dn.namespace AND e.name = dn.name
WHERE dn.dataset_id = ANY(%(datasets)s::uuid[]) AND {held}{visible}"""


def _dataset_side(rule: str, now: bool) -> str:
    return DATASET_SIDE.format(
        held=asof.edge_held(rule=rule, now=now), visible=visibility.mark("job_id", "e.job_id")
    )


def _links(now: bool, rule: str, restricted: bool) -> str:
    # restricted, a node's `beyond` counts its visible neighbours alone: what expanding it
    # would add
    job_side = JOB_SIDE.format(
        # its run and static rows (job_edges' key ends with the source)
        first_seen=asof.key_probe(
            "readmodel.job_edges",
            "x",
            asof.JOB_EDGE_KEY,
            "j.id, e.direction, e.namespace, e.name",
            rows=2,
        ),
        lifecycle=LATEST_LIFECYCLE,
        inputs=asof.job_edges_at("j.id", "input", rule=rule),
        outputs=asof.job_edges_at("j.id", "output", rule=rule),
        visible=visibility.mark("dataset", "n.dataset_id", where=True),
    )
    links = LINEAGE_LINKS.format(
        job_side=job_side,
        dataset_side=_dataset_side(rule, now),
        **(STATES_NOW if now else STATES_AFTER),
    )
    return visibility.for_access(links, restricted)


# By (now: without `as_of`, rule (asof.window), restricted).
LINEAGE_EDGES = {
    key: _links(*key) for key in itertools.product((False, True), asof.RULES, (False, True))
}
# Rows (direction, dataset, count): the jobs of each dataset in `%(datasets)s` that are not
# in `%(jobs)s`, by direction (the `beyond` of a graph that draws other nodes than jobs),
# by restricted (then the visible jobs alone).
DATASETS_BEYOND = visibility.both(f"""
SELECT direction, dataset_id, count(*) FROM ({_dataset_side("latest", now=True)}) s
WHERE NOT job_id = ANY(%(jobs)s::uuid[]) GROUP BY direction, dataset_id""")

Direction = Annotated[
    Literal["upstream", "downstream", "both"],
    Meta(description="Follow the data flow backwards, forwards, or both ways."),
]
JobHops = Annotated[
    int,
    Meta(
        ge=0,
        le=MAX_DEPTH,
        description="How many jobs deep: the graph holds the nodes reached through at most "
        "`depth` jobs other than the start, so it always ends on datasets (a job's inputs "
        "and outputs). From a dataset, `depth` N reaches nodes up to 2N hops away (depth 1: "
        "its readers and writers and their datasets); from a job, 2N+1 (depth 0: the job "
        "and its datasets).",
    ),
]


NODE_PATTERN = (
    "^(dataset|job):[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)


class LineageQuery(asof.AsOfViewed, frozen=True):
    node: Annotated[
        str,
        Meta(
            pattern=NODE_PATTERN,
            description="The start node: `dataset:<id>` or `job:<id>`.",
        ),
    ]
    direction: Direction = "both"
    depth: JobHops = DEFAULT_DEPTH
    max_nodes: Annotated[
        int, Meta(ge=1, le=NODE_LIMIT, description="Node limit; past it `truncated` is set.")
    ] = NODE_LIMIT


# How every graph answer treats what its reader may not see (the `/lineage`, `/impact`,
# `/lineage/diff`, column lineage and `/lineage/runs` descriptions end with it).
HIDDEN_NODES = (
    " With authorization configured, a graph is computed over the namespaces its reader "
    "may read, and a hidden node is cut: a job of a hidden namespace, a run of such a job "
    "and a dataset without a name in a readable namespace are absent with their edges, the "
    "walk never passes through them (nothing reachable only through one is shown), and "
    "counts (`beyond`, `name_count`, `job_count`) and `truncated` count only what is "
    "shown. A dataset is shown under a readable name; a freshness `run` of a hidden job has "
    "a null `job`, a stale reason's hidden dataset is null. A hidden start node answers "
    "404, as an unknown one does."
)

LINEAGE_OP = Operation(
    "GET",
    "/lineage",
    "getLineage",
    "The lineage graph around a job or dataset",
    models_lineage.LineageGraph,
    tag="lineage",
    # (no position ETag: its nodes carry lateness, which the clock moves)
    query=LineageQuery,
    expensive=True,
    not_found=True,
    description="Jobs and datasets within `depth` jobs of `node`, following the data flow "
    "upstream, downstream or both, with the edges between them (dataset -> job: the job "
    "reads it; job -> dataset: the job writes it): the graph ends on datasets. Node keys "
    "are `dataset:<id>` and `job:<id>`; a node's `depth` is its distance in hops, and its "
    "`beyond` says how many of its neighbours, upstream and downstream, the answer leaves "
    "out (what expanding it would add). Past `max_nodes` nodes (default and most 1,000) "
    f"the nearest are kept and `truncated` is true; so it is when the walk has looked at "
    f"{limits.VISIT_LIMIT:,} edges (it stops there) or the nodes have more than "
    f"{limits.EDGE_LIMIT:,} edges between them (the first are kept). Dataset nodes carry "
    "their freshness and owners, job nodes their latest run and owners. With `as_of`, the graph"
    " as it was then: each job's edges are those of its latest run started at or before `as_of`"
    " (and its static lineage declared by then), names and freshness those of then; a node "
    "first seen after `as_of` answers 404. Without `as_of`, as of now. `view=cumulative` (and "
    "`since`): each job's edges of every run it started in the window instead. A job whose run "
    "failed keeps its edges: the failure shows in its latest run and in its outputs' freshness."
    + HIDDEN_NODES,
)
resource = Resource()
LineageNode = models_lineage.JobNode | models_lineage.DatasetNode
_owners = msgspec.json.Decoder(list[models.Owner])


def _key(kind: str, id_: uuid.UUID) -> str:
    return f"{kind}:{id_}"


def node(
    r: Any, beyond: models_lineage.Beyond, datasets: Mapping[uuid.UUID, dataset_nodes.Details]
) -> LineageNode:
    """A graph node from a row of the walk, a dataset with its details from `datasets`
    (dataset_nodes.of)."""
    if r[0] == "job":
        latest = None
        if r[12] is not None:
            latest = models.LatestRun(
                id=r[12],
                state=r[13],
                state_time=r[14],
                started_at=r[15],
                ended_at=r[16],
                duration_seconds=r[17],
            )
        return models_lineage.JobNode(
            key=_key("job", r[1]),
            id=r[1],
            namespace=r[3],
            name=r[4],
            depth=r[2],
            job_type=r[8],
            processing_type=r[9],
            integration=r[10],
            owners=_owners.decode(r[11]),
            latest_run=latest,
            lateness=lateness.decode_lateness(r[18]),
            beyond=beyond,
        )
    return dataset_node(r[1], r[2], r[3], r[4], beyond, datasets[r[1]])


def dataset_node(
    id_: uuid.UUID,
    depth: int,
    namespace: str,
    name: str,
    beyond: models_lineage.Beyond,
    details: dataset_nodes.Details,
) -> models_lineage.DatasetNode:
    """A dataset node: under its display name (as of a moment, then's, when it had one)."""
    fresh = details.freshness
    return models_lineage.DatasetNode(
        key=_key("dataset", id_),
        id=id_,
        namespace=details.namespace or namespace,
        name=details.name or name,
        depth=depth,
        name_count=max(details.name_count, 1),
        dataset_type=details.dataset_type,
        last_write_at=fresh.last_write.at if fresh.last_write else None,
        lifecycle=details.lifecycle,
        owners=details.owners,
        freshness=fresh,
        next_write=details.next_write,
        beyond=beyond,
    )


def parse_node(node: str, kinds: str = "`dataset:<uuid>` or `job:<uuid>`") -> tuple[str, uuid.UUID]:
    """A `node` parameter (its pattern checked) as (kind, id)."""
    kind, _, id_text = node.partition(":")
    try:
        return kind, uuid.UUID(id_text)
    except ValueError:
        reason = f"not {kinds}"
        raise ProblemError(
            400,
            f"query parameter `node` is invalid: {reason}",
            invalid_params=[InvalidParam(name="node", reason=reason)],
        ) from None


def hops(kind: str, depth: int) -> int:
    """The hops of a walk `depth` jobs deep from a `kind` node: it ends on datasets."""
    return 2 * depth + (kind == "job")


class Walk(msgspec.Struct):
    """What a walk found (rows of LINEAGE_WALK, nearest first), the links between its nodes
    (rows of LINEAGE_EDGES), its datasets' details (dataset_nodes: all of them, or those
    the caller asked for) and the state then of each run holding an edge."""

    found: list[Any]
    links: list[Any]
    details: dict[uuid.UUID, dataset_nodes.Details]
    run_states: dict[uuid.UUID, str] = {}


async def walk_rows(
    conn: AsyncConnection[Any],
    kind: str,
    start: uuid.UUID,
    *,
    up: bool,
    down: bool,
    depth: int,
    max_nodes: int,
    as_of: dt.datetime | None,
    run_outputs: list[uuid.UUID] | None = None,
    details: bool = True,
    window: tuple[str, dt.datetime | None] = ("latest", None),
    access: Access = EVERYTHING,
    also: Collection[uuid.UUID] = (),
) -> Walk:
    """The walk around job or dataset `start`, `depth` jobs deep (404 when unknown, or
    first seen after `as_of`). `run_outputs`: the walk starts at job `start` as a run of
    it that wrote (or attempted) these datasets: its first hop downstream is to them
    alone. `details`: also the details of every dataset (else none: dataset_nodes.of),
    and of the datasets `also` (read with them: one statement and one walk upstream).
    Without `as_of` the edges are those of now, the same as of asof.NOW. `window`: the
    edges' rule and its window's start (asof.window). `access`: the walk passes only
    through the nodes it may see (a hidden start node is a 404, as an unknown one)."""
    how = _How(kind, start, up, down, depth, max_nodes, window, access, run_outputs)
    found = _checked(how, as_of, await rows(conn, *how.walk(as_of)))
    datasets = [r[1] for r in found if r[0] == "dataset"] if details else []
    if details:
        datasets += sorted(set(also) - set(datasets))
    # the edges and the datasets' details in one round trip
    async with conn.pipeline(), conn.cursor() as links_at, conn.cursor() as details_at:
        await links_at.execute(*how.links(as_of, found))
        if datasets:
            await details_at.execute(
                dataset_nodes.statement(as_of, access.restricted),
                {"datasets": datasets, "as_of": as_of} | how.readable,
            )
        links = await links_at.fetchall()
        details_found = await details_at.fetchall() if datasets else []
    found_details = {}
    if datasets:
        found_details = dataset_nodes.spread(dataset_nodes.build(details_found), access)
    states = {}
    if as_of is not None:  # (now, they came with the edges: LINEAGE_LINKS)
        states = await asof.run_states_at(conn, last_runs(links), as_of)
    return how.walked(found, links, found_details, states)


def last_runs(links: list[Any]) -> set[uuid.UUID]:
    """The runs holding the edges of `links` (rows of LINEAGE_EDGES)."""
    return {x[8] for x in links if x[0] == "edge" and x[8] is not None}


async def walks_at(
    conn: AsyncConnection[Any],
    kind: str,
    start: uuid.UUID,
    moments: list[dt.datetime],
    *,
    up: bool,
    down: bool,
    depth: int,
    max_nodes: int,
    window: tuple[str, dt.datetime | None] = ("latest", None),
    access: Access = EVERYTHING,
) -> list[Walk | ProblemError]:
    """walk_rows as of each of `moments` without the datasets' details, the walks' statements
    in one round trip and their edges' in another: each a Walk, or the 404 it answers."""
    how = _How(kind, start, up, down, depth, max_nodes, window, access, None)
    async with conn.pipeline():
        cursors = [conn.cursor() for _ in moments]
        for cursor, moment in zip(cursors, moments, strict=True):
            await cursor.execute(*how.walk(moment))
        walked: list[list[Any] | ProblemError] = []
        for cursor, moment in zip(cursors, moments, strict=True):
            try:
                walked.append(_checked(how, moment, await cursor.fetchall()))
            except ProblemError as problem:
                walked.append(problem)
    async with conn.pipeline():
        for cursor, moment, found in zip(cursors, moments, walked, strict=True):
            if not isinstance(found, ProblemError):
                await cursor.execute(*how.links(moment, found))
        links = [
            [] if isinstance(found, ProblemError) else await c.fetchall()
            for c, found in zip(cursors, walked, strict=True)
        ]
    walks: list[Walk | ProblemError] = []
    for found, moment, edges in zip(walked, moments, links, strict=True):
        if isinstance(found, ProblemError):
            walks.append(found)
        else:  # (as of a moment: the states after the edges, LINEAGE_LINKS)
            states = await asof.run_states_at(conn, last_runs(edges), moment)
            walks.append(how.walked(found, edges, {}, states))
    return walks


class _How(msgspec.Struct, frozen=True):
    """A walk's start and bounds, as walk_rows takes them, and its statements as of a moment
    (None: now, as of asof.NOW)."""

    kind: str
    start: uuid.UUID
    up: bool
    down: bool
    depth: int
    max_nodes: int
    window: tuple[str, dt.datetime | None]
    access: Access
    run_outputs: list[uuid.UUID] | None

    @property
    def readable(self) -> dict[str, Any]:
        return self.access.sql_params() if self.access.restricted else {}

    def walk(self, as_of: dt.datetime | None) -> tuple[str, dict[str, Any]]:
        """The walk's statement and arguments."""
        rule, since = self.window
        args = {
            "down": self.down,
            "up": self.up,
            "kind": self.kind,
            "id": self.start,
            "depth": hops(self.kind, self.depth),
            "max_nodes": self.max_nodes,
            "visit_limit": limits.VISIT_LIMIT,
            "as_of": asof.NOW if as_of is None else as_of,
            "since": since,
            "run_outputs": self.run_outputs,
        }
        key = (as_of is not None, rule, self.run_outputs is not None, self.access.restricted)
        return WALKS[key], args | self.readable

    def links(self, as_of: dt.datetime | None, found: list[Any]) -> tuple[str, dict[str, Any]]:
        """The statement and arguments of the edges between the nodes `found`."""
        rule, since = self.window
        args = {
            "jobs": [r[1] for r in found if r[0] == "job"],
            "datasets": [r[1] for r in found if r[0] == "dataset"],
            "as_of": asof.NOW if as_of is None else as_of,
            "since": since,
            "max_edges": limits.EDGE_LIMIT + 1,
        }
        return LINEAGE_EDGES[(as_of is None, rule, self.access.restricted)], args | self.readable

    def walked(
        self,
        found: list[Any],
        links: list[Any],
        details: dict[uuid.UUID, dataset_nodes.Details],
        states: dict[uuid.UUID, tuple[str, dt.datetime | None]],
    ) -> Walk:
        if self.run_outputs is not None:  # the run's job: only the run's own outputs
            wrote = set(self.run_outputs)
            links = [
                x
                for x in links
                if x[0] != "edge" or x[2] != self.start or x[1] != "output" or x[3] in wrote
            ]
        run_states = {x[8]: x[9] for x in links if x[0] == "edge" and x[9] is not None}
        run_states |= {run: state for run, (state, _) in states.items()}
        return Walk(found=found, links=links, details=details, run_states=run_states)


def _checked(how: _How, as_of: dt.datetime | None, found: list[Any]) -> list[Any]:
    """The walk's rows; 404 when the start node is unknown, or first seen after `as_of`."""
    if not found or found[0][3] is None:  # the start node: no read model knows it
        raise not_found(how.kind, how.start)
    asof.check_seen(how.kind, how.start, found[0][7], as_of)
    return found


def node_key(r: Any) -> str:
    """The key of the node of a row of the walk."""
    return _key(r[0], r[1])


def node_refs(walked: Walk) -> dict[str, models_lineage.NodeRef]:
    """Each node of a walk as an edge names it, by key: under the name its node shows."""
    refs = {}
    for r in walked.found:
        namespace, name = r[3], r[4]
        details = walked.details.get(r[1]) if r[0] == "dataset" else None
        if details is not None:
            namespace, name = details.namespace or namespace, details.name or name
        key = node_key(r)
        refs[key] = models_lineage.NodeRef(
            key=key, type=r[0], id=r[1], namespace=namespace, name=name
        )
    return refs


def graph_of(walked: Walk, keep: Collection[str] | None = None) -> models_lineage.LineageGraph:
    """The graph of a walk: its nodes (those in `keep` alone, when given), with what lies
    beyond each, and all its edges."""
    # Neighbours left out, by node and side: upstream of a dataset are the jobs writing
    # it ('output' edges), of a job the datasets it reads ('input' edges).
    left_out: dict[tuple[str, Any, str], int] = {}
    edges = []
    refs = node_refs(walked)
    for what, direction, job, ds, lifecycle, count, first_seen, last_seen, run, _ in walked.links:
        if what == "edge":
            job_ref = refs[_key("job", job)]
            ends = (refs[_key("dataset", ds)], job_ref)
            if direction == "output":
                ends = ends[::-1]
            last_run = None
            if run is not None:
                last_run = models.RunRef(
                    id=run,
                    job=models.JobRef(id=job, namespace=job_ref.namespace, name=job_ref.name),
                    state=walked.run_states.get(run),  # type: ignore[arg-type]
                )
            edges.append(
                models_lineage.LineageEdge(
                    from_=ends[0],
                    to=ends[1],
                    lifecycle_state=lifecycle if direction == "output" else None,
                    first_seen=first_seen,
                    last_seen=last_seen,
                    last_run=last_run,
                )
            )
        elif what == "job":
            side = "up" if direction == "input" else "down"
            left_out[("job", job, side)] = count
        else:
            side = "up" if direction == "output" else "down"
            left_out[("dataset", ds, side)] = count
    too_many_edges = len(edges) > limits.EDGE_LIMIT
    edges.sort(key=lambda e: (e.from_.key, e.to.key))
    del edges[limits.EDGE_LIMIT :]
    nodes = [
        node(
            r,
            models_lineage.Beyond(
                upstream=left_out.get((r[0], r[1], "up"), 0),
                downstream=left_out.get((r[0], r[1], "down"), 0),
            ),
            walked.details,
        )
        for r in walked.found
        if keep is None or node_key(r) in keep
    ]
    truncated = too_many_edges
    if walked.found:
        reached, cut = walked.found[0][5], walked.found[0][6]
        truncated = truncated or reached > len(walked.found) or bool(cut)
    return models_lineage.LineageGraph(nodes=nodes, edges=edges, truncated=truncated)


def bounds(query: Any) -> dict[str, Any]:
    """walk_rows's `depth`, `max_nodes` and `window` as a graph read's query gives them (its
    `depth`, `max_nodes`, `view` and `since`)."""
    return {
        "depth": query.depth,
        "max_nodes": query.max_nodes,
        "window": asof.window(query.view, query.since),
    }


async def walk(
    conn: AsyncConnection[Any], kind: str, start: uuid.UUID, **how: Any
) -> models_lineage.LineageGraph:
    """The graph around job or dataset `start`: walk_rows (`how`: its keywords), then
    graph_of."""
    return graph_of(await walk_rows(conn, kind, start, **how))


@resource.add(LINEAGE_OP)
async def get_lineage(request: Request) -> Response:
    query: LineageQuery = LINEAGE_OP.parse_query(request)
    kind, start = parse_node(query.node)
    access = await access_of(request)
    async with connection(request) as conn:
        graph = await walk(
            conn,
            kind,
            start,
            up=query.direction != "downstream",
            down=query.direction != "upstream",
            as_of=query.as_of,
            access=access,
            **bounds(query),
        )
    return json_response(request, graph)
