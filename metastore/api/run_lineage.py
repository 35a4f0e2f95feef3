"""GET /lineage/runs: run-level lineage, "which run wrote the data this run read".

A run R read dataset D from the run that last wrote D before R started: the run with the
latest successful write (it COMPLETEd, or a STREAMING run's RUNNING event named it: see
projections/lineage.py) at or before R's start; a run that FAILed or ABORTed only
attempted its outputs and is never that writer. Upstream follows that from reader to
writer, downstream from writer to the readers it fed (those for which it is that last
writer). The walk goes level by level in Python, one statement per level and direction
over run_edges and lineage_runs, so each run is expanded once however many paths reach
it. The answer also has the datasets the start run and each leaf run read and wrote, as
graph nodes with their freshness. Bounded as /lineage is (metastore/api/limits.py): runs and
datasets together at most `max_nodes`, limits.VISIT_LIMIT edge rows looked at in all (a
LIMIT in each level's statement), limits.EDGE_LIMIT edges of each kind; `truncated` past any.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta
from starlette.requests import Request
from starlette.responses import Response

from metastore.access import access_of
from metastore.api import asof, dataset_nodes, limits, models, models_lineage, visibility
from metastore.api.db import connection, not_found, row, rows
from metastore.api.lineage import (
    DATASETS_BEYOND,
    DEFAULT_DEPTH,
    HIDDEN_NODES,
    MAX_DEPTH,
    NODE_LIMIT,
    dataset_node,
)
from metastore.api.operation import Operation, Resource
from metastore.api.responses import json_response
from metastore.api.sqlparts import duration

# The write of run-edge row `{e}` (an output) that counts for a reader started at `{t}`: its
# last write by then (a write spanning the moment, a STREAMING run's, counts from its first).
WRITE_BY = """CASE WHEN {e}.last_write_at <= {t} THEN {e}.last_write_at
                 ELSE {e}.first_write_at END"""

# Rows (edges looked at, capped, reader, dataset id, writer): for each run of the frontier
# and each dataset it read, the run that last wrote that dataset (under any of its names)
# before the reader started. It looks at `visit_limit` input edges at most (`capped` when
# it stopped there), and answers one row of NULLs besides the counts when it found none.
WRITERS_OF_INPUTS = f"""
WITH looked AS MATERIALIZED (
    SELECT f.run_id, fr.started_at, i.namespace, i.name
    FROM unnest(%(runs)s::uuid[]) AS f(run_id)
    JOIN readmodel.lineage_runs fr ON fr.run_id = f.run_id
    JOIN readmodel.run_edges i ON i.run_id = f.run_id AND i.direction = 'input'
    LIMIT %(visit_limit)s
),
found AS (
    SELECT DISTINCT f.run_id AS here, dn.dataset_id, w.run_id AS there
    FROM looked f
    JOIN readmodel.dataset_names dn ON dn.namespace = f.namespace AND dn.name = f.name
    CROSS JOIN LATERAL (
        SELECT o.run_id{{writer_job}} FROM readmodel.dataset_names an
        JOIN readmodel.run_edges o
          ON o.namespace = an.namespace AND o.name = an.name AND o.direction = 'output'
        WHERE an.dataset_id = dn.dataset_id AND o.run_id <> f.run_id
          AND o.first_write_at <= f.started_at
        ORDER BY {WRITE_BY.format(e="o", t="f.started_at")} DESC, o.run_id DESC
        LIMIT 1
    ) w{{visible}}
)
SELECT c.n, c.n >= %(visit_limit)s, found.here, found.dataset_id, found.there
FROM (SELECT count(*) FROM looked) AS c(n) LEFT JOIN found ON true
"""

# Rows (edges looked at, capped, writer, dataset id, reader): for each run of the frontier
# and each dataset it wrote, the runs that read it and for which this run is the last
# writer before they started (no other write falls between, by the order above). It looks
# at `visit_limit` output and reading edges at most, together (`capped` when it got there).
READERS_OF_OUTPUTS = f"""
WITH looked AS MATERIALIZED (
    SELECT o.run_id, o.namespace, o.name, o.first_write_at, o.last_write_at
    FROM unnest(%(runs)s::uuid[]) AS f(run_id)
    JOIN readmodel.run_edges o
      ON o.run_id = f.run_id AND o.direction = 'output' AND o.first_write_at IS NOT NULL
    LIMIT %(visit_limit)s
),
readers AS MATERIALIZED (
    SELECT o.run_id AS here, dn.dataset_id, r.run_id AS there, rr.started_at,
           {WRITE_BY.format(e="o", t="rr.started_at")} AS written
    FROM looked o
    JOIN readmodel.dataset_names dn ON dn.namespace = o.namespace AND dn.name = o.name
    JOIN readmodel.dataset_names an ON an.dataset_id = dn.dataset_id
    JOIN readmodel.run_edges r
      ON r.namespace = an.namespace AND r.name = an.name AND r.direction = 'input'
     AND r.run_id <> o.run_id
    JOIN readmodel.lineage_runs rr
      ON rr.run_id = r.run_id AND rr.started_at >= o.first_write_at
    WHERE true{{visible}}
    LIMIT %(visit_limit)s - (SELECT count(*) FROM looked)
),
found AS (
    SELECT DISTINCT c.here, c.dataset_id, c.there FROM readers c
    WHERE NOT EXISTS (
        SELECT 1 FROM readmodel.dataset_names bn
        JOIN readmodel.run_edges o2
          ON o2.namespace = bn.namespace AND o2.name = bn.name AND o2.direction = 'output'
        WHERE bn.dataset_id = c.dataset_id AND o2.run_id <> c.there
          AND o2.first_write_at <= c.started_at
          AND ({WRITE_BY.format(e="o2", t="c.started_at")}, o2.run_id) > (c.written, c.here)
    )
)
SELECT l.n + r.n, l.n + r.n >= %(visit_limit)s,
       found.here, found.dataset_id, found.there
FROM (SELECT count(*) FROM looked) AS l(n) CROSS JOIN (SELECT count(*) FROM readers) AS r(n)
LEFT JOIN found ON true
"""

RUN_NODES = f"""
SELECT lr.run_id, r.job_id, r.job_namespace, r.job_name, r.state, lr.started_at, r.ended_at,
       r.state_time, {duration("r")}
FROM readmodel.lineage_runs lr
JOIN readmodel.runs r ON r.id = lr.run_id
WHERE lr.run_id = ANY(%(runs)s::uuid[])
"""
RUN_KNOWN = "SELECT 1 FROM readmodel.lineage_runs WHERE run_id = %(run_id)s"
# Restricted: a run of a hidden job is unknown (404).
RUN_VISIBLE = f"""
SELECT 1 FROM readmodel.runs r
WHERE r.id = %(run_id)s{visibility.run_visible(visibility.RESTRICTED, "r")}"""
# Rows (run's position, run, dataset id, role, written) of what the runs read and wrote:
# each run's first `max_edges` by name, in the order of the runs, `max_edges` in all (an
# index range per run: a run that wrote 10,000 datasets costs what the answer holds).
RUN_DATASETS = """
SELECT f.position, f.run_id, e.dataset_id, e.direction, e.written
FROM unnest(%(runs)s::uuid[]) WITH ORDINALITY AS f(run_id, position)
CROSS JOIN LATERAL (
    SELECT n.dataset_id, e.direction, e.last_write_at IS NOT NULL FROM readmodel.run_edges e
    JOIN readmodel.dataset_names n ON n.namespace = e.namespace AND n.name = e.name
    WHERE e.run_id = f.run_id{visible}
    ORDER BY e.direction, e.namespace, e.name
    LIMIT %(max_edges)s
) e(dataset_id, direction, written)
LIMIT %(max_edges)s
"""
# The datasets of the links and of those, under their display names (the details of
# the latter: dataset_nodes.of); restricted, under a readable one.
DATASET_NAMES = """
SELECT id, namespace, name FROM readmodel.datasets WHERE id = ANY(%(ids)s::uuid[])
"""
DATASET_NAMES_VISIBLE = f"""
SELECT d.id, v.shown[1], v.shown[2] FROM readmodel.datasets d
CROSS JOIN LATERAL (SELECT {visibility.visible_display_name("d.id")} AS shown) v
WHERE d.id = ANY(%(ids)s::uuid[]) AND v.shown IS NOT NULL
"""


def _by_shape(statement: str, visible: dict[bool, str]) -> dict[bool, str]:
    # (restricted, the writer's job too, for its visibility)
    return {
        r: statement.format(visible=v, writer_job=", o.job_id" if r else "")
        for r, v in visible.items()
    }


# Restricted to an Access's namespaces, the walk passes through visible runs (of visible
# jobs) and datasets alone: a hidden last writer cuts the walk there, it is never replaced
# by an earlier visible one.
_RESTRICTED = visibility.RESTRICTED
WRITERS = _by_shape(
    WRITERS_OF_INPUTS,
    {
        False: "",
        True: " WHERE true"
        + visibility.dataset_visible(_RESTRICTED, "dn.dataset_id")
        + visibility.job_id_visible(_RESTRICTED, "w.job_id"),
    },
)
READERS = _by_shape(
    READERS_OF_OUTPUTS,
    {
        False: "",
        True: visibility.dataset_visible(_RESTRICTED, "dn.dataset_id")
        + visibility.job_id_visible(_RESTRICTED, "r.job_id"),
    },
)
RUNS_DATASETS = _by_shape(
    RUN_DATASETS,
    {False: "", True: visibility.dataset_visible(_RESTRICTED, "n.dataset_id")},
)


class RunLineageQuery(msgspec.Struct, frozen=True):
    run_id: Annotated[uuid.UUID, Meta(description="The OpenLineage runId to start from.")]
    direction: Annotated[
        Literal["upstream", "downstream", "both"],
        Meta(
            description="upstream: the runs that wrote what this run read; downstream: "
            "the runs that read what it wrote."
        ),
    ] = "upstream"
    depth: Annotated[int, Meta(ge=1, le=MAX_DEPTH, description="Hops of runs.")] = DEFAULT_DEPTH
    max_nodes: Annotated[
        int,
        Meta(
            ge=1,
            le=NODE_LIMIT,
            description="Node limit, runs and datasets together; past it `truncated` is set.",
        ),
    ] = NODE_LIMIT


OP = Operation(
    "GET",
    "/lineage/runs",
    "getRunLineage",
    "Run-level lineage: which runs produced what a run read",
    models_lineage.RunLineage,
    tag="lineage",
    # (no position ETag: its nodes carry lateness, which the clock moves)
    query=RunLineageQuery,
    expensive=True,
    not_found=True,
    description="Upstream, for each dataset `run_id` read, the run that last wrote it "
    "before `run_id` started (its latest successful write at or before that start), and so "
    "on up to `depth`; downstream, the runs that read a write of `run_id` before anyone "
    "wrote that dataset again. Edges go writer -> reader and name the dataset. A run that "
    "FAILed or ABORTed wrote nothing: it is never a writer here. `datasets` are the "
    "datasets the start run and each leaf run (a run the walk went no further from) read "
    "and wrote, as graph nodes with their freshness, and `dataset_edges` says which run "
    "read or wrote which (and whether it wrote it or only attempted to). Past `max_nodes` "
    "nodes (runs and datasets together, default and most 1,000) the runs come first, "
    "nearest first, then the datasets, the start run's first, and `truncated` is true; so "
    f"it is when the walk has looked at {limits.VISIT_LIMIT:,} edges (it stops there) or "
    f"there are more than {limits.EDGE_LIMIT:,} edges of either kind (the first are kept). "
    + models.WRITE_RULE
    + HIDDEN_NODES
    + " A hidden last writer ends the walk there: no earlier writer stands in for it.",
)
resource = Resource()


@resource.add(OP)
async def get_run_lineage(request: Request) -> Response:
    query: RunLineageQuery = OP.parse_query(request)
    access = await access_of(request)
    restricted = access.restricted
    readable = access.sql_params() if restricted else {}
    writers, readers = WRITERS[restricted], READERS[restricted]
    walks = {
        "upstream": [writers],
        "downstream": [readers],
        "both": [writers, readers],
    }[query.direction]
    depth_of: dict[uuid.UUID, int] = {query.run_id: 0}
    links: set[tuple[uuid.UUID, uuid.UUID, uuid.UUID]] = set()  # (writer, reader, dataset)
    truncated = False
    visited = 0  # edge rows looked at, all levels and directions together
    async with connection(request) as conn:
        known = RUN_VISIBLE if restricted else RUN_KNOWN
        if await row(conn, known, {"run_id": query.run_id} | readable) is None:
            raise not_found("run", query.run_id)
        for step in walks:
            frontier = [query.run_id]
            for level in range(1, query.depth + 1):
                if not frontier or truncated:
                    break
                budget = limits.VISIT_LIMIT - visited
                found = await rows(conn, step, {"runs": frontier, "visit_limit": budget} | readable)
                upstream = step is writers
                frontier = []
                visited += found[0][0]
                truncated = found[0][1]
                for _, _, here, dataset, there in found:
                    if there is None:  # nothing found in what it looked at
                        continue
                    if there not in depth_of:
                        if len(depth_of) >= query.max_nodes:
                            truncated = True
                            continue
                        depth_of[there] = level
                        frontier.append(there)
                    links.add((there, here, dataset) if upstream else (here, there, dataset))
        nodes = await rows(conn, RUN_NODES, {"runs": list(depth_of)})
        drawn = [query.run_id, *leaves(depth_of, links)]
        found_io = await rows(
            conn,
            RUNS_DATASETS[restricted],
            {"runs": drawn, "max_edges": limits.EDGE_LIMIT + 1} | readable,
        )
        # the runs' datasets fill the nodes the runs left, the start run's first
        io, cut = _within(found_io, query.max_nodes - len(depth_of))
        truncated = truncated or cut
        ids = list({d for _, d, _, _ in io})
        if len(links) > limits.EDGE_LIMIT:
            links = set(sorted(links, key=lambda x: tuple(map(str, x)))[: limits.EDGE_LIMIT])
            truncated = True
        names = await rows(
            conn,
            DATASET_NAMES_VISIBLE if restricted else DATASET_NAMES,
            {"ids": list({d for _, _, d in links} | set(ids))} | readable,
        )
        details = await dataset_nodes.of(conn, ids, None, access)
        # what the drawn datasets' nodes leave out: their jobs that ran none of the runs
        beyond = await rows(
            conn,
            DATASETS_BEYOND[restricted],
            {"datasets": ids, "jobs": list({r[1] for r in nodes}), "as_of": asof.NOW} | readable,
        )
    refs = {d[0]: models.DatasetRef(id=d[0], namespace=d[1], name=d[2]) for d in names}
    dataset_depth: dict[uuid.UUID, int] = {}
    for run, dataset, _, _ in io:
        dataset_depth[dataset] = min(dataset_depth.get(dataset, depth_of[run]), depth_of[run])
    # upstream of a dataset are the jobs writing it ('output' edges)
    left_out = {(ds, "up" if direction == "output" else "down"): n for direction, ds, n in beyond}
    run_nodes = sorted(
        (_node(r, depth_of[r[0]]) for r in nodes), key=lambda n: (n.depth, str(n.id))
    )
    dataset_nodes_drawn = sorted(
        (
            dataset_node(
                i,
                dataset_depth[i],
                namespace,
                name,
                models_lineage.Beyond(
                    upstream=left_out.get((i, "up"), 0),
                    downstream=left_out.get((i, "down"), 0),
                ),
                details[i],
            )
            for i, namespace, name in names
            if i in details
        ),
        key=lambda n: (n.depth, n.namespace, n.name, str(n.id)),
    )
    # every edge names both ends: runs with their job and state, datasets as their nodes show
    runs = {n.id: models.RunRef(id=n.id, job=n.job, state=n.state) for n in run_nodes}
    for n in dataset_nodes_drawn:
        refs[n.id] = models.DatasetRef(id=n.id, namespace=n.namespace, name=n.name)
    return json_response(
        request,
        models_lineage.RunLineage(
            nodes=run_nodes,
            edges=[
                models_lineage.RunLink(from_=runs[w], to=runs[r], dataset=refs[d])
                for w, r, d in sorted(links, key=lambda x: (str(x[0]), str(x[1]), str(x[2])))
                if d in refs and w in runs and r in runs
            ],
            datasets=dataset_nodes_drawn,
            dataset_edges=[
                models_lineage.RunDatasetEdge(
                    run=runs[run], dataset=refs[dataset], role=role, written=written
                )
                for run, dataset, role, written in sorted(io, key=lambda x: tuple(map(str, x)))
                if run in runs and dataset in refs
            ],
            truncated=truncated,
        ),
    )


def _within(
    found: list[Any], room: int
) -> tuple[list[tuple[uuid.UUID, uuid.UUID, Any, bool]], bool]:
    """The rows (run, dataset, role, written) of RUN_DATASETS that fit: at most
    limits.EDGE_LIMIT, of `room` datasets at most, in the order of the runs; and whether
    any were left out."""
    kept: list[tuple[uuid.UUID, uuid.UUID, Any, bool]] = []
    datasets: set[uuid.UUID] = set()
    cut = len(found) > limits.EDGE_LIMIT
    for _, run, dataset, role, written in sorted(found[: limits.EDGE_LIMIT], key=lambda r: r[0]):
        if dataset not in datasets and len(datasets) >= room:
            cut = True
            continue
        datasets.add(dataset)
        kept.append((run, dataset, role, written))
    return kept, cut


def leaves(
    depth_of: dict[uuid.UUID, int], links: set[tuple[uuid.UUID, uuid.UUID, uuid.UUID]]
) -> list[uuid.UUID]:
    """The runs the walk reached and went no further from: linked to no deeper run."""
    inner = set()
    for writer, reader, _ in links:
        near, far = sorted((writer, reader), key=lambda run: depth_of[run])
        if depth_of[far] > depth_of[near]:
            inner.add(near)
    return sorted((run for run, depth in depth_of.items() if depth and run not in inner), key=str)


def _node(r: Any, depth: int) -> models_lineage.RunNode:
    return models_lineage.RunNode(
        id=r[0],
        job=models.JobRef(id=r[1], namespace=r[2], name=r[3]),
        state=r[4],
        state_time=r[7],
        started_at=r[5],
        ended_at=r[6],
        duration_seconds=r[8],
        depth=depth,
    )
