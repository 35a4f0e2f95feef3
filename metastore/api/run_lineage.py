"""GET /lineage/runs: run-level lineage, "which run wrote the data this run read".

A run R read dataset D from the run that last wrote D before R started: the writer with
the latest write (the eventTime of its latest event naming D as an output) at or before
R's start. Upstream follows that from reader to writer, downstream from writer to the
readers it fed (those for which it is that last writer). The walk goes level by level
in Python, one statement per level and direction over run_edges and lineage_runs, so each
run is expanded once however many paths reach it.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta
from starlette.requests import Request
from starlette.responses import Response

from metastore.api import models
from metastore.api.db import connection, not_found, row, rows
from metastore.api.lineage import DEFAULT_DEPTH, MAX_DEPTH, NODE_LIMIT
from metastore.api.operation import Operation, Resource
from metastore.api.responses import json_response

# Rows (reader, dataset id, writer): for each run of the frontier and each dataset it read,
# the run that last wrote that dataset (under any of its names) before the reader started.
WRITERS_OF_INPUTS = """
SELECT DISTINCT f.run_id, dn.dataset_id, w.run_id
FROM unnest(%(runs)s::uuid[]) AS f(run_id)
JOIN readmodel.lineage_runs fr ON fr.run_id = f.run_id
JOIN readmodel.run_edges i ON i.run_id = f.run_id AND i.direction = 'input'
JOIN readmodel.dataset_names dn ON dn.namespace = i.namespace AND dn.name = i.name
CROSS JOIN LATERAL (
    SELECT o.run_id FROM readmodel.dataset_names an
    JOIN readmodel.run_edges o
      ON o.namespace = an.namespace AND o.name = an.name AND o.direction = 'output'
    WHERE an.dataset_id = dn.dataset_id AND o.run_id <> f.run_id
      AND o.last_seen <= fr.started_at
    ORDER BY o.last_seen DESC, o.run_id DESC
    LIMIT 1
) w
"""

# Rows (writer, dataset id, reader): for each run of the frontier and each dataset it
# wrote, the runs that read it and for which this run is the last writer before they
# started (no other write falls between, by the order above).
READERS_OF_OUTPUTS = """
SELECT DISTINCT f.run_id, dn.dataset_id, r.run_id
FROM unnest(%(runs)s::uuid[]) AS f(run_id)
JOIN readmodel.run_edges o ON o.run_id = f.run_id AND o.direction = 'output'
JOIN readmodel.dataset_names dn ON dn.namespace = o.namespace AND dn.name = o.name
JOIN readmodel.dataset_names an ON an.dataset_id = dn.dataset_id
JOIN readmodel.run_edges r
  ON r.namespace = an.namespace AND r.name = an.name AND r.direction = 'input'
 AND r.run_id <> f.run_id
JOIN readmodel.lineage_runs rr ON rr.run_id = r.run_id AND rr.started_at >= o.last_seen
WHERE NOT EXISTS (
    SELECT 1 FROM readmodel.dataset_names bn
    JOIN readmodel.run_edges o2
      ON o2.namespace = bn.namespace AND o2.name = bn.name AND o2.direction = 'output'
    WHERE bn.dataset_id = dn.dataset_id AND o2.run_id <> r.run_id
      AND o2.last_seen <= rr.started_at
      AND (o2.last_seen, o2.run_id) > (o.last_seen, o.run_id)
)
"""

RUN_NODES = """
SELECT lr.run_id, r.job_id, r.job_namespace, r.job_name, r.state, lr.started_at, r.ended_at
FROM readmodel.lineage_runs lr
JOIN readmodel.runs r ON r.id = lr.run_id
WHERE lr.run_id = ANY(%(runs)s::uuid[])
"""
RUN_KNOWN = "SELECT 1 FROM readmodel.lineage_runs WHERE run_id = %(run_id)s"
DATASET_REFS = """
SELECT id, namespace, name FROM readmodel.datasets WHERE id = ANY(%(ids)s::uuid[])
"""


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
        int, Meta(ge=1, le=NODE_LIMIT, description="Run limit; past it `truncated` is set.")
    ] = NODE_LIMIT


OP = Operation(
    "GET",
    "/lineage/runs",
    "getRunLineage",
    "Run-level lineage: which runs produced what a run read",
    models.RunLineage,
    tag="lineage",
    query=RunLineageQuery,
    not_found=True,
    description="Upstream, for each dataset `run_id` read, the run that last wrote it "
    "before `run_id` started (its latest output event at or before that start), and so on "
    "up to `depth`; downstream, the runs that read a write of `run_id` before anyone wrote "
    "that dataset again. Edges go writer -> reader and name the dataset.",
)
resource = Resource()


@resource.add(OP)
async def get_run_lineage(request: Request) -> Response:
    query: RunLineageQuery = OP.parse_query(request)
    walks = {
        "upstream": [WRITERS_OF_INPUTS],
        "downstream": [READERS_OF_OUTPUTS],
        "both": [WRITERS_OF_INPUTS, READERS_OF_OUTPUTS],
    }[query.direction]
    depth_of: dict[uuid.UUID, int] = {query.run_id: 0}
    links: set[tuple[uuid.UUID, uuid.UUID, uuid.UUID]] = set()  # (writer, reader, dataset)
    truncated = False
    async with connection(request) as conn:
        if await row(conn, RUN_KNOWN, {"run_id": query.run_id}) is None:
            raise not_found("run", query.run_id)
        for step in walks:
            frontier = [query.run_id]
            for level in range(1, query.depth + 1):
                if not frontier:
                    break
                found = await rows(conn, step, {"runs": frontier})
                upstream = step is WRITERS_OF_INPUTS
                frontier = []
                for here, dataset, there in found:
                    if there not in depth_of:
                        if len(depth_of) >= query.max_nodes:
                            truncated = True
                            continue
                        depth_of[there] = level
                        frontier.append(there)
                    links.add((there, here, dataset) if upstream else (here, there, dataset))
                if truncated:
                    break
        nodes = await rows(conn, RUN_NODES, {"runs": list(depth_of)})
        datasets = await rows(conn, DATASET_REFS, {"ids": list({d for _, _, d in links})})
    refs = {d[0]: models.DatasetRef(id=d[0], namespace=d[1], name=d[2]) for d in datasets}
    return json_response(
        request,
        models.RunLineage(
            nodes=sorted(
                (_node(r, depth_of[r[0]]) for r in nodes), key=lambda n: (n.depth, str(n.id))
            ),
            edges=[
                models.RunLink(from_=w, to=r, dataset=refs[d])
                for w, r, d in sorted(links, key=lambda x: (str(x[0]), str(x[1]), str(x[2])))
                if d in refs
            ],
            truncated=truncated,
        ),
    )


def _node(r: Any, depth: int) -> models.RunNode:
    return models.RunNode(
        id=r[0],
        job=models.JobRef(id=r[1], namespace=r[2], name=r[3]),
        state=r[4],
        started_at=r[5],
        ended_at=r[6],
        depth=depth,
    )
