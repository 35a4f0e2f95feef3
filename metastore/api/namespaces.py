"""GET /namespaces: every namespace seen, for jobs or datasets, by name."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from metastore.api import models, params
from metastore.api.db import connection, rows
from metastore.api.operation import Operation, Resource
from metastore.api.pagination import decode_cursor, page
from metastore.api.responses import json_response

LIST_NAMESPACES = """
SELECT name, has_jobs, has_datasets, first_seen, last_seen
FROM readmodel.namespaces
WHERE (%(after)s::text IS NULL OR name > %(after)s)
ORDER BY name
LIMIT %(limit)s
"""


class ListQuery(msgspec.Struct, frozen=True):
    limit: params.Limit = params.DEFAULT_LIMIT
    cursor: params.Cursor = None


LIST = Operation(
    "GET",
    "/namespaces",
    "listNamespaces",
    "List namespaces",
    models.NamespacePage,
    tag="namespaces",
    query=ListQuery,
    description="Every namespace seen in an event, for jobs, datasets or both, by name.",
)
resource = Resource()


@resource.add(LIST)
async def list_namespaces(request: Request) -> Response:
    query: ListQuery = LIST.parse_query(request)
    after: Any = None
    if query.cursor is not None:
        (after,) = decode_cursor(query.cursor, "namespaces", [str])
    async with connection(request) as conn:
        found = await rows(conn, LIST_NAMESPACES, {"after": after, "limit": query.limit + 1})
    items, next_cursor = page(found, query.limit, "namespaces", lambda r: (r[0],))
    return json_response(
        request,
        models.NamespacePage(
            items=[
                models.Namespace(
                    name=r[0], has_jobs=r[1], has_datasets=r[2], first_seen=r[3], last_seen=r[4]
                )
                for r in items
            ],
            next_cursor=next_cursor,
        ),
    )
