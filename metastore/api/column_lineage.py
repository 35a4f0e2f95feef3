"""GET /datasets/{dataset_id}/column-lineage: the field edges around a dataset, now or as of T.

The walk goes breadth first in Python, one statement per level and direction (as
/lineage/runs does), over nodes (dataset id, field): each field is expanded once however
many paths reach it, and the walk stops at the depth asked for, at limits.EDGE_LIMIT
edges kept or limits.VISIT_LIMIT edges looked at, answering `truncated`. Each statement
looks edges up by name through the indexes of column_lineage, and only under the names
of a dataset that have edges at all (a dataset with 2,001 names once cost 2,001 scans
per field). As of T, the edges each job's latest run by then reported
(readmodel.run_column_lineage) are found per report, whose `edges` object is read once
however many of its fields the walk needs (it used to be read again for each one).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta
from psycopg import AsyncConnection
from starlette.requests import Request
from starlette.responses import Response

from metastore.api import asof, limits, models, params, parts
from metastore.api.datasets import DatasetPath
from metastore.api.db import connection, not_found, rows
from metastore.api.operation import Operation, Resource
from metastore.api.responses import json_response

# The names of the frontier's datasets under which column_lineage has edges on the `near`
# side (out: upstream, in: downstream): one probe each, ordered as the index is, so that
# it stays an index probe whatever the planner guesses of a name's edges.
NAMES_WITH_EDGES = """
SELECT n.dataset_id, n.namespace, n.name
FROM readmodel.dataset_names n
CROSS JOIN LATERAL (
    SELECT 1 FROM readmodel.column_lineage c
    WHERE c.{near}_namespace = n.namespace AND c.{near}_name = n.name
    ORDER BY c.{near}_namespace, c.{near}_name, c.{near}_field
    LIMIT 1) e
WHERE n.dataset_id = ANY(%(ids)s::uuid[])
"""
# The edges of a level, looked up by the names (and fields: NULL for every field of the
# start dataset) bound as arrays, so the planner knows how many lookups there are (a
# dataset's names once came from a subquery it guessed at 2,001 rows, and it scanned the
# table). Rows: the six names, the latest report's transformations, job and run, the
# first EDGE_JOBS jobs that reported it and how many did, and its key.
LEVEL = f"""
SELECT c.out_namespace, c.out_name, c.out_field, c.in_namespace, c.in_name, c.in_field,
       c.transformations::text, c.job_id, c.run_id,
       c.job_ids[1:{limits.EDGE_JOBS}], cardinality(c.job_ids),
       replace(c.edge_key::text, '-', '')
FROM unnest(%(namespaces)s::text[], %(names)s::text[], %(fields)s::text[])
     AS k(namespace, name, field)
JOIN readmodel.column_lineage c
  ON c.{{near}}_namespace = k.namespace AND c.{{near}}_name = k.name {{field}}
LIMIT %(cap)s
"""
FIELD = "AND c.{near}_field = k.field"
# The datasets of the names at the far ends of a level's edges (a wide table's 3,000 edges
# name one), once each.
DATASETS_OF = """
SELECT n.namespace, n.name, n.dataset_id
FROM unnest(%(namespaces)s::text[], %(names)s::text[]) AS k(namespace, name)
JOIN readmodel.dataset_names n ON n.namespace = k.namespace AND n.name = k.name
"""


def _near(direction: str) -> str:
    return "out" if direction == "up" else "in"


def _level(direction: str, start: bool) -> str:
    near = _near(direction)
    return LEVEL.format(near=near, field="" if start else FIELD.format(near=near))


LEVELS = {(d, start): _level(d, start) for d in ("up", "down") for start in (True, False)}
NAMES = {d: NAMES_WITH_EDGES.format(near=_near(d)) for d in ("up", "down")}

# As of T, a field pair is held by the latest counted report that has its key: a job's
# static lineage (the nil run) declared by then, or the report of the job's latest run
# started by then. For each output asked about, its counted reports newest first (by the
# index run_column_lineage_latest), `chunk` of them past `(seen, seq)`, each with the
# asked keys it has: a report's `edges` is read (and decompressed) once however many keys
# are looked up in it (`|| '{}'` makes the in-memory copy they are looked up in; read
# once per key, one 3,000-field report took seconds).
COUNTED = f"""CASE WHEN r.run_id = '{asof.STATIC_RUN}' THEN r.first_seen <= %(as_of)s
               ELSE r.run_id = {asof.latest_run("r.job_id")} END"""
HELD = """
WITH outs AS (
    SELECT * FROM unnest(%(out_namespaces)s::text[], %(out_names)s::text[],
                         %(seen)s::timestamptz[], %(seqs)s::bigint[])
         AS o(out_namespace, out_name, seen, seq)
),
asked AS (
    SELECT out_namespace, out_name, array_agg(key) AS keys
    FROM unnest(%(key_namespaces)s::text[], %(key_names)s::text[], %(keys)s::text[])
         AS k(out_namespace, out_name, key)
    GROUP BY 1, 2
)
SELECT o.out_namespace, o.out_name, r.last_seen, r.last_seq, r.job_id, h.key,
       h.transformations
FROM outs o
JOIN asked a ON a.out_namespace = o.out_namespace AND a.out_name = o.out_name
CROSS JOIN LATERAL (
    SELECT r.job_id, r.last_seen, r.last_seq, r.edges
    FROM readmodel.run_column_lineage r
    WHERE r.out_namespace = o.out_namespace AND r.out_name = o.out_name
      AND (o.seen IS NULL OR (r.last_seen, r.last_seq) < (o.seen, o.seq))
      AND __COUNTED__
    ORDER BY r.last_seen DESC, r.last_seq DESC
    LIMIT %(chunk)s) r
CROSS JOIN LATERAL (SELECT r.edges || '{}'::jsonb AS edges OFFSET 0) e
LEFT JOIN LATERAL (
    SELECT k.key, (e.edges -> k.key)::text AS transformations
    FROM unnest(a.keys) AS k(key) WHERE e.edges ? k.key) h ON true
ORDER BY o.out_namespace, o.out_name, r.last_seen DESC, r.last_seq DESC
""".replace("__COUNTED__", COUNTED)
# Reports read per output in each round: most pairs are held by the newest counted one.
CHUNKS = (4, 64, 1024, 16384)

# What the answer names: the dataset of each name (its display name; as of T, its
# display name then), and the jobs.
NAME_REFS = """
SELECT n.namespace, n.name, d.id, {display}
FROM unnest(%(namespaces)s::text[], %(names)s::text[]) AS k(namespace, name)
JOIN readmodel.dataset_names n ON n.namespace = k.namespace AND n.name = k.name
JOIN readmodel.datasets d ON d.id = n.dataset_id{display_join}
"""
JOB_REFS = "SELECT id, namespace, name FROM readmodel.jobs WHERE id = ANY(%(ids)s::uuid[])"
DATASET_REF = """
SELECT d.id, {display}, d.first_seen FROM readmodel.datasets d{display_join}
WHERE d.id = coalesce((SELECT merged_into FROM readmodel.datasets WHERE id = %(id)s), %(id)s)
"""
DISPLAY_NOW = {"display": "d.namespace, d.name", "display_join": ""}
DISPLAY_AS_OF = {
    "display": "coalesce(dn.namespace, d.namespace), coalesce(dn.name, d.name)",
    "display_join": f"\nLEFT JOIN LATERAL {asof.display_name_at('d.id')} dn ON true",
}

Direction = Annotated[
    Literal["upstream", "downstream", "both"],
    Meta(description="Follow the data flow backwards, forwards, or both ways."),
]
_DIRS = {"upstream": ["up"], "downstream": ["down"], "both": ["up", "down"]}


class ColumnLineageQuery(msgspec.Struct, frozen=True):
    direction: Direction = "upstream"
    depth: Annotated[int, Meta(ge=1, le=limits.MAX_DEPTH, description="Hops of field edges.")] = (
        limits.DEFAULT_DEPTH
    )
    field: Annotated[
        params.Name | None,
        Meta(
            description="Only the lineage of this field of the dataset: upstream, the fields "
            "it derives from; downstream, those derived from it (no edges: a field without).",
        ),
    ] = None
    as_of: asof.AsOf = None


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
    "its latest report (`job`), and the jobs that ever reported it (`jobs`: up to "
    f"{limits.EDGE_JOBS} of them, by name; `job_count`: all of them). The walk expands "
    f"each field once, nearest first, and stops at {limits.EDGE_LIMIT:,} edges or "
    f"{limits.VISIT_LIMIT:,} edges looked at, with `truncated` true. With `as_of`, the "
    "field edges each job's latest run started at or before `as_of` reported (in its "
    "latest `columnLineage` facet for the dataset), and those of the job's latest static "
    "declaration (JobEvent) if it had made one by then. `field` follows one field of the "
    "dataset.",
)
resource = Resource()

EdgeKey = tuple[str, str, str, str, str, str]  # out namespace, name, field; in ...


@dataclass
class _Edge:
    depth: int
    transformations: str
    job: uuid.UUID | None
    jobs: list[uuid.UUID]
    job_count: int


@dataclass
class _Walk:
    """The edges found so far (least depth each) and what the walk has looked at."""

    edges: dict[EdgeKey, _Edge] = field(default_factory=dict)
    visited: int = 0
    truncated: bool = False


async def _held_at(
    conn: AsyncConnection[Any], found: list[Any], as_of: Any
) -> tuple[dict[tuple[str, str, str], tuple[str, uuid.UUID]], bool]:
    """For the level's rows, the pairs held at `as_of`: (out namespace, out name, key) ->
    (transformations, job) of the latest counted report that has it; and whether it gave
    up on some (past the last of CHUNKS reports of an output)."""
    held: dict[tuple[str, str, str], tuple[str, uuid.UUID]] = {}
    wanted: dict[tuple[str, str], set[str]] = {}
    for r in found:
        wanted.setdefault((r[0], r[1]), set()).add(r[11])
    after: dict[tuple[str, str], tuple[Any, Any]] = {out: (None, None) for out in wanted}
    for chunk in CHUNKS:
        outs = [out for out, keys in wanted.items() if keys]
        if not outs:
            return held, False
        pairs = [(out, key) for out in outs for key in wanted[out]]
        read: dict[tuple[str, str], int] = {}
        for ns, name, seen, seq, job, key, transformations in await rows(
            conn,
            HELD,
            {
                "out_namespaces": [o[0] for o in outs],
                "out_names": [o[1] for o in outs],
                "seen": [after[o][0] for o in outs],
                "seqs": [after[o][1] for o in outs],
                "key_namespaces": [p[0][0] for p in pairs],
                "key_names": [p[0][1] for p in pairs],
                "keys": [p[1] for p in pairs],
                "chunk": chunk,
                "as_of": as_of,
            },
        ):
            out = (ns, name)
            if after[out] != (seen, seq):
                after[out] = (seen, seq)
                read[out] = read.get(out, 0) + 1
            if key is not None and key in wanted[out]:
                wanted[out].discard(key)
                held[(ns, name, key)] = (transformations, job)
        for out in outs:
            if read.get(out, 0) < chunk:
                wanted[out].clear()  # no more counted reports: the rest is not held
    return held, any(wanted.values())


async def _walk(
    conn: AsyncConnection[Any],
    start: uuid.UUID,
    direction: str,
    depth: int,
    start_field: str | None,
    as_of: Any,
    walk: _Walk,
) -> None:
    """Adds the edges within `depth` of dataset `start` (of its field `start_field`, else
    of every field) in `direction` to `walk`."""
    frontier: list[tuple[uuid.UUID, str | None]] = [(start, start_field)]
    seen: set[tuple[uuid.UUID, str]] = set()
    names: dict[uuid.UUID, list[tuple[str, str]]] = {}  # a dataset's names with edges
    for level in range(1, depth + 1):
        unknown = list({d for d, _ in frontier if d not in names})
        if unknown:
            for d in unknown:
                names[d] = []
            for d, ns, name in await rows(conn, NAMES[direction], {"ids": unknown}):
                names[d].append((ns, name))
        lookups = [(ns, name, f) for d, f in frontier for ns, name in names[d]]
        if not lookups:
            return
        cap = limits.VISIT_LIMIT - walk.visited
        found = await rows(
            conn,
            LEVELS[(direction, level == 1 and start_field is None)],
            {
                "namespaces": [k[0] for k in lookups],
                "names": [k[1] for k in lookups],
                "fields": [k[2] for k in lookups],
                "cap": cap + 1,
            },
        )
        if len(found) > cap:
            walk.truncated = True
            found = found[:cap]
        walk.visited += len(found)
        far_names = {(r[3], r[4]) if direction == "up" else (r[0], r[1]) for r in found}
        datasets = {
            (ns, name): d
            for ns, name, d in await rows(
                conn,
                DATASETS_OF,
                {"namespaces": [n[0] for n in far_names], "names": [n[1] for n in far_names]},
            )
        }
        held = None
        if as_of is not None and found:
            held, gave_up = await _held_at(conn, found, as_of)
            walk.truncated |= gave_up
        next_frontier: dict[tuple[uuid.UUID, str], None] = {}
        for r in found:
            key: EdgeKey = (r[0], r[1], r[2], r[3], r[4], r[5])
            transformations, job = r[6], r[7]
            if held is not None:
                at = held.get((r[0], r[1], r[11]))
                if at is None:
                    continue  # not reported by a run (or declaration) that counts at T
                transformations, job = at
            if key not in walk.edges:  # (found before: at a lesser depth, or the other way)
                if len(walk.edges) >= limits.EDGE_LIMIT:
                    walk.truncated = True
                    continue
                walk.edges[key] = _Edge(level, transformations, job, r[9], r[10])
            far_name, far_field = (
                ((r[3], r[4]), r[5]) if direction == "up" else ((r[0], r[1]), r[2])
            )
            far = datasets.get(far_name)
            if far is None or far == start or (far, far_field) in seen:
                continue
            seen.add((far, far_field))
            next_frontier[(far, far_field)] = None
        if walk.truncated or not next_frontier:
            return
        frontier = list(next_frontier)


@resource.add(COLUMN_OP)
async def get_column_lineage(request: Request) -> Response:
    path: DatasetPath = COLUMN_OP.parse_path(request)
    query: ColumnLineageQuery = COLUMN_OP.parse_query(request)
    walk = _Walk()
    display = DISPLAY_NOW if query.as_of is None else DISPLAY_AS_OF
    async with connection(request) as conn:
        found = await rows(
            conn, DATASET_REF.format(**display), {"id": path.dataset_id, "as_of": query.as_of}
        )
        if not found:
            raise not_found("dataset", path.dataset_id)
        dataset = found[0]
        asof.check_seen("dataset", path.dataset_id, dataset[3], query.as_of)
        for direction in _DIRS[query.direction]:
            await _walk(conn, dataset[0], direction, query.depth, query.field, query.as_of, walk)
        names = {(k[0], k[1]) for k in walk.edges} | {(k[3], k[4]) for k in walk.edges}
        refs = {
            (r[0], r[1]): models.DatasetRef(id=r[2], namespace=r[3], name=r[4])
            for r in await rows(
                conn,
                NAME_REFS.format(**display),
                {
                    "namespaces": [n[0] for n in names],
                    "names": [n[1] for n in names],
                    "as_of": query.as_of,
                },
            )
        }
        job_ids = {e.job for e in walk.edges.values() if e.job} | {
            j for e in walk.edges.values() for j in e.jobs
        }
        jobs = {
            r[0]: models.JobRef(id=r[0], namespace=r[1], name=r[2])
            for r in await rows(conn, JOB_REFS, {"ids": list(job_ids)})
        }
    edges = []
    for key, e in sorted(walk.edges.items(), key=lambda item: (item[1].depth, item[0])):
        edges.append(
            models.ColumnEdge(
                from_=models.ColumnRef(
                    dataset=refs.get((key[3], key[4])), namespace=key[3], name=key[4], field=key[5]
                ),
                to=models.ColumnRef(
                    dataset=refs.get((key[0], key[1])), namespace=key[0], name=key[1], field=key[2]
                ),
                transformations=parts.transformations(e.transformations),
                job=jobs.get(e.job) if e.job else None,
                jobs=sorted(
                    (jobs[j] for j in e.jobs if j in jobs), key=lambda j: (j.namespace, j.name)
                ),
                job_count=e.job_count,
                depth=e.depth,
            )
        )
    return json_response(
        request,
        models.ColumnLineage(
            dataset=models.DatasetRef(id=dataset[0], namespace=dataset[1], name=dataset[2]),
            edges=edges,
            truncated=walk.truncated,
        ),
    )
