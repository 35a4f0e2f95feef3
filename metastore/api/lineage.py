"""GET /lineage (the job/dataset graph around a node) and /datasets/{id}/column-lineage.

Both walk the graph in PostgreSQL: a breadth-first recursive CTE over the edges of
readmodel.job_edges (or column_lineage), resolving edge names to dataset ids through
readmodel.dataset_names. /lineage walks level by level with the set of nodes seen (each
node expanded once), stops past `max_nodes`, then reads the edges between the nodes it
kept (two statements, one connection). Both are capped, so a dense graph answers
`truncated` instead of growing without bound.
The queries are named constants so a time-travel variant (`as_of`, over run_edges and
lineage_runs) can sit beside them.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta
from starlette.requests import Request
from starlette.responses import Response

from metastore.api import asof, models, params
from metastore.api.db import connection, not_found, rows
from metastore.api.operation import Operation, Resource
from metastore.api.responses import json_response
from metastore.api.sqlparts import (
    dataset_type,
    duration,
    last_write_at,
    last_write_at_as_of,
    lifecycle_as_of,
    lifecycle_state,
    name_count,
    started,
)
from metastore.problems import InvalidParam, ProblemError

DEFAULT_DEPTH = 3
MAX_DEPTH = 20
NODE_LIMIT = 1000
# Column lineage walks edges per path (column graphs are small); its walk is capped at
# this many rows per edge kept, so a dense one answers `truncated` instead of running on.
ROW_CAP_PER_NODE = 20

# Breadth-first, one row per level: the frontier of each walk (downstream, upstream) and
# the nodes each has seen, so a node is expanded once per walk however many paths reach
# it (a recursive CTE over single nodes repeats a node once per path length, which
# explodes on dense or cyclic graphs). The walk stops past `max_nodes` nodes.
# Rows: (type, id, depth, namespace, name, reached, cut) for each node kept, nearest first.
LINEAGE_WALK = """
WITH RECURSIVE start AS (
    -- (a dataset id absorbed by a merge starts at the dataset it was merged into)
    SELECT %(kind)s::text AS kind, coalesce(
        (SELECT merged_into FROM readmodel.datasets WHERE id = %(id)s AND %(kind)s = 'dataset'),
        %(id)s::uuid) AS id
),
bfs(depth, down_ds, down_jobs, up_ds, up_jobs, seen_down_ds, seen_down_jobs, seen_up_ds,
    seen_up_jobs) AS (
    SELECT 0, f.down_ds, f.down_jobs, f.up_ds, f.up_jobs,
           f.down_ds, f.down_jobs, f.up_ds, f.up_jobs
    FROM start s CROSS JOIN LATERAL (SELECT
        CASE WHEN s.kind = 'dataset' AND %(down)s THEN ARRAY[s.id] ELSE ARRAY[]::uuid[] END,
        CASE WHEN s.kind = 'job' AND %(down)s THEN ARRAY[s.id] ELSE ARRAY[]::uuid[] END,
        CASE WHEN s.kind = 'dataset' AND %(up)s THEN ARRAY[s.id] ELSE ARRAY[]::uuid[] END,
        CASE WHEN s.kind = 'job' AND %(up)s THEN ARRAY[s.id] ELSE ARRAY[]::uuid[] END
    ) AS f(down_ds, down_jobs, up_ds, up_jobs)
  UNION ALL
    SELECT w.depth + 1, n.down_ds, n.down_jobs, n.up_ds, n.up_jobs,
           w.seen_down_ds || n.down_ds, w.seen_down_jobs || n.down_jobs,
           w.seen_up_ds || n.up_ds, w.seen_up_jobs || n.up_jobs
    FROM bfs w
    CROSS JOIN LATERAL (SELECT
        -- downstream: the datasets the frontier's jobs write
        ARRAY({down_datasets}
              EXCEPT SELECT unnest(w.seen_down_ds)),
        -- downstream: the jobs that read the frontier's datasets
        ARRAY({down_jobs}
              EXCEPT SELECT unnest(w.seen_down_jobs)),
        -- upstream: the datasets the frontier's jobs read
        ARRAY({up_datasets}
              EXCEPT SELECT unnest(w.seen_up_ds)),
        -- upstream: the jobs that write the frontier's datasets
        ARRAY({up_jobs}
              EXCEPT SELECT unnest(w.seen_up_jobs))
        OFFSET 0  -- computed once per level (each column is used twice above)
    ) AS n(down_ds, down_jobs, up_ds, up_jobs)
    WHERE w.depth < %(depth)s
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
-- the walk stopped at the node limit with nodes still to expand, short of `depth`
cut AS (
    SELECT depth < %(depth)s AND cardinality(down_ds) + cardinality(down_jobs)
           + cardinality(up_ds) + cardinality(up_jobs) > 0 AS cut
    FROM bfs ORDER BY depth DESC LIMIT 1
)
SELECT k.kind, k.id, k.depth, coalesce(j.namespace, d.namespace), coalesce(j.name, d.name),
       (SELECT count(*) FROM reached), (SELECT cut FROM cut), coalesce(j.first_seen, d.first_seen),
       {node_columns}
FROM kept k
LEFT JOIN readmodel.jobs j ON k.kind = 'job' AND j.id = k.id
LEFT JOIN readmodel.datasets d ON k.kind = 'dataset' AND d.id = k.id
{node_joins}
ORDER BY k.depth, k.kind, k.id
"""
# What a graph draws a node with: a job's type, integration and latest run (id, state,
# state_time, started_at, ended_at, duration); a dataset's name count, type, last write
# and lifecycle state. Now, or as of `%(as_of)s` (a latest run in the state it had then).
JOB_COLUMNS = "j.job_type, j.processing_type, j.integration"
NODE_COLUMNS = f"""{JOB_COLUMNS},
       r.id, r.state, r.state_time, {started("r")}, r.ended_at, {duration("r")},
       CASE WHEN k.kind = 'dataset' THEN {name_count("d")} END, {dataset_type("d.facets")},
       CASE WHEN k.kind = 'dataset' THEN {last_write_at("d")} END,
       {lifecycle_state("d.facets")}"""
NODE_JOINS = "LEFT JOIN readmodel.runs r ON r.id = j.latest_run_id"
NODE_COLUMNS_AS_OF = f"""{JOB_COLUMNS},
       {asof.RUN_AT_COLUMNS},
       CASE WHEN k.kind = 'dataset' THEN {name_count("d")} END, {dataset_type("d.facets")},
       CASE WHEN k.kind = 'dataset' THEN {last_write_at_as_of("d")} END,
       lc.lifecycle_state"""
NODE_JOINS_AS_OF = (
    asof.latest_run_at_joins("j.id") + f"\nLEFT JOIN LATERAL {lifecycle_as_of('d')} lc ON true"
)


def _job_datasets(jobs: str, direction: str, as_of: bool) -> str:
    """The datasets the jobs in array `jobs` read or wrote (now, or at `%(as_of)s`)."""
    if as_of:
        return f"""SELECT dn.dataset_id
              FROM unnest({jobs}) AS j(id)
              CROSS JOIN LATERAL {asof.job_edges_at("j.id", direction)} e
              JOIN readmodel.dataset_names dn
                ON dn.namespace = e.namespace AND dn.name = e.name"""
    return f"""SELECT dn.dataset_id
              FROM readmodel.job_edges e
              JOIN readmodel.dataset_names dn
                ON dn.namespace = e.namespace AND dn.name = e.name
              WHERE e.job_id = ANY({jobs}) AND e.direction = '{direction}'"""


def _dataset_jobs(datasets: str, direction: str, as_of: bool) -> str:
    """The jobs that read or wrote the datasets in array `datasets` (now, or at as_of)."""
    held = f"\n                AND {asof.edge_held()}" if as_of else ""
    return f"""SELECT e.job_id
              FROM readmodel.dataset_names dn
              JOIN readmodel.job_edges e
                ON e.namespace = dn.namespace AND e.name = dn.name
              WHERE dn.dataset_id = ANY({datasets}) AND e.direction = '{direction}'{held}"""


def _walk(as_of: bool) -> str:
    return LINEAGE_WALK.format(
        down_datasets=_job_datasets("w.down_jobs", "output", as_of),
        down_jobs=_dataset_jobs("w.down_ds", "input", as_of),
        up_datasets=_job_datasets("w.up_jobs", "input", as_of),
        up_jobs=_dataset_jobs("w.up_ds", "output", as_of),
        node_columns=NODE_COLUMNS_AS_OF if as_of else NODE_COLUMNS,
        node_joins=NODE_JOINS_AS_OF if as_of else NODE_JOINS,
    )


LINEAGE = _walk(as_of=False)
LINEAGE_AS_OF = _walk(as_of=True)

# The edges between the kept nodes and, for each kept node, how many of its neighbours
# were not kept, by edge direction (`beyond`), as a second statement: bound as arrays
# (constants to the planner, hashed and counted right), where a join against the CTE
# above would be planned with a guessed row count as a nested loop over every pair.
# Rows: ('edge', direction, job, dataset, lifecycle, NULL) for each edge (with the
# lifecycle change the job last reported for an output: DROP, CREATE, ...); ('job' or
# 'dataset', direction, job or NULL, dataset or NULL, NULL, count) for the neighbours
# a kept job or dataset has along its edges of that direction that are not kept.
LATEST_LIFECYCLE = "(array_agg(e.lifecycle_state ORDER BY e.lifecycle_time DESC NULLS LAST))[1]"
LINEAGE_LINKS = """
WITH job_side AS ({job_side}),
dataset_side AS ({dataset_side})
SELECT 'edge', direction, job_id, dataset_id, lifecycle, NULL::bigint FROM job_side
WHERE dataset_id = ANY(%(datasets)s::uuid[])
UNION ALL
SELECT 'job', direction, job_id, NULL, NULL, count(*) FROM job_side
WHERE NOT dataset_id = ANY(%(datasets)s::uuid[]) GROUP BY direction, job_id
UNION ALL
SELECT 'dataset', direction, NULL, dataset_id, NULL, count(*) FROM dataset_side
WHERE NOT job_id = ANY(%(jobs)s::uuid[]) GROUP BY direction, dataset_id
"""
# Each kept job's datasets (now, or at `%(as_of)s`), one row per (direction, dataset).
JOB_SIDE = f"""
SELECT e.direction, e.job_id, n.dataset_id, {LATEST_LIFECYCLE} AS lifecycle
FROM readmodel.job_edges e
JOIN readmodel.dataset_names n ON n.namespace = e.namespace AND n.name = e.name
WHERE e.job_id = ANY(%(jobs)s::uuid[])
GROUP BY 1, 2, 3"""
JOB_SIDE_AS_OF = f"""
SELECT e.direction, j.id AS job_id, n.dataset_id, {LATEST_LIFECYCLE} AS lifecycle
FROM unnest(%(jobs)s::uuid[]) AS j(id)
CROSS JOIN LATERAL (
    SELECT 'input' AS direction, i.* FROM {asof.job_edges_at("j.id", "input")} i
  UNION ALL
    SELECT 'output', o.* FROM {asof.job_edges_at("j.id", "output")} o
) e
JOIN readmodel.dataset_names n ON n.namespace = e.namespace AND n.name = e.name
GROUP BY 1, 2, 3"""
# Each kept dataset's jobs, one row per (direction, job).
DATASET_SIDE = """
SELECT DISTINCT e.direction, e.job_id, dn.dataset_id
FROM readmodel.dataset_names dn
JOIN readmodel.job_edges e ON e.namespace = dn.namespace AND e.name = dn.name
WHERE dn.dataset_id = ANY(%(datasets)s::uuid[]){held}"""
LINEAGE_EDGES = LINEAGE_LINKS.format(job_side=JOB_SIDE, dataset_side=DATASET_SIDE.format(held=""))
LINEAGE_EDGES_AS_OF = LINEAGE_LINKS.format(
    job_side=JOB_SIDE_AS_OF, dataset_side=DATASET_SIDE.format(held=" AND " + asof.edge_held())
)

# Field-level: upstream follows `out <- in` from the dataset's fields back to their
# sources; downstream the other way. Rows: one per edge with its least depth. `{edges}` is
# only ever read through LATERAL lookups by name: as of a moment it is a DISTINCT ON
# subquery, which the planner cannot join by index, and a plain join (or an OR of two
# conditions) built it whole, every run's field edges, for each request (seconds on a large
# log). The final lookup's LIMIT 1 (a pair is one row) keeps it from being flattened
# into such a join.
COLUMN_LINEAGE_WALK = """
WITH RECURSIVE walk(out_namespace, out_name, out_field, in_namespace, in_name, in_field,
                    dir, depth) AS (
    SELECT c.out_namespace, c.out_name, c.out_field, c.in_namespace, c.in_name, c.in_field,
           d.dir, 1
    FROM unnest(%(dirs)s::text[]) AS d(dir)
    JOIN readmodel.dataset_names n ON n.dataset_id = %(id)s
    CROSS JOIN LATERAL (
        SELECT * FROM {edges} c
        WHERE d.dir = 'up' AND c.out_namespace = n.namespace AND c.out_name = n.name
          AND (%(field)s::text IS NULL OR c.out_field = %(field)s::text)
      UNION ALL
        SELECT * FROM {edges} c
        WHERE d.dir = 'down' AND c.in_namespace = n.namespace AND c.in_name = n.name
          AND (%(field)s::text IS NULL OR c.in_field = %(field)s::text)
    ) c
  UNION
    SELECT c.out_namespace, c.out_name, c.out_field, c.in_namespace, c.in_name, c.in_field,
           w.dir, w.depth + 1
    FROM walk w
    -- the dataset at the far end of the edge, under any of its names
    JOIN readmodel.dataset_names here
      ON here.namespace = CASE w.dir WHEN 'up' THEN w.in_namespace ELSE w.out_namespace END
     AND here.name = CASE w.dir WHEN 'up' THEN w.in_name ELSE w.out_name END
    JOIN readmodel.dataset_names alias ON alias.dataset_id = here.dataset_id
    CROSS JOIN LATERAL (
        SELECT * FROM {edges} c
        WHERE w.dir = 'up' AND c.out_namespace = alias.namespace
          AND c.out_name = alias.name AND c.out_field = w.in_field
      UNION ALL
        SELECT * FROM {edges} c
        WHERE w.dir = 'down' AND c.in_namespace = alias.namespace
          AND c.in_name = alias.name AND c.in_field = w.out_field
    ) c
    WHERE w.depth < %(depth)s
),
walked AS (SELECT * FROM walk LIMIT %(row_cap)s),
edges AS (
    SELECT out_namespace, out_name, out_field, in_namespace, in_name, in_field,
           min(depth) AS depth
    FROM walked GROUP BY 1, 2, 3, 4, 5, 6
    ORDER BY depth, 1, 2, 3, 4, 5, 6
    LIMIT %(max_edges)s
)
SELECT e.in_namespace, e.in_name, e.in_field, src.dataset_id,
       e.out_namespace, e.out_name, e.out_field, dst.dataset_id,
       c.transformations::text, c.job_id, e.depth,
       (SELECT count(*) FROM walked),
       sd.namespace, sd.name, dd.namespace, dd.name, cj.namespace, cj.name,
       coalesce((SELECT json_agg(json_build_object('id', j.id, 'namespace', j.namespace,
                                                   'name', j.name)
                                 ORDER BY j.namespace, j.name)
                 FROM readmodel.jobs j WHERE j.id = ANY(c.job_ids)), '[]')::text
FROM edges e
CROSS JOIN LATERAL (
    SELECT c.transformations, c.job_id, c.job_ids FROM {edges} c
    WHERE c.out_namespace = e.out_namespace AND c.out_name = e.out_name
      AND c.out_field = e.out_field AND c.in_namespace = e.in_namespace
      AND c.in_name = e.in_name AND c.in_field = e.in_field
    LIMIT 1) c
LEFT JOIN readmodel.dataset_names src
  ON src.namespace = e.in_namespace AND src.name = e.in_name
LEFT JOIN readmodel.dataset_names dst
  ON dst.namespace = e.out_namespace AND dst.name = e.out_name
LEFT JOIN readmodel.datasets sd ON sd.id = src.dataset_id
LEFT JOIN readmodel.datasets dd ON dd.id = dst.dataset_id
LEFT JOIN readmodel.jobs cj ON cj.id = c.job_id
ORDER BY e.depth, e.out_namespace, e.out_name, e.out_field, e.in_namespace, e.in_name,
         e.in_field
"""
# Field edges at `%(as_of)s`: those of each job's latest run started by then (and static
# ones declared by then), one row per field pair (the latest report), as column_lineage.
# Every pair a run reported is in column_lineage, found there by name (the walk's lookups
# are pushed into this subquery); the reports that hold it are the output's rows in
# run_column_lineage whose `edges` have its key.
COLUMN_EDGES_AS_OF = f"""(
    SELECT DISTINCT ON (c.out_namespace, c.out_name, c.out_field, c.in_namespace, c.in_name,
                        c.in_field)
           c.out_namespace, c.out_name, c.out_field, c.in_namespace, c.in_name, c.in_field,
           r.edges -> k.key AS transformations, r.job_id, r.run_id, r.first_seen,
           r.last_seen, r.last_seq, c.job_ids
    FROM readmodel.column_lineage c
    CROSS JOIN LATERAL (SELECT replace(c.edge_key::text, '-', '') AS key) k
    JOIN readmodel.run_column_lineage r
      ON r.out_namespace = c.out_namespace AND r.out_name = c.out_name AND r.edges ? k.key
    WHERE CASE WHEN r.run_id = '{asof.STATIC_RUN}' THEN r.first_seen <= %(as_of)s
               ELSE r.run_id = {asof.latest_run("r.job_id")} END
    ORDER BY c.out_namespace, c.out_name, c.out_field, c.in_namespace, c.in_name, c.in_field,
             r.last_seen DESC, r.last_seq DESC)"""
COLUMN_LINEAGE = COLUMN_LINEAGE_WALK.format(edges="readmodel.column_lineage")
COLUMN_LINEAGE_AS_OF = COLUMN_LINEAGE_WALK.format(edges=COLUMN_EDGES_AS_OF)
DATASET_REF = """
SELECT d.id, d.namespace, d.name, d.first_seen FROM readmodel.datasets d
WHERE d.id = coalesce((SELECT merged_into FROM readmodel.datasets WHERE id = %(id)s), %(id)s)
"""

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
_DIRS = {"upstream": ["up"], "downstream": ["down"], "both": ["up", "down"]}


class LineageQuery(msgspec.Struct, frozen=True):
    node: Annotated[
        str,
        Meta(
            pattern="^(dataset|job):[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
            "[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
            description="The start node: `dataset:<id>` or `job:<id>`.",
        ),
    ]
    direction: Direction = "both"
    depth: JobHops = DEFAULT_DEPTH
    max_nodes: Annotated[
        int, Meta(ge=1, le=NODE_LIMIT, description="Node limit; past it `truncated` is set.")
    ] = NODE_LIMIT
    as_of: asof.AsOf = None


class ColumnLineageQuery(msgspec.Struct, frozen=True):
    direction: Direction = "upstream"
    depth: Annotated[int, Meta(ge=1, le=MAX_DEPTH, description="Hops of field edges.")] = (
        DEFAULT_DEPTH
    )
    field: Annotated[
        params.Name | None,
        Meta(
            description="Only the lineage of this field of the dataset: upstream, the fields "
            "it derives from; downstream, those derived from it (no edges: a field without).",
        ),
    ] = None
    as_of: asof.AsOf = None


class DatasetPath(msgspec.Struct, frozen=True):
    dataset_id: uuid.UUID


LINEAGE_OP = Operation(
    "GET",
    "/lineage",
    "getLineage",
    "The lineage graph around a job or dataset",
    models.LineageGraph,
    tag="lineage",
    query=LineageQuery,
    not_found=True,
    description="Jobs and datasets within `depth` jobs of `node`, following the data flow "
    "upstream, downstream or both, with the edges between them (dataset -> job: the job "
    "reads it; job -> dataset: the job writes it): the graph ends on datasets. Node keys "
    "are `dataset:<id>` and `job:<id>`; a node's `depth` is its distance in hops, and its "
    "`beyond` says how many of its neighbours, upstream and downstream, the answer leaves "
    "out (what expanding it would add). Past `max_nodes` nodes (default and most 1,000) "
    "the nearest are kept and `truncated` is true. With `as_of`, the graph as it was then: "
    "each job's edges are "
    "those of its latest run started at or before `as_of` (and its static lineage "
    "declared by then); a node first seen after `as_of` answers 404.",
)
COLUMN_OP = Operation(
    "GET",
    "/datasets/{dataset_id}/column-lineage",
    "getColumnLineage",
    "The field-level lineage of a dataset",
    models.ColumnLineage,
    tag="lineage",
    path_params=DatasetPath,
    query=ColumnLineageQuery,
    not_found=True,
    description="Field edges from the `columnLineage` facet: upstream, the fields this "
    "dataset's fields derive from (and theirs, up to `depth`); downstream, the fields "
    "derived from its fields. Each edge names its datasets (display name) and the job of "
    "its latest report (`job`) and every job that ever reported it (`jobs`, all time). "
    "With `as_of`, the field edges each job's latest run started at or before `as_of` "
    "reported (in its latest `columnLineage` facet for the dataset), "
    "and those of the job's latest static declaration (JobEvent) if it had made one by "
    "then. `field` follows one field of the dataset.",
)
resource = Resource()

_EDGE_LIMIT = 5000


def _key(kind: str, id_: uuid.UUID) -> str:
    return f"{kind}:{id_}"


def _node(r: Any, beyond: models.Beyond) -> models.JobNode | models.DatasetNode:
    if r[0] == "job":
        latest = None
        if r[11] is not None:
            latest = models.LatestRun(
                id=r[11],
                state=r[12],
                state_time=r[13],
                started_at=r[14],
                ended_at=r[15],
                duration_seconds=r[16],
            )
        return models.JobNode(
            key=_key("job", r[1]),
            id=r[1],
            namespace=r[3],
            name=r[4],
            depth=r[2],
            job_type=r[8],
            processing_type=r[9],
            integration=r[10],
            latest_run=latest,
            beyond=beyond,
        )
    return models.DatasetNode(
        key=_key("dataset", r[1]),
        id=r[1],
        namespace=r[3],
        name=r[4],
        depth=r[2],
        name_count=r[17],
        dataset_type=r[18],
        last_write_at=r[19],
        lifecycle_state=r[20],
        beyond=beyond,
    )


@resource.add(LINEAGE_OP)
async def get_lineage(request: Request) -> Response:
    query: LineageQuery = LINEAGE_OP.parse_query(request)
    kind, _, id_text = query.node.partition(":")
    try:
        start = uuid.UUID(id_text)
    except ValueError:
        reason = "not `dataset:<uuid>` or `job:<uuid>`"
        raise ProblemError(
            400,
            f"query parameter `node` is invalid: {reason}",
            invalid_params=[InvalidParam(name="node", reason=reason)],
        ) from None
    args = {
        "down": query.direction != "upstream",
        "up": query.direction != "downstream",
        "kind": kind,
        "id": start,
        # `depth` counts jobs; the walk counts hops: so it ends on datasets
        "depth": 2 * query.depth + (kind == "job"),
        "max_nodes": query.max_nodes,
        "as_of": query.as_of,
    }
    timeless = query.as_of is None
    async with connection(request) as conn:
        found = await rows(conn, LINEAGE if timeless else LINEAGE_AS_OF, args)
        if not found or found[0][3] is None:  # the start node: no read model knows it
            raise not_found(kind, start)
        asof.check_seen(kind, start, found[0][7], query.as_of)
        jobs = [r[1] for r in found if r[0] == "job"]
        datasets = [r[1] for r in found if r[0] == "dataset"]
        links = await rows(
            conn,
            LINEAGE_EDGES if timeless else LINEAGE_EDGES_AS_OF,
            {"jobs": jobs, "datasets": datasets, "as_of": query.as_of},
        )
    # Neighbours left out, by node and side: upstream of a dataset are the jobs writing
    # it ('output' edges), of a job the datasets it reads ('input' edges).
    left_out: dict[tuple[str, Any, str], int] = {}
    edges = []
    for what, direction, job, ds, lifecycle, count in links:
        if what == "edge":
            edges.append(
                models.LineageEdge(
                    from_=_key("dataset", ds), to=_key("job", job), lifecycle_state=None
                )
                if direction == "input"
                else models.LineageEdge(
                    from_=_key("job", job), to=_key("dataset", ds), lifecycle_state=lifecycle
                )
            )
        elif what == "job":
            side = "up" if direction == "input" else "down"
            left_out[("job", job, side)] = count
        else:
            side = "up" if direction == "output" else "down"
            left_out[("dataset", ds, side)] = count
    edges.sort(key=lambda e: (e.from_, e.to))
    nodes = [
        _node(
            r,
            models.Beyond(
                upstream=left_out.get((r[0], r[1], "up"), 0),
                downstream=left_out.get((r[0], r[1], "down"), 0),
            ),
        )
        for r in found
    ]
    reached, cut = found[0][5], found[0][6]
    truncated = reached > len(nodes) or bool(cut)
    return json_response(
        request, models.LineageGraph(nodes=nodes, edges=edges, truncated=truncated)
    )


_jobs = msgspec.json.Decoder(list[models.JobRef])


def _dataset_ref(id_: Any, namespace: Any, name: Any) -> models.DatasetRef | None:
    return models.DatasetRef(id=id_, namespace=namespace, name=name) if id_ else None


@resource.add(COLUMN_OP)
async def get_column_lineage(request: Request) -> Response:
    path: DatasetPath = COLUMN_OP.parse_path(request)
    query: ColumnLineageQuery = COLUMN_OP.parse_query(request)
    args: dict[str, Any] = {
        "id": path.dataset_id,
        "dirs": _DIRS[query.direction],
        "depth": query.depth,
        "max_edges": _EDGE_LIMIT,
        "row_cap": _EDGE_LIMIT * ROW_CAP_PER_NODE,
        "field": query.field,
        "as_of": query.as_of,
    }
    async with connection(request) as conn:
        dataset = await rows(conn, DATASET_REF, args)
        if not dataset:
            raise not_found("dataset", path.dataset_id)
        asof.check_seen("dataset", path.dataset_id, dataset[0][3], query.as_of)
        args["id"] = dataset[0][0]
        found = await rows(
            conn, COLUMN_LINEAGE if query.as_of is None else COLUMN_LINEAGE_AS_OF, args
        )
    edges = [
        models.ColumnEdge(
            from_=models.ColumnRef(
                dataset=_dataset_ref(r[3], r[12], r[13]), namespace=r[0], name=r[1], field=r[2]
            ),
            to=models.ColumnRef(
                dataset=_dataset_ref(r[7], r[14], r[15]), namespace=r[4], name=r[5], field=r[6]
            ),
            transformations=msgspec.Raw(r[8]),
            job=models.JobRef(id=r[9], namespace=r[16], name=r[17]) if r[16] else None,
            jobs=_jobs.decode(r[18]),
            depth=r[10],
        )
        for r in found
    ]
    walked = found[0][11] if found else 0
    d = dataset[0]
    return json_response(
        request,
        models.ColumnLineage(
            dataset=models.DatasetRef(id=d[0], namespace=d[1], name=d[2]),
            edges=edges,
            truncated=len(edges) >= _EDGE_LIMIT or walked >= args["row_cap"],
        ),
    )
