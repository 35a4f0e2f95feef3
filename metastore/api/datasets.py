"""GET /datasets, /datasets/{dataset_id} and /datasets/{dataset_id}/versions.

A dataset has a stable id and several names (the one events use, the identifiers of its
`symlinks` facet, the names a catalog rule joined); the exact lookup `namespace` + `name`
resolves any of them.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from metastore.api import asof, models, params
from metastore.api.db import connection, not_found, row, rows
from metastore.api.operation import Operation, Resource
from metastore.api.pagination import decode_cursor, page
from metastore.api.responses import json_response
from metastore.api.sqlparts import like_substring

LIST_DATASETS = """
SELECT d.id, d.namespace, d.name, d.first_seen, d.last_seen, n.namespace, n.name
FROM readmodel.dataset_names n
CROSS JOIN LATERAL (
    -- OFFSET 0 keeps this a per-name lookup: flattened into a join, the planner would
    -- misjudge the display-name test (three correlated equalities) and sort everything.
    SELECT * FROM readmodel.datasets d
    WHERE d.id = n.dataset_id AND d.merged_into IS NULL {display}
    OFFSET 0
) d
WHERE true {filters}
ORDER BY n.namespace, n.name
LIMIT %(limit)s
"""
# The list walks dataset_names in its primary key order: without a namespace, the row of
# each dataset's display name; with one, each dataset's first name in that namespace
# (a dataset is in a namespace when any of its names is, symlinks included).
FILTER_DISPLAY_NAME = "AND n.namespace = d.namespace AND n.name = d.name"
FILTER_NAMESPACE = """AND n.namespace = %(namespace)s AND NOT EXISTS (
    SELECT 1 FROM readmodel.dataset_names o
    WHERE o.dataset_id = n.dataset_id AND o.namespace = n.namespace AND o.name < n.name)"""
FILTER_NAME = """AND (lower(d.name) LIKE %(pattern)s OR EXISTS (
    SELECT 1 FROM readmodel.dataset_names n
    WHERE n.dataset_id = d.id AND lower(n.name) LIKE %(pattern)s))"""
# `name` alone: datasets with a name exactly this, in any namespace (lower() for the index).
FILTER_EXACT_NAME = """AND d.id IN (
    SELECT n.dataset_id FROM readmodel.dataset_names n
    WHERE lower(n.name) = lower(%(name)s) AND n.name = %(name)s)"""
AFTER = "AND (n.namespace, n.name) > (%(after_namespace)s, %(after_name)s)"

LOOKUP_DATASET = """
SELECT d.id, d.namespace, d.name, d.first_seen, d.last_seen
FROM readmodel.dataset_names n
JOIN readmodel.datasets d ON d.id = n.dataset_id
WHERE n.namespace = %(namespace)s AND n.name = %(name)s
"""

JOBS_OF_DATASET = """
coalesce((
    SELECT json_agg(json_build_object('id', x.id, 'namespace', x.namespace, 'name', x.name)
                    ORDER BY x.namespace, x.name)
    FROM (SELECT DISTINCT j.id, j.namespace, j.name
          FROM readmodel.dataset_names n
          JOIN readmodel.job_edges e ON e.namespace = n.namespace AND e.name = n.name
          JOIN readmodel.jobs j ON j.id = e.job_id
          WHERE n.dataset_id = d.id AND e.direction = '{direction}'{held}) x
), '[]')::text
"""

# An id absorbed by a merge answers as the dataset it was merged into.
GET_DATASET = f"""
SELECT d.id, d.namespace, d.name, d.current_fields::text, d.facets::text,
       d.first_seen, d.last_seen,
       coalesce((
           SELECT json_agg(json_build_object('namespace', n.namespace, 'name', n.name,
                                             'kind', n.kind, 'symlink_type', n.symlink_type,
                                             'joined_by', n.joined_by)
                           ORDER BY n.kind, n.namespace, n.name)
           FROM readmodel.dataset_names n WHERE n.dataset_id = d.id
       ), '[]')::text,
       {JOBS_OF_DATASET.format(direction="output", held="")},
       {JOBS_OF_DATASET.format(direction="input", held="")}
FROM readmodel.datasets d
WHERE d.id = coalesce(
    (SELECT merged_into FROM readmodel.datasets WHERE id = %(id)s), %(id)s)
"""

# As of T: the schema of the latest observation by then, the jobs whose run at T (or
# static lineage by then) wrote or read it, and when it was last seen by then (its run
# edges and schema observations). Names and facets are today's.
GET_DATASET_AS_OF = f"""
SELECT d.id, d.namespace, d.name, v.fields::text, d.facets::text, d.first_seen,
       coalesce((
           SELECT max(x.t) FROM readmodel.dataset_names n CROSS JOIN LATERAL (
               SELECT max(CASE WHEN e.last_seen <= %(as_of)s THEN e.last_seen
                               ELSE e.first_seen END) AS t
               FROM readmodel.run_edges e
               WHERE e.namespace = n.namespace AND e.name = n.name
                 AND e.first_seen <= %(as_of)s
             UNION ALL
               SELECT max(o.event_time) FROM readmodel.schema_observations o
               WHERE o.namespace = n.namespace AND o.name = n.name
                 AND o.event_time <= %(as_of)s
           ) x WHERE n.dataset_id = d.id), d.first_seen),
       coalesce((
           SELECT json_agg(json_build_object('namespace', n.namespace, 'name', n.name,
                                             'kind', n.kind, 'symlink_type', n.symlink_type,
                                             'joined_by', n.joined_by)
                           ORDER BY n.kind, n.namespace, n.name)
           FROM readmodel.dataset_names n WHERE n.dataset_id = d.id
       ), '[]')::text,
       {JOBS_OF_DATASET.format(direction="output", held=" AND " + asof.edge_held())},
       {JOBS_OF_DATASET.format(direction="input", held=" AND " + asof.edge_held())}
FROM readmodel.datasets d
LEFT JOIN readmodel.dataset_versions v
  ON v.dataset_id = d.id AND v.fields_hash = {asof.schema_at("d.id")}
WHERE d.id = coalesce(
    (SELECT merged_into FROM readmodel.datasets WHERE id = %(id)s), %(id)s)
"""

# The runs that read or wrote any of the dataset's names, newest first by start; the page
# is cut before the per-run schema lookups. A run's schema: the latest its own events
# carried for the dataset in that role, else (a reader) the latest observed at its start.
RUNS_OF_DATASET = f"""
WITH page AS (
    SELECT t.run_id, t.direction, lr.started_at, lr.ended_at
    FROM (SELECT DISTINCT e.run_id, e.direction
          FROM readmodel.dataset_names n
          JOIN readmodel.run_edges e ON e.namespace = n.namespace AND e.name = n.name
          WHERE n.dataset_id = %(id)s) t
    JOIN readmodel.lineage_runs lr ON lr.run_id = t.run_id
    WHERE %(after_time)s::timestamptz IS NULL
       OR (lr.started_at, t.run_id, t.direction)
          < (%(after_time)s, %(after_run)s::uuid, %(after_role)s::text)
    ORDER BY lr.started_at DESC, t.run_id DESC, t.direction DESC
    LIMIT %(limit)s
),
versions AS (
    SELECT fields_hash, row_number() OVER (ORDER BY event_time, seq) AS version
    FROM readmodel.dataset_versions WHERE dataset_id = %(id)s
)
SELECT p.run_id, p.direction, p.started_at, p.ended_at, r.job_id, r.job_namespace,
       r.job_name, r.state,
       (SELECT v.version FROM versions v WHERE v.fields_hash = coalesce(
            (SELECT o.fields_hash FROM readmodel.schema_observations o
             JOIN readmodel.dataset_names n ON n.namespace = o.namespace AND n.name = o.name
             WHERE o.run_id = p.run_id AND o.role = p.direction AND n.dataset_id = %(id)s
             ORDER BY o.event_time DESC, o.seq DESC LIMIT 1),
            CASE WHEN p.direction = 'input' THEN {asof.schema_at("%(id)s", "p.started_at")} END))
FROM page p
JOIN readmodel.runs r ON r.id = p.run_id
ORDER BY p.started_at DESC, p.run_id DESC, p.direction DESC
"""

DATASET_EXISTS = "SELECT 1 FROM readmodel.datasets WHERE id = %(id)s"
# The id a dataset id answers as (an id absorbed by a merge: the survivor's).
DATASET_ID = """
SELECT d.id FROM readmodel.datasets d
WHERE d.id = coalesce((SELECT merged_into FROM readmodel.datasets WHERE id = %(id)s), %(id)s)
"""

# Newest first. Version numbers count from the oldest schema, so they are computed over
# the whole history and the page is cut after.
LIST_VERSIONS = """
SELECT version, event_time, seq, fields::text, run_id, job_id FROM (
    SELECT row_number() OVER (ORDER BY event_time, seq) AS version,
           event_time, seq, fields, run_id, job_id
    FROM readmodel.dataset_versions WHERE dataset_id = %(id)s
) v
WHERE %(after_time)s::timestamptz IS NULL OR (event_time, seq) < (%(after_time)s, %(after_seq)s)
ORDER BY event_time DESC, seq DESC
LIMIT %(limit)s
"""


class ListQuery(msgspec.Struct, frozen=True):
    namespace: params.NamespaceName = None
    name: params.ExactName = None
    q: params.Substring = None
    limit: params.Limit = params.DEFAULT_LIMIT
    cursor: params.Cursor = None


class DatasetPath(msgspec.Struct, frozen=True):
    dataset_id: uuid.UUID


class PageQuery(msgspec.Struct, frozen=True):
    limit: params.Limit = params.DEFAULT_LIMIT
    cursor: params.Cursor = None


class DatasetQuery(msgspec.Struct, frozen=True):
    as_of: asof.AsOf = None


LIST = Operation(
    "GET",
    "/datasets",
    "listDatasets",
    "List or look up datasets",
    models.DatasetPage,
    tag="datasets",
    query=ListQuery,
    description="Datasets by their display name. `namespace` matches any of a dataset's "
    "names (symlinks included; then ordered by that name); `q` is a substring of any of "
    "its names; `name` alone matches any of its names "
    "exactly, in any namespace. `namespace` and `name` together are the exact lookup: "
    "it resolves any name of a dataset, symlink names included, and answers one item or "
    "none.",
)
GET = Operation(
    "GET",
    "/datasets/{dataset_id}",
    "getDataset",
    "A dataset",
    models.Dataset,
    tag="datasets",
    path_params=DatasetPath,
    query=DatasetQuery,
    not_found=True,
    description="All its names with their kind, its current schema, facets, and the jobs "
    "that produce and consume it. With `as_of`: its schema as of then (the latest version "
    "seen at or before it), the jobs whose latest run started by then wrote or read it, "
    "and `last_seen` as of then; names and facets as they are now. A dataset first seen "
    "after `as_of` answers 404.",
)
VERSIONS = Operation(
    "GET",
    "/datasets/{dataset_id}/versions",
    "listDatasetVersions",
    "The schema history of a dataset",
    models.DatasetVersionPage,
    tag="datasets",
    path_params=DatasetPath,
    query=PageQuery,
    not_found=True,
    description="One version per distinct schema, newest first.",
)
RUNS = Operation(
    "GET",
    "/datasets/{dataset_id}/runs",
    "listDatasetRuns",
    "The runs that read or wrote a dataset",
    models.RunOfDatasetPage,
    tag="datasets",
    path_params=DatasetPath,
    query=PageQuery,
    not_found=True,
    description="Every run that read (`role` input) or wrote (output) the dataset under "
    "any of its names, newest first by start, with the version of the schema it saw or "
    "produced (as numbered by /versions). A run that did both appears once per role.",
)
resource = Resource()


def _summary(r: Any) -> models.DatasetSummary:
    return models.DatasetSummary(
        id=r[0], namespace=r[1], name=r[2], first_seen=r[3], last_seen=r[4]
    )


@resource.add(LIST)
async def list_datasets(request: Request) -> Response:
    query: ListQuery = LIST.parse_query(request)
    if query.name is not None and query.namespace is not None:
        async with connection(request) as conn:
            found = await rows(
                conn, LOOKUP_DATASET, {"namespace": query.namespace, "name": query.name}
            )
        return json_response(
            request, models.DatasetPage(items=[_summary(r) for r in found], next_cursor=None)
        )
    filters: list[str] = []
    args: dict[str, Any] = {"limit": query.limit + 1}
    if query.namespace is not None:
        filters.append(FILTER_NAMESPACE)
        args["namespace"] = query.namespace
    display = FILTER_DISPLAY_NAME if query.namespace is None else ""
    if query.name is not None:
        filters.append(FILTER_EXACT_NAME)
        args["name"] = query.name
    if query.q:
        filters.append(FILTER_NAME)
        args["pattern"] = like_substring(query.q)
    if query.cursor is not None:
        args["after_namespace"], args["after_name"] = decode_cursor(
            query.cursor, "datasets", [str, str]
        )
        filters.append(AFTER)
    async with connection(request) as conn:
        found = await rows(
            conn, LIST_DATASETS.format(display=display, filters="\n  ".join(filters)), args
        )
    items, next_cursor = page(found, query.limit, "datasets", lambda r: (r[5], r[6]))
    return json_response(
        request, models.DatasetPage(items=[_summary(r) for r in items], next_cursor=next_cursor)
    )


_names = msgspec.json.Decoder(list[models.DatasetName])
_jobs = msgspec.json.Decoder(list[models.JobRef])


@resource.add(GET)
async def get_dataset(request: Request) -> Response:
    path: DatasetPath = GET.parse_path(request)
    query: DatasetQuery = GET.parse_query(request)
    args = {"id": path.dataset_id, "as_of": query.as_of}
    async with connection(request) as conn:
        r = await row(conn, GET_DATASET if query.as_of is None else GET_DATASET_AS_OF, args)
    if r is None:
        raise not_found("dataset", path.dataset_id)
    asof.check_seen("dataset", path.dataset_id, r[5], query.as_of)
    return json_response(
        request,
        models.Dataset(
            id=r[0],
            namespace=r[1],
            name=r[2],
            fields=msgspec.Raw(r[3]) if r[3] is not None else None,
            facets=msgspec.Raw(r[4]),
            first_seen=r[5],
            last_seen=r[6],
            names=_names.decode(r[7]),
            producers=_jobs.decode(r[8]),
            consumers=_jobs.decode(r[9]),
        ),
    )


@resource.add(VERSIONS)
async def list_versions(request: Request) -> Response:
    path: DatasetPath = VERSIONS.parse_path(request)
    query: PageQuery = VERSIONS.parse_query(request)
    after_time: Any = None
    after_seq: Any = None
    if query.cursor is not None:
        after_time, after_seq = decode_cursor(query.cursor, "versions", [dt.datetime, int])
    args = {
        "id": path.dataset_id,
        "after_time": after_time,
        "after_seq": after_seq,
        "limit": query.limit + 1,
    }
    async with connection(request) as conn:
        found = await rows(conn, LIST_VERSIONS, args)
        if not found and await row(conn, DATASET_EXISTS, {"id": path.dataset_id}) is None:
            raise not_found("dataset", path.dataset_id)
    items, next_cursor = page(found, query.limit, "versions", lambda r: (r[1], r[2]))
    return json_response(
        request,
        models.DatasetVersionPage(
            items=[
                models.DatasetVersion(
                    version=r[0],
                    event_time=r[1],
                    fields=msgspec.Raw(r[3]),
                    run_id=r[4],
                    job_id=r[5],
                )
                for r in items
            ],
            next_cursor=next_cursor,
        ),
    )


@resource.add(RUNS)
async def list_runs(request: Request) -> Response:
    path: DatasetPath = RUNS.parse_path(request)
    query: PageQuery = RUNS.parse_query(request)
    after: tuple[Any, ...] = (None, None, None)
    if query.cursor is not None:
        after = decode_cursor(query.cursor, "dataset-runs", [dt.datetime, uuid.UUID, str])
    args = {
        "id": path.dataset_id,
        "after_time": after[0],
        "after_run": after[1],
        "after_role": after[2],
        "limit": query.limit + 1,
    }
    async with connection(request) as conn:
        ref = await row(conn, DATASET_ID, args)
        if ref is None:
            raise not_found("dataset", path.dataset_id)
        args["id"] = ref[0]
        found = await rows(conn, RUNS_OF_DATASET, args)
    items, next_cursor = page(found, query.limit, "dataset-runs", lambda r: (r[2], r[0], r[1]))
    return json_response(
        request,
        models.RunOfDatasetPage(
            items=[
                models.RunOfDataset(
                    run_id=r[0],
                    job=models.JobRef(id=r[4], namespace=r[5], name=r[6]),
                    role=r[1],
                    state=r[7],
                    started_at=r[2],
                    ended_at=r[3],
                    schema_version=r[8],
                )
                for r in items
            ],
            next_cursor=next_cursor,
        ),
    )
