"""GET /impact?node=field:<dataset id>:<field>: what a change to one or more fields reaches.

The walk is column lineage's (column_lineage.walk_fields), downstream from every field
asked at once, so its limits (`max_nodes` fields, EDGE_LIMIT edges, VISIT_LIMIT edges
looked at), its `as_of` rule and its authorization are column lineage's. The datasets
holding a dependent field are shown as the dataset impact shows them (dataset_nodes: owners
and freshness), nearest first. impact.py answers; this module walks.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from metastore.access import Access
from metastore.api import asof, column_lineage, dataset_nodes, lineage, models, models_lineage
from metastore.api.db import rows
from metastore.problems import InvalidParam, ProblemError

UUID = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# `field:<id>:<name>`, several joined by commas: a comma belongs to a field's name unless
# `field:<uuid>:` follows it (field names hold commas more rarely than anything else).
NODE_PATTERN = f"^field:{UUID}:.+$"
_FIELD = re.compile(f"field:({UUID}):(.+?)(?=,field:{UUID}:|$)", re.S)
MAX_FIELDS = 100  # fields in one call
NOTHING_BEYOND = models_lineage.Beyond(upstream=0, downstream=0)

# Which of `%(fields)s` a schema version of dataset `%(id)s` ever had (a removed field is
# still known: its impact is what a user asks about).
KNOWN_FIELDS = """
SELECT f.field FROM unnest(%(fields)s::text[]) AS f(field)
WHERE EXISTS (
    SELECT 1 FROM readmodel.dataset_versions v
    CROSS JOIN LATERAL jsonb_array_elements(v.fields) x
    WHERE v.dataset_id = %(id)s AND x->>'name' = f.field)
"""


def parse(node: str) -> list[tuple[uuid.UUID, str]]:
    """The (dataset, field) pairs of a `node` parameter (its pattern checked), each once."""
    found = list({(uuid.UUID(m[1]), m[2]): None for m in _FIELD.finditer(node)})
    if len(found) > MAX_FIELDS:
        reason = f"names {len(found)} fields; at most {MAX_FIELDS} in one call"
        raise ProblemError(
            400,
            f"query parameter `node` is invalid: {reason}",
            invalid_params=[InvalidParam(name="node", reason=reason)],
        )
    return found


@dataclass
class FieldImpact:
    start: list[models_lineage.DatasetNode]  # the datasets of the fields asked (depth 0)
    nodes: list[models_lineage.DatasetNode]  # the start's, then each dataset with a dependent field
    columns: list[models_lineage.ColumnEdge]
    truncated: bool


async def walk(
    conn: AsyncConnection[Any],
    fields: list[tuple[uuid.UUID, str]],
    depth: int,
    max_nodes: int,
    as_of: dt.datetime | None,
    window: tuple[str, dt.datetime | None],
    access: Access,
) -> FieldImpact:
    """Everything downstream of `fields` within `depth` field hops. 404 naming an unknown
    or hidden dataset, or a field no version of its dataset had and no edge starts at."""
    refs: dict[uuid.UUID, models.DatasetRef] = {}
    for dataset in dict.fromkeys(d for d, _ in fields):
        refs[dataset] = await column_lineage.dataset_ref(conn, dataset, as_of, access)
    starts = [(refs[d].id, f) for d, f in fields]
    found = column_lineage.Walk(max_fields=max_nodes)
    moment = asof.NOW if as_of is None else as_of  # (now: as of now)
    await column_lineage.walk_fields(conn, starts, "down", depth, moment, found, window, access)
    await _check_known(conn, fields, refs, found)
    columns = await column_lineage.column_edges(conn, found, as_of, access)
    depths = {d: 0 for d, _ in starts}
    for edge in columns:
        if edge.to.dataset is not None:
            depths.setdefault(edge.to.dataset.id, edge.depth)
    details = await dataset_nodes.of(conn, list(depths), as_of, access)
    nodes = [
        lineage.dataset_node(d, depth_, "", "", NOTHING_BEYOND, details[d])
        for d, depth_ in depths.items()
        if d in details  # (restricted: a dataset with no readable name is not shown)
    ]
    nodes.sort(key=lambda n: (n.depth, n.namespace, n.name, str(n.id)))
    return FieldImpact(
        start=[n for n in nodes if n.depth == 0],
        nodes=nodes,
        columns=columns,
        truncated=found.truncated,
    )


async def _check_known(
    conn: AsyncConnection[Any],
    fields: list[tuple[uuid.UUID, str]],
    refs: dict[uuid.UUID, models.DatasetRef],
    found: column_lineage.Walk,
) -> None:
    """404 naming the first field asked that its dataset never had in a schema and that
    no edge found starts at."""
    with_edges = {k[5] for k, e in found.edges.items() if e.depth == 1}
    by_dataset: dict[uuid.UUID, list[str]] = {}
    for dataset, field in fields:
        if field not in with_edges:
            by_dataset.setdefault(dataset, []).append(field)
    for dataset, asked in by_dataset.items():
        known = {
            r[0] for r in await rows(conn, KNOWN_FIELDS, {"fields": asked, "id": refs[dataset].id})
        }
        for field in asked:
            if field not in known:
                raise ProblemError(
                    404,
                    f"dataset {dataset} has no field {field!r}: no schema version of it "
                    "had one, and no column lineage starts at it",
                )
