"""GET /search?q=: jobs, datasets and namespaces whose name contains `q`, ranked.

Rank: exact name first, then names starting with `q`, then names containing it; within
a rank by name. Datasets match on any of their names (symlinks included) and answer
with their display name.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta
from starlette.requests import Request
from starlette.responses import Response

from metastore.api import models, params
from metastore.api.db import connection, rows
from metastore.api.operation import Operation, Resource
from metastore.api.pagination import (
    TOTAL_CAP,
    bound_kind,
    count_capped,
    decode_cursor,
    page,
    total,
)
from metastore.api.responses import json_response
from metastore.api.sqlparts import like_prefix, like_substring

# One query per kind of hit, chosen by `type`; each row: (type, key, id, namespace, name,
# rank, sort name, matched namespace, matched name), `key` the id (a namespace: its name)
# for the order. A dataset hit's matched name: its best-ranked name that matched (then by
# name); with `namespace`, the datasets that count there (their home, as /namespaces).
RANK = """CASE WHEN lower({name}) = %(exact)s THEN 0
                WHEN lower({name}) LIKE %(prefix)s THEN 1 ELSE 2 END"""
JOB_HITS = f"""
    SELECT 'job' AS type, j.id::text AS key, j.id, j.namespace, j.name,
           {RANK.format(name="j.name")} AS rank, lower(j.name) AS sort_name,
           j.namespace AS matched_namespace, j.name AS matched_name
    FROM readmodel.jobs j
    WHERE lower(j.name) LIKE %(pattern)s {{namespace}}"""
DATASET_HITS = f"""
    SELECT 'dataset', d.id::text, d.id, d.namespace, d.name, min(n.rank), lower(d.name),
           (array_agg(n.namespace ORDER BY n.rank, n.namespace, n.name))[1],
           (array_agg(n.name ORDER BY n.rank, n.namespace, n.name))[1]
    FROM (SELECT n.dataset_id, n.namespace, n.name, {RANK.format(name="n.name")} AS rank
          FROM readmodel.dataset_names n
          WHERE lower(n.name) LIKE %(pattern)s) n
    JOIN readmodel.datasets d ON d.id = n.dataset_id
    WHERE true {{namespace}}
    GROUP BY d.id, d.namespace, d.name"""
NAMESPACE_HITS = f"""
    SELECT 'namespace', ns.name, NULL::uuid, ns.name, ns.name, {RANK.format(name="ns.name")},
           lower(ns.name), ns.name, ns.name
    FROM readmodel.namespaces ns
    WHERE lower(ns.name) LIKE %(pattern)s {{namespace}}"""
HITS = {
    "job": JOB_HITS.format(namespace="AND j.namespace = %(namespace)s"),
    "dataset": DATASET_HITS.format(namespace="AND d.home_namespace = %(namespace)s"),
    "namespace": NAMESPACE_HITS.format(namespace="AND ns.name = %(namespace)s"),
}
HITS_ANYWHERE = {
    "job": JOB_HITS.format(namespace=""),
    "dataset": DATASET_HITS.format(namespace=""),
    "namespace": NAMESPACE_HITS.format(namespace=""),
}
# Every hit is ranked before a page is cut, so they are counted in the same pass (the
# total of all pages, the cursor's condition applied after the count).
SEARCH = """
SELECT type, key, id, namespace, name, rank, sort_name, matched_namespace, matched_name,
       total
FROM (SELECT *, count(*) OVER () AS total
      FROM ({hits}) hits (type, key, id, namespace, name, rank, sort_name,
                         matched_namespace, matched_name)) hits
WHERE true {after}
ORDER BY rank, sort_name, type, key
LIMIT %(limit)s
"""
# (a page after the last hit has no row to carry the total)
COUNT = count_capped("SELECT 1 FROM ({hits}) hits")
AFTER = (
    "AND (rank, sort_name, type, key) > "
    "(%(after_rank)s, %(after_name)s, %(after_type)s, %(after_key)s)"
)
MATCH: tuple[Literal["exact", "prefix", "substring"], ...] = ("exact", "prefix", "substring")
HitType = Literal["dataset", "job", "namespace"]


class SearchQuery(msgspec.Struct, frozen=True):
    q: Annotated[
        str,
        Meta(
            pattern=params.NO_NUL,
            min_length=1,
            max_length=200,
            description="Part of a job, dataset or namespace name.",
        ),
    ]
    type: Annotated[
        Annotated[list[HitType], Meta(min_length=1, max_length=3)] | None,
        Meta(description="Only hits of these types, comma-separated (`type=dataset,job`)."),
    ] = None
    namespace: Annotated[
        params.Name | None,
        Meta(
            description="Only hits in this namespace: its jobs, the datasets that count in it "
            "(as /datasets?namespace= lists them), the namespace itself.",
        ),
    ] = None
    limit: params.Limit = params.DEFAULT_LIMIT
    cursor: params.Cursor = None


SEARCH_OP = Operation(
    "GET",
    "/search",
    "search",
    "Search jobs, datasets and namespaces by name",
    models.SearchPage,
    tag="search",
    query=SearchQuery,
    description="Jobs, datasets and namespaces whose name contains `q` "
    "(case-insensitive), ranked: exact names, then names starting with `q`, then the rest, "
    "each by name. A dataset matches on any of its names and answers under its display "
    "name, with the name that matched in `matched_name`. `type` and `namespace` narrow "
    "the hits; `total` counts them.",
)
resource = Resource()


def _hit(r: Any) -> models.SearchHit:
    match = MATCH[r[5]]
    if r[0] == "namespace":
        return models.NamespaceHit(name=r[4], match=match)
    matched = models.MatchedName(namespace=r[7], name=r[8])
    if r[0] == "job":
        return models.JobHit(id=r[2], namespace=r[3], name=r[4], matched_name=matched, match=match)
    return models.DatasetHit(id=r[2], namespace=r[3], name=r[4], matched_name=matched, match=match)


@resource.add(SEARCH_OP)
async def search(request: Request) -> Response:
    query: SearchQuery = SEARCH_OP.parse_query(request)
    args: dict[str, Any] = {
        "exact": query.q.lower(),
        "prefix": like_prefix(query.q),
        "pattern": like_substring(query.q),
        "namespace": query.namespace,
        "limit": query.limit + 1,
    }
    kinds = HITS if query.namespace is not None else HITS_ANYWHERE
    hits = "\n  UNION ALL".join(kinds[t] for t in sorted(query.type or kinds))
    kind = bound_kind("search", query)
    after = ""
    if query.cursor is not None:
        (args["after_rank"], args["after_name"], args["after_type"], args["after_key"]) = (
            decode_cursor(query.cursor, kind, [int, str, str, str])
        )
        after = AFTER
    async with connection(request) as conn:
        found = await rows(conn, SEARCH.format(hits=hits, after=after), args)
        items, next_cursor = page(found, query.limit, kind, lambda r: (r[5], r[6], r[0], r[1]))
        if found:
            count, exact = min(found[0][9], TOTAL_CAP), found[0][9] <= TOTAL_CAP
        else:  # no hits, or a cursor past the last one
            whole = None if query.cursor else found
            count, exact = await total(conn, COUNT.format(hits=hits), args, whole)
    return json_response(
        request,
        models.SearchPage(
            items=[_hit(r) for r in items],
            next_cursor=next_cursor,
            total=count,
            total_is_exact=exact,
        ),
    )
