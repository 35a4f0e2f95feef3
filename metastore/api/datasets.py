"""GET /datasets, /datasets/{dataset_id} and /datasets/{dataset_id}/versions.

A dataset has a stable id and several names (the one events use, the identifiers of its
`symlinks` facet); the exact lookup `namespace` + `name` resolves any of them.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from metastore.api import models, params
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
          WHERE n.dataset_id = d.id AND e.direction = '{direction}') x
), '[]')::text
"""

# An id absorbed by a merge answers as the dataset it was merged into.
GET_DATASET = f"""
SELECT d.id, d.namespace, d.name, d.current_fields::text, d.facets::text,
       d.first_seen, d.last_seen,
       coalesce((
           SELECT json_agg(json_build_object('namespace', n.namespace, 'name', n.name,
                                             'kind', n.kind, 'symlink_type', n.symlink_type)
                           ORDER BY n.kind, n.namespace, n.name)
           FROM readmodel.dataset_names n WHERE n.dataset_id = d.id
       ), '[]')::text,
       {JOBS_OF_DATASET.format(direction="output")},
       {JOBS_OF_DATASET.format(direction="input")}
FROM readmodel.datasets d
WHERE d.id = coalesce(
    (SELECT merged_into FROM readmodel.datasets WHERE id = %(id)s), %(id)s)
"""

DATASET_EXISTS = "SELECT 1 FROM readmodel.datasets WHERE id = %(id)s"

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
    not_found=True,
    description="All its names with their kind, its current schema, facets, and the jobs "
    "that produce and consume it.",
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
    async with connection(request) as conn:
        r = await row(conn, GET_DATASET, {"id": path.dataset_id})
    if r is None:
        raise not_found("dataset", path.dataset_id)
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
