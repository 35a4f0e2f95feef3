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
from collections.abc import Callable
from typing import Annotated

import msgspec
from msgspec import Meta
from starlette.requests import Request
from starlette.responses import Response

from metastore.access import Access, access_of
from metastore.api import asof, dataset_nodes, lineage, models, visibility
from metastore.api.db import connection, not_found, row, rows
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


def _by_shape(statement: str, visible: Callable[[Access], str]) -> dict[bool, str]:
    """The statement unrestricted and restricted (bound `%(readable)s`)."""
    return {r: statement.format(visible=visible(lineage.SHAPES[r])) for r in (False, True)}


RUNS = _by_shape(RUN, lambda a: visibility.run_visible(a, "r"))
RUNS_OUTPUTS = _by_shape(RUN_OUTPUTS, lambda a: visibility.dataset_visible(a, "n.dataset_id"))
RUNS_INPUTS = _by_shape(RUN_INPUTS, lambda a: visibility.dataset_visible(a, "n.dataset_id"))
JOBS_INPUTS = _by_shape(
    JOB_INPUTS,
    lambda a: " WHERE true" + visibility.dataset_visible(a, "n.dataset_id") if a.restricted else "",
)


class ImpactQuery(msgspec.Struct, frozen=True):
    node: Annotated[
        str,
        Meta(
            pattern=f"^(run|job|dataset):{UUID}$",
            description="Where the failure or change is: `run:<runId>`, `job:<id>` or "
            "`dataset:<id>`.",
        ),
    ]
    depth: lineage.JobHops = DEFAULT_DEPTH
    max_nodes: Annotated[
        int,
        Meta(ge=1, le=lineage.NODE_LIMIT, description="Node limit; past it `truncated` is set."),
    ] = lineage.NODE_LIMIT
    as_of: asof.AsOf = None
    view: asof.View = "latest"
    since: asof.Since = None


OP = Operation(
    "GET",
    "/impact",
    "getImpact",
    "What a failed run, or a changed job or dataset, reaches downstream",
    models.Impact,
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
    kind, start = lineage.parse_node(query.node, "`run:<uuid>`, `job:<uuid>` or `dataset:<uuid>`")
    run = None
    outputs: list[uuid.UUID] | None = None
    read: list[uuid.UUID] = []
    access = await access_of(request)
    restricted = access.restricted
    readable = access.sql_params() if restricted else {}
    async with connection(request) as conn:
        if kind == "run":
            found = await row(conn, RUNS[restricted], {"run": start} | readable)
            if found is None:
                raise not_found("run", start)
            asof.check_seen("run", start, found[1], query.as_of)
            run = _run_ref.decode(found[2])
            outputs = [
                r[0] for r in await rows(conn, RUNS_OUTPUTS[restricted], {"run": start} | readable)
            ]
            kind, start = "job", found[0]
            read = [
                r[0] for r in await rows(conn, RUNS_INPUTS[restricted], {"run": run.id} | readable)
            ]
        elif kind == "job":
            moment = query.as_of or asof.NOW  # (now: as of now, as the walk reads it)
            args = {"job": start, "as_of": moment} | readable
            read = [r[0] for r in await rows(conn, JOBS_INPUTS[restricted], args)]
        graph = await lineage.walk(
            conn,
            kind,
            start,
            up=False,
            down=True,
            depth=query.depth,
            max_nodes=query.max_nodes,
            as_of=query.as_of,
            run_outputs=outputs,
            window=asof.window(query.view, query.since),
            access=access,
        )
        if kind == "dataset":  # (its freshness is the start node's)
            node = graph.nodes[0]
            assert isinstance(node, models.DatasetNode)
            fresh = [(models.DatasetRef(node.id, node.namespace, node.name), node.freshness)]
        else:
            details = await dataset_nodes.of(conn, read, query.as_of, access)
            fresh = [
                (models.DatasetRef(d, x.namespace or "", x.name or ""), x.freshness)
                for d, x in sorted(details.items())
            ]
    return json_response(
        request,
        models.Impact(
            node=query.node,
            run=run,
            causes=causes(fresh),
            nodes=graph.nodes,
            edges=graph.edges,
            truncated=graph.truncated,
        ),
    )


def causes(
    fresh: list[tuple[models.DatasetRef, models.DatasetFreshness]],
) -> list[models.UpstreamFailure]:
    """The root failed runs behind these datasets' freshness, each once, through the
    dataset (its writer failed, or a failure upstream of it reached it)."""
    found: dict[uuid.UUID, models.UpstreamFailure] = {}
    for dataset, freshness in fresh:
        for why in freshness.stale_reasons:
            if why.run is not None and why.reason != "input_rewritten":
                failure = models.UpstreamFailure(run=why.run, at=why.at, via=dataset)
                found.setdefault(why.run.id, failure)
    return sorted(found.values(), key=lambda c: (c.at, str(c.run.id)), reverse=True)
