"""GET /impact: everything downstream that a run's failure, or a job's or dataset's
change, reaches, in one answer.

The walk is the lineage graph's, downstream only (lineage.walk), so its limits and
`truncated` are the graph's. From a run it starts at the datasets the run wrote or, when
it failed, attempted: its job is the graph's start node, with edges to those outputs
alone. Every dataset node carries its freshness and owners, every job its latest run and
owners.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import msgspec
from msgspec import Meta
from psycopg import AsyncConnection
from starlette.requests import Request
from starlette.responses import Response

from metastore.access import access_of
from metastore.api import (
    asof,
    examples,
    field_impact,
    lineage,
    models,
    models_lineage,
    visibility,
)
from metastore.api.db import connection, not_found, rows
from metastore.api.operation import Operation, Resource
from metastore.api.responses import json_response
from metastore.api.sqlparts import run_ref

DEFAULT_DEPTH = 5  # jobs downstream (11 hops from a run)
UUID = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"

# The run: its job, its start (as lineage sees it), its reference as JSON; by restricted
# (a run of a hidden job is absent: 404).
RUN = f"""
SELECT lr.job_id, lr.started_at, {run_ref("r")}::text
FROM readmodel.lineage_runs lr JOIN readmodel.runs r ON r.id = lr.run_id
WHERE lr.run_id = %(run)s{{visible}}
"""
# The datasets a run named as outputs (written or attempted), by id (the visible ones).
RUN_OUTPUTS = """
SELECT DISTINCT n.dataset_id
FROM readmodel.run_edges e
JOIN readmodel.dataset_names n ON n.namespace = e.namespace AND n.name = e.name
WHERE e.run_id = %(run)s AND e.direction = 'output'{visible}
ORDER BY 1
"""

# The datasets a run, or a job as of `%(as_of)s` (asof.NOW: now), read, by id.
RUN_INPUTS = RUN_OUTPUTS.replace("'output'", "'input'")
JOB_INPUTS = f"""
SELECT DISTINCT n.dataset_id
FROM {asof.job_edges_at("%(job)s::uuid", "input")} e
JOIN readmodel.dataset_names n ON n.namespace = e.namespace AND n.name = e.name{{visible}}
ORDER BY 1
"""


# (each unrestricted and restricted, binding `%(readable)s`)
DATASET_VISIBLE = visibility.mark("dataset", "n.dataset_id")
RUNS = visibility.both(RUN.format(visible=visibility.mark("run", "r")))
RUNS_OUTPUTS = visibility.both(RUN_OUTPUTS.format(visible=DATASET_VISIBLE))
RUNS_INPUTS = visibility.both(RUN_INPUTS.format(visible=DATASET_VISIBLE))
JOBS_INPUTS = visibility.both(
    JOB_INPUTS.format(visible=visibility.mark("dataset", "n.dataset_id", where=True))
)


class ImpactQuery(asof.AsOfViewed, frozen=True):
    node: Annotated[
        str,
        Meta(
            pattern=f"^(run|job|dataset):{UUID}$|{field_impact.NODE_PATTERN}",
            description="Where the failure or change is: `run:<runId>`, `job:<id>`, "
            "`dataset:<id>`, or one or more fields: `field:<dataset id>:<field>`, several "
            "joined by commas (`field:<id>:amount,field:<id>:currency`; a comma is part of "
            f"a field's name unless `field:<uuid>:` follows it), at most "
            f"{field_impact.MAX_FIELDS}.",
            examples=[f"field:{examples.RUN_ID}:amount"],
        ),
    ]
    depth: lineage.JobHops = DEFAULT_DEPTH
    max_nodes: Annotated[
        int,
        Meta(ge=1, le=lineage.NODE_LIMIT, description="Node limit; past it `truncated` is set."),
    ] = lineage.NODE_LIMIT


OP = Operation(
    "GET",
    "/impact",
    "getImpact",
    "What a failed run, or a changed job or dataset, reaches downstream",
    models_lineage.Impact,
    tag="lineage",
    query=ImpactQuery,
    expensive=True,
    not_found=True,
    description="Everything downstream of `node` within `depth` jobs, as the lineage graph "
    "(the same walk, downstream only, its limits, `beyond` and `truncated`): every dataset with "
    "its freshness (last successful write, a failed attempt after it, stale and why) and "
    "owners, every job that reads one with its latest run and owners. From a run, the walk "
    "starts at "
    "the datasets that run wrote or, when it FAILed or ABORTed, attempted to write: its "
    "job is the start node (depth 0), with edges to those datasets alone. From a job, its "
    "outputs; from a dataset, itself. With `as_of`: as the graph was then (a run started "
    "after `as_of` answers 404 of type `not-yet`); `view` and `since` as in `/lineage`. "
    + models.WRITE_RULE
    + lineage.HIDDEN_NODES,
)
resource = Resource()

_run_ref = msgspec.json.Decoder(models.RunRef)


@resource.add(OP)
async def get_impact(request: Request) -> Response:
    query: ImpactQuery = OP.parse_query(request)
    if query.node.startswith("field:"):
        return await _field_impact(request, query)
    kind, start = lineage.parse_node(query.node, "`run:<uuid>`, `job:<uuid>` or `dataset:<uuid>`")
    run = None
    outputs: list[uuid.UUID] | None = None
    read: list[uuid.UUID] = []
    access = await access_of(request)
    restricted = access.restricted
    readable = access.sql_params() if restricted else {}
    async with connection(request) as conn:
        if kind == "run":
            found, outputs, read = await _run(conn, start, restricted, readable)
            asof.check_seen("run", start, found[1], query.as_of)
            run = _run_ref.decode(found[2])
            kind, start = "job", found[0]
        elif kind == "job":
            moment = query.as_of or asof.NOW  # (now: as of now, as the walk reads it)
            args = {"job": start, "as_of": moment} | readable
            read = [r[0] for r in await rows(conn, JOBS_INPUTS[restricted], args)]
        # the inputs' details (their freshness gives the causes) with the graph's datasets':
        # one statement and one walk upstream for both
        walked = await lineage.walk_rows(
            conn,
            kind,
            start,
            up=False,
            down=True,
            as_of=query.as_of,
            run_outputs=outputs,
            access=access,
            also=read,
            **lineage.bounds(query),
        )
    graph = lineage.graph_of(walked)
    if kind == "dataset":  # (its freshness is the start node's)
        node = graph.nodes[0]
        assert isinstance(node, models_lineage.DatasetNode)
        fresh = [(models.DatasetRef(node.id, node.namespace, node.name), node.freshness)]
    else:
        fresh = [
            (models.DatasetRef(d, x.namespace or "", x.name or ""), x.freshness)
            for d, x in sorted((d, walked.details[d]) for d in set(read) if d in walked.details)
        ]
    return _answer(request, query, run, fresh, graph)


async def _run(
    conn: AsyncConnection[Any], run: uuid.UUID, restricted: bool, readable: dict[str, Any]
) -> tuple[Any, list[uuid.UUID], list[uuid.UUID]]:
    """The run's row of RUN (404 when unknown or hidden), the datasets it named as outputs
    and those it read, in one round trip."""
    args = {"run": run} | readable
    async with (
        conn.pipeline(),
        conn.cursor() as run_at,
        conn.cursor() as outputs_at,
        conn.cursor() as inputs_at,
    ):
        await run_at.execute(RUNS[restricted], args)
        await outputs_at.execute(RUNS_OUTPUTS[restricted], args)
        await inputs_at.execute(RUNS_INPUTS[restricted], args)
        found = await run_at.fetchone()
        outputs = [r[0] for r in await outputs_at.fetchall()]
        read = [r[0] for r in await inputs_at.fetchall()]
    if found is None:
        raise not_found("run", run)
    return found, outputs, read


async def _field_impact(request: Request, query: ImpactQuery) -> Response:
    """The impact of a change to fields: their dependent fields and datasets."""
    access = await access_of(request)
    async with connection(request) as conn:
        found = await field_impact.walk(
            conn,
            field_impact.parse(query.node),
            query.depth,
            query.max_nodes,
            query.as_of,
            asof.window(query.view, query.since),
            access,
        )
    fresh = [(models.DatasetRef(n.id, n.namespace, n.name), n.freshness) for n in found.start]
    graph = models_lineage.LineageGraph(
        nodes=list(found.nodes), edges=[], truncated=found.truncated
    )
    return _answer(request, query, None, fresh, graph, found.columns)


def _answer(
    request: Request,
    query: ImpactQuery,
    run: models.RunRef | None,
    fresh: list[tuple[models.DatasetRef, models.DatasetFreshness]],
    graph: models_lineage.LineageGraph,
    columns: list[models_lineage.ColumnEdge] | None = None,
) -> Response:
    return json_response(
        request,
        models_lineage.Impact(
            node=query.node,
            run=run,
            causes=causes(fresh),
            nodes=graph.nodes,
            edges=graph.edges,
            truncated=graph.truncated,
            columns=columns or [],
        ),
    )


def causes(
    fresh: list[tuple[models.DatasetRef, models.DatasetFreshness]],
) -> list[models_lineage.UpstreamFailure]:
    """The root failed runs behind these datasets' freshness, each once, through the
    dataset (its writer failed, or a failure upstream of it reached it)."""
    found: dict[uuid.UUID, models_lineage.UpstreamFailure] = {}
    for dataset, freshness in fresh:
        for why in freshness.stale_reasons:
            if why.run is not None and why.reason != "input_rewritten":
                failure = models_lineage.UpstreamFailure(run=why.run, at=why.at, via=dataset)
                found.setdefault(why.run.id, failure)
    return sorted(found.values(), key=lambda c: (c.at, str(c.run.id)), reverse=True)
