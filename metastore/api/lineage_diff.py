"""GET /lineage/diff: what changed in the graph around a node between two moments.

The graph as of `from` and as of `to` (lineage.walk_rows, the same walk and limits as
`/lineage?as_of=`), compared by node key and edge, and the schema of every dataset in
either graph at both moments (its latest version by each, asof.schema_at), compared
field by field, types engine-neutrally (metastore.schema_types: `long` is `bigint`). What
a dataset node shows (dataset_nodes) is read only for the nodes
added or removed: most of a graph is in both.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Annotated, Any

import msgspec
from msgspec import Meta
from psycopg import AsyncConnection
from starlette.requests import Request
from starlette.responses import Response

from metastore import schema_compat
from metastore.access import Access, access_of
from metastore.api import (
    asof,
    column_lineage,
    dataset_nodes,
    lineage,
    models,
    models_lineage,
    visibility,
)
from metastore.api.breaking_models import BreakingChange, DependentField
from metastore.api.db import connection, rows
from metastore.api.operation import Operation, Resource
from metastore.api.responses import json_response
from metastore.problems import ProblemError
from metastore.schema_types import same_type

# Per dataset: its display name at `to`, and its schema version (number, fields) at `from`
# and at `to` when it had one at both and they differ.
VERSION = """(
    SELECT v.fields::text AS fields, (
        SELECT count(*) FROM readmodel.dataset_versions o
        WHERE o.dataset_id = v.dataset_id AND (o.event_time, o.seq) <= (v.event_time, v.seq)
    ) AS number
    FROM readmodel.dataset_versions v
    WHERE v.dataset_id = d.id AND v.fields_hash = {hash})"""
SCHEMA_CHANGES = f"""
SELECT d.id, dn.namespace, dn.name, vf.number, vf.fields, vt.number, vt.fields
FROM unnest(%(datasets)s::uuid[]) AS d(id)
CROSS JOIN LATERAL (SELECT {asof.schema_at("d.id", "%(from)s")} AS hash) hf
CROSS JOIN LATERAL (SELECT {asof.schema_at("d.id", "%(as_of)s")} AS hash) ht
CROSS JOIN LATERAL {VERSION.format(hash="hf.hash")} vf
CROSS JOIN LATERAL {VERSION.format(hash="ht.hash")} vt
LEFT JOIN LATERAL {{display}} dn ON true
WHERE hf.hash <> ht.hash
ORDER BY dn.namespace, dn.name, d.id
"""
# Restricted, a dataset's display name at `to` among its readable names (never a hidden
# one): its most table-like readable name first seen by then.
VISIBLE_DISPLAY_AT = f"""(
    SELECT n.namespace, n.name FROM readmodel.dataset_names n
    WHERE n.dataset_id = d.id AND n.first_seen <= %(as_of)s{{visible}}
    ORDER BY {asof.display_rank("n")}, n.first_seen, n.namespace, n.name LIMIT 1)"""
SCHEMA_CHANGES_BY_SHAPE = {
    False: SCHEMA_CHANGES.format(display=asof.display_name_at("d.id")),
    True: SCHEMA_CHANGES.format(
        display=VISIBLE_DISPLAY_AT.format(
            visible=visibility.name_visible(visibility.RESTRICTED, "n")
        )
    ),
}


class DiffQuery(asof.Viewed, frozen=True):
    node: Annotated[
        str,
        Meta(
            pattern=lineage.NODE_PATTERN,
            description="The node whose graph to compare: `dataset:<id>` or `job:<id>`.",
        ),
    ]
    from_: Annotated[
        dt.datetime,
        Meta(
            tz=True,
            description="The earlier moment (RFC 3339, by eventTime).",
            examples=[asof.EXAMPLE],
        ),
    ] = msgspec.field(name="from")
    to: (
        Annotated[
            dt.datetime,
            Meta(
                tz=True,
                description="The later moment (RFC 3339, by eventTime). Absent: now.",
                examples=["2026-12-01T09:00:00Z"],
            ),
        ]
        | None
    ) = None
    direction: lineage.Direction = "both"
    depth: lineage.JobHops = lineage.DEFAULT_DEPTH
    max_nodes: Annotated[
        int,
        Meta(
            ge=1,
            le=lineage.NODE_LIMIT,
            description="Node limit of each graph; past it `truncated` is set.",
        ),
    ] = lineage.NODE_LIMIT


OP = Operation(
    "GET",
    "/lineage/diff",
    "getLineageDiff",
    "What changed in the lineage graph around a node between two moments",
    models_lineage.LineageDiff,
    tag="lineage",
    query=DiffQuery,
    expensive=True,
    not_found=True,
    description="The graph around `node` as of `from` and as of `to` (each as "
    "`/lineage?as_of=` answers it, with `direction`, `depth`, the node limit, `view` and "
    "`since`), compared: "
    "the nodes and edges added and removed (an edge names the run that holds it, "
    "`last_run`), and for each dataset in either graph whose "
    "schema version at `from` and at `to` differ, the fields added, removed and changed in "
    "type (a failed or aborted run's schema is no version: it changes nothing), and the "
    "changes that can break a reader (`breaking`), each with the fields downstream it "
    "reaches by column lineage as of `to` (within `depth` field hops; the walk of "
    "`/impact?node=field:...`). Breaking: a field removed; narrowed (a widening reversed); "
    "its type changed to one that does not hold the old one's values (`string` -> `int`, "
    "`int` -> `string`); `nullable` true (or absent) become false. Not breaking: a field "
    "added; widened, types compared engine-neutrally (`long` is `bigint`): tinyint < "
    "smallint < integer < bigint, an integer to a decimal with as many integer digits, up "
    "to integer to `double` (smallint to `real`), `real` to `double`, `decimal(p,s)` to one "
    "with no fewer integer digits and decimals, `date` to `timestamp`, `char` to `string`, "
    "an array's or map value's element widened; a type unknown on one side. `from` is "
    "usually the earlier moment; the same moment twice is no change. A node "
    "first seen after `from` makes the graph at `from` empty; first seen after `to`, 404 "
    "of type `not-yet`. " + models.WRITE_RULE + lineage.HIDDEN_NODES,
)
resource = Resource()


def _fields(fields: Any, prefix: str = "") -> Iterator[tuple[str, str | None, bool | None]]:
    """(path, type, nullable) of each field of a `schema` facet, nested ones as
    `parent.child` (nullable: the `nullable` key some producers add, else None)."""
    for field in fields if isinstance(fields, list) else ():
        if not isinstance(field, dict) or not isinstance(field.get("name"), str):
            continue
        path = prefix + field["name"]
        kind, nullable = field.get("type"), field.get("nullable")
        yield (
            path,
            kind if isinstance(kind, str) else None,
            nullable if isinstance(nullable, bool) else None,
        )
        yield from _fields(field.get("fields"), path + ".")


def schema_change(r: Any) -> models_lineage.SchemaChange:
    """The change between two versions' fields, each breaking change marked (its `reaches`
    left empty: `reach` fills them)."""
    before = {p: (t, n) for p, t, n in _fields(msgspec.json.decode(r[4]))}
    after = {p: (t, n) for p, t, n in _fields(msgspec.json.decode(r[6]))}
    breaking = [
        BreakingChange(field=p, change="removed", from_type=t, to_type=None, reaches=[],
                       reaches_truncated=False)
        for p, (t, _) in before.items()
        if p not in after
    ]  # fmt: skip
    changed = []
    for p, (t, nullable) in after.items():
        if p not in before:
            continue
        old_type, old_nullable = before[p]
        how = schema_compat.type_change(old_type, t)
        if not same_type(old_type, t):
            changed.append(models_lineage.TypeChange(p, old_type, t, breaking=how is not None))
        if how is None and schema_compat.made_required(old_nullable, nullable):
            how = "made_required"
        if how is not None:
            breaking.append(BreakingChange(p, how, old_type, t, [], False))  # type: ignore[arg-type]
    return models_lineage.SchemaChange(
        dataset=models.DatasetRef(id=r[0], namespace=r[1], name=r[2]),
        from_version=r[3],
        to_version=r[5],
        added=[
            models_lineage.FieldType(name=n, type=t)
            for n, (t, _) in after.items()
            if n not in before
        ],
        removed=[
            models_lineage.FieldType(name=n, type=t)
            for n, (t, _) in before.items()
            if n not in after
        ],
        type_changed=changed,
        breaking=breaking,
    )


async def reach(
    conn: AsyncConnection[Any],
    change: models_lineage.SchemaChange,
    depth: int,
    moment: dt.datetime,
    window: tuple[str, dt.datetime | None],
    access: Access,
) -> None:
    """Fills each breaking change's `reaches`: one column walk downstream from all of the
    dataset's breaking fields (as `/impact?node=field:...` walks), then each field's share
    of it traced in memory."""
    if not change.breaking:
        return
    start = change.dataset.id
    walk = column_lineage.Walk()
    starts = [(start, b.field) for b in change.breaking]
    await column_lineage.walk_fields(conn, starts, "down", depth, moment, walk, window, access)
    edges = await column_lineage.column_edges(conn, walk, moment, access)
    below: dict[tuple[Any, str], list[models_lineage.ColumnRef]] = {}
    for e in edges:
        source = e.from_.dataset.id if e.from_.dataset else (e.from_.namespace, e.from_.name)
        below.setdefault((source, e.from_.field), []).append(e.to)
    for b in change.breaking:
        found: dict[tuple[Any, str], DependentField] = {}
        frontier: list[tuple[Any, str]] = [(start, b.field)]
        for hops in range(1, depth + 1):
            reached = []
            for node in frontier:
                for to in below.get(node, ()):
                    key = (to.dataset.id if to.dataset else (to.namespace, to.name), to.field)
                    if key in found or key == (start, b.field):
                        continue
                    dataset_id = to.dataset.id if to.dataset else None
                    found[key] = DependentField(dataset_id, to.namespace, to.name, to.field, hops)
                    reached.append(key)
            frontier = reached
        b.reaches = list(found.values())
        b.reaches_truncated = walk.truncated


def _edge_rows(walk: lineage.Walk) -> set[tuple[str, Any, Any]]:
    """A walk's edges as (direction, job, dataset)."""
    return {(x[1], x[2], x[3]) for x in walk.links if x[0] == "edge"}


def _edge(e: models_lineage.LineageEdge) -> tuple[str, str]:
    return e.from_.key, e.to.key


@resource.add(OP)
async def get_lineage_diff(request: Request) -> Response:
    query: DiffQuery = OP.parse_query(request)
    kind, start = lineage.parse_node(query.node)
    to = query.to or dt.datetime.now(dt.UTC)
    up, down = query.direction != "downstream", query.direction != "upstream"
    window = asof.window(query.view, query.since)
    access = await access_of(request)

    async with connection(request) as conn:
        # both graphs' walks in one round trip, then their edges in another (the datasets'
        # details are read below, only for the nodes added or removed)
        after, before = await lineage.walks_at(
            conn,
            kind,
            start,
            [to, query.from_],
            up=up,
            down=down,
            access=access,
            **lineage.bounds(query),
        )
        if isinstance(after, ProblemError):
            raise after
        if isinstance(before, ProblemError):
            if before.kind != "not-yet":
                raise before
            before = lineage.Walk(found=[], links=[], details={})  # all of it is new
        had = {lineage.node_key(r): r for r in before.found}
        has = {lineage.node_key(r): r for r in after.found}
        added, removed = has.keys() - had.keys(), had.keys() - has.keys()
        either = {**had, **has}
        edges_then, edges_now = _edge_rows(before), _edge_rows(after)
        for walk, keys, moment, edges in (
            (after, added, to, edges_now - edges_then),
            (before, removed, query.from_, edges_then - edges_now),
        ):
            # the added or removed nodes, and the datasets their edges name (as then)
            ids = {either[k][1] for k in keys if k.startswith("dataset:")}
            ids |= {dataset for _, _, dataset in edges}
            walk.details = await dataset_nodes.of(conn, sorted(ids), moment, access)
        datasets = {r[1] for r in [*before.found, *after.found] if r[0] == "dataset"}
        changes = await rows(
            conn,
            SCHEMA_CHANGES_BY_SHAPE[access.restricted],
            {"datasets": sorted(datasets), "from": query.from_, "as_of": to}
            | (access.sql_params() if access.restricted else {}),
        )
        schema_changes = [schema_change(r) for r in changes]
        for change in schema_changes:
            await reach(conn, change, query.depth, to, window, access)
    graph_before, graph_after = lineage.graph_of(before, removed), lineage.graph_of(after, added)
    edges_before = {_edge(e): e for e in graph_before.edges}
    edges_after = {_edge(e): e for e in graph_after.edges}
    return json_response(
        request,
        models_lineage.LineageDiff(
            from_=query.from_,
            to=to,
            nodes_added=graph_after.nodes,
            nodes_removed=graph_before.nodes,
            edges_added=[e for k, e in edges_after.items() if k not in edges_before],
            edges_removed=[e for k, e in edges_before.items() if k not in edges_after],
            schema_changes=schema_changes,
            truncated=graph_before.truncated or graph_after.truncated,
        ),
    )
