"""GET /search?q=: jobs and datasets whose name contains `q`, ranked.

Rank: exact name first, then names starting with `q`, then names containing it; within
a rank by name. Datasets match on any of their names (symlinks included) and answer
with their display name.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta
from starlette.requests import Request
from starlette.responses import Response

from metastore.api import models, params
from metastore.api.db import connection, rows
from metastore.api.operation import Operation, Resource
from metastore.api.pagination import bound_kind, decode_cursor, page
from metastore.api.responses import json_response
from metastore.api.sqlparts import like_prefix, like_substring

# A dataset hit's matched name: its best-ranked name that matched (then by name).
SEARCH = """
SELECT type, id, namespace, name, rank, sort_name, matched_namespace, matched_name FROM (
    SELECT 'job' AS type, j.id, j.namespace, j.name, lower(j.name) AS sort_name,
           CASE WHEN lower(j.name) = %(exact)s THEN 0
                WHEN lower(j.name) LIKE %(prefix)s THEN 1 ELSE 2 END AS rank,
           j.namespace AS matched_namespace, j.name AS matched_name
    FROM readmodel.jobs j
    WHERE lower(j.name) LIKE %(pattern)s
  UNION ALL
    SELECT 'dataset', d.id, d.namespace, d.name, lower(d.name), min(n.rank),
           (array_agg(n.namespace ORDER BY n.rank, n.namespace, n.name))[1],
           (array_agg(n.name ORDER BY n.rank, n.namespace, n.name))[1]
    FROM (SELECT n.dataset_id, n.namespace, n.name,
                 CASE WHEN lower(n.name) = %(exact)s THEN 0
                      WHEN lower(n.name) LIKE %(prefix)s THEN 1 ELSE 2 END AS rank
          FROM readmodel.dataset_names n
          WHERE lower(n.name) LIKE %(pattern)s) n
    JOIN readmodel.datasets d ON d.id = n.dataset_id
    GROUP BY d.id, d.namespace, d.name
) hits
WHERE true {after}
ORDER BY rank, sort_name, type, id
LIMIT %(limit)s
"""
AFTER = (
    "AND (rank, sort_name, type, id) > "
    "(%(after_rank)s, %(after_name)s, %(after_type)s, %(after_id)s)"
)
MATCH: tuple[Literal["exact", "prefix", "substring"], ...] = ("exact", "prefix", "substring")


class SearchQuery(msgspec.Struct, frozen=True):
    q: Annotated[
        str,
        Meta(
            pattern=params.NO_NUL,
            min_length=1,
            max_length=200,
            description="Part of a job or dataset name.",
        ),
    ]
    limit: params.Limit = params.DEFAULT_LIMIT
    cursor: params.Cursor = None


SEARCH_OP = Operation(
    "GET",
    "/search",
    "search",
    "Search jobs and datasets by name",
    models.SearchPage,
    tag="search",
    query=SearchQuery,
    description="Jobs and datasets whose name contains `q` (case-insensitive), ranked: "
    "exact names, then names starting with `q`, then the rest, each by name. A dataset "
    "matches on any of its names and answers under its display name, with the name that "
    "matched in `matched_name`.",
)
resource = Resource()


@resource.add(SEARCH_OP)
async def search(request: Request) -> Response:
    query: SearchQuery = SEARCH_OP.parse_query(request)
    args: dict[str, Any] = {
        "exact": query.q.lower(),
        "prefix": like_prefix(query.q),
        "pattern": like_substring(query.q),
        "limit": query.limit + 1,
    }
    after = ""
    if query.cursor is not None:
        (args["after_rank"], args["after_name"], args["after_type"], args["after_id"]) = (
            decode_cursor(query.cursor, bound_kind("search", query), [int, str, str, uuid.UUID])
        )
        after = AFTER
    async with connection(request) as conn:
        found = await rows(conn, SEARCH.format(after=after), args)
    kind = bound_kind("search", query)
    items, next_cursor = page(found, query.limit, kind, lambda r: (r[4], r[5], r[0], r[1]))
    return json_response(
        request,
        models.SearchPage(
            items=[
                models.SearchHit(
                    type=r[0],
                    id=r[1],
                    namespace=r[2],
                    name=r[3],
                    matched_name=models.MatchedName(namespace=r[6], name=r[7]),
                    match=MATCH[r[4]],
                )
                for r in items
            ],
            next_cursor=next_cursor,
        ),
    )
