"""The Cockpit read API under /api/v1: one module per resource.

`routes` is mounted at /api/v1 by metastore.app; openapi.py renders the same operations.
"""

from __future__ import annotations

from starlette.routing import BaseRoute

from metastore.api import (
    changes,
    column_lineage,
    datasets,
    impact,
    job_stats,
    jobs,
    lineage,
    lineage_diff,
    namespace_stats,
    namespaces,
    openapi,
    run_lineage,
    runs,
    search,
    status,
)

routes: list[BaseRoute] = [
    *namespaces.resource.routes,
    *namespace_stats.resource.routes,
    *jobs.resource.routes,
    *job_stats.resource.routes,
    *runs.resource.routes,
    *datasets.resource.routes,
    *lineage_diff.resource.routes,
    *lineage.resource.routes,
    *impact.resource.routes,
    *column_lineage.resource.routes,
    *run_lineage.resource.routes,
    *search.resource.routes,
    *status.resource.routes,
    *changes.resource.routes,
    *openapi.routes,
]
