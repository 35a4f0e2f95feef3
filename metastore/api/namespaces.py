"""GET /namespaces: every namespace seen, for jobs or datasets, by name.

Restricted (api/visibility.py): only the readable namespaces, and their total; the counts
of one need no filter, as what is in a readable namespace is visible.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from metastore.api import models_namespaces, params
from metastore.api.listing import Listing, Sort, templates
from metastore.api.operation import Operation, Resource
from metastore.api.responses import json_response
from metastore.api.visibility import both, mark, namespace_visible

# Counted per namespace of the page: jobs by the jobs (namespace, name) index, datasets
# with a name there (each once, as /datasets?namespace= and /search?namespace= list them)
# in the order of the (namespace, dataset_id) index: distinct without a sort (count(DISTINCT)
# would sort them).
DATASET_COUNT = """(SELECT count(*) FROM (SELECT DISTINCT n.dataset_id
                              FROM readmodel.dataset_names n WHERE n.namespace = {ns}) n)"""
LIST_NAMESPACES = f"""
SELECT ns.name, ns.has_jobs, ns.has_datasets,
       (SELECT count(*) FROM readmodel.jobs j WHERE j.namespace = ns.name),
       {DATASET_COUNT.format(ns="ns.name")},
       ns.first_seen, ns.last_seen,
       (SELECT count(*) FROM readmodel.namespaces ns WHERE true{mark("namespace", "ns.name")})
FROM readmodel.namespaces ns
WHERE true {{filters}}
ORDER BY {{order}}
LIMIT %(limit)s
"""
TOTAL = "SELECT count(*) FROM readmodel.namespaces ns WHERE true {filters}"
# The statements by Access.restricted: the list (its {filters} and {order} to fill) and the
# count past the last page.
STATEMENTS = {restricted: (sql, TOTAL) for restricted, sql in both(LIST_NAMESPACES).items()}


# (a cursor names the list alone: it has no filters)
NAMESPACES = Listing(
    "namespaces",
    *templates({restricted: sql for restricted, (sql, _) in STATEMENTS.items()}, TOTAL),
    {"": Sort("ns.name", "AND ns.name > %(a0)s", [str], lambda r: (r[0],))},
    visible=namespace_visible,
    bound=False,
    total_column=7,  # (every namespace counted exactly, with the page)
)


ListQuery = params.Paged


LIST = Operation(
    "GET",
    "/namespaces",
    "listNamespaces",
    "List namespaces",
    models_namespaces.NamespacePage,
    tag="namespaces",
    etag_from_position=True,
    query=ListQuery,
    description="Every namespace seen in an event, for jobs, datasets or both, by name, "
    "with how many jobs and datasets it has, and how many namespaces there are in all. A "
    "dataset counts in each namespace it has a name in (see `dataset_count`). With "
    "authorization configured, only the namespaces the caller may read, and their total.",
)
resource = Resource()


@resource.add(LIST)
async def list_namespaces(request: Request) -> Response:
    listed = await NAMESPACES.serve(request, LIST)
    return json_response(
        request,
        models_namespaces.NamespacePage(
            items=[
                models_namespaces.Namespace(
                    name=r[0],
                    has_jobs=r[1],
                    has_datasets=r[2],
                    job_count=r[3],
                    dataset_count=r[4],
                    first_seen=r[5],
                    last_seen=r[6],
                )
                for r in listed.rows
            ],
            **listed.page(),
        ),
    )
