"""schemathesis hooks for tests/test_schemathesis.py (loaded through SCHEMATHESIS_HOOKS).

A list's `cursor` is opaque: only values the list handed out are valid, which no
generator can know. A generated cursor that fits the documented schema (so the case is
meant to be valid) is replaced by a real cursor of that list; a cursor that breaks the
schema (a negative case) is left alone and must be rejected.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from typing import Any

import schemathesis

from metastore.api.openapi import api_operations
from metastore.api.operation import _convert
from metastore.api.pagination import bound_kind, encode_cursor
from metastore.api.params import CURSOR_PATTERN
from metastore.problems import ProblemError

_ID = uuid.UUID("0191a3f2-7c1e-7a41-9b3e-3c6f0e1d01b8")
_TIME = dt.datetime(2026, 9, 2, 10, tzinfo=dt.UTC)
OPERATIONS = {"/api/v1" + op.path: op for op in api_operations()}
# A real key of each list (by its sort), and whether its cursor is bound to the query's
# filters (and to the path's dataset id).
KEYS: dict[str, tuple[str, Any, bool]] = {
    "/api/v1/namespaces": ("namespaces", lambda q: ["file"], False),
    "/api/v1/jobs": (
        "jobs",
        lambda q: {
            "name": ["airflow", "BQ"],
            "latest_run": [_TIME, "airflow", "BQ"],
            "failed_first": [1, _TIME, "airflow", "BQ"],
        }[q.sort],
        True,
    ),
    "/api/v1/runs": (
        "runs",
        lambda q: [1, _TIME, _ID] if q.sort == "failed_first" else [_TIME, _ID],
        True,
    ),
    "/api/v1/runs/{run_id}/events": ("run_events", lambda q: [0, 0], True),
    "/api/v1/datasets": ("datasets", lambda q: ["file", "/tmp"], True),
    "/api/v1/datasets/{dataset_id}/versions": ("versions", lambda q: [_TIME, 1], True),
    "/api/v1/datasets/{dataset_id}/runs": (
        "dataset-runs",
        lambda q: ["output", _TIME, _ID] if q.sort == "outputs_first" else [_TIME, _ID, "output"],
        True,
    ),
    "/api/v1/search": ("search", lambda q: [1, "orders", "job", str(_ID)], True),
    "/api/v1/jobs/{job_id}/datasets": ("job-datasets", lambda q: ["file", "/tmp", _ID], True),
    "/api/v1/runs/{run_id}/datasets": ("run-datasets", lambda q: ["file", "/tmp", _ID], True),
}


def real_cursor(path: str, query: dict[str, Any], path_parameters: dict[str, Any]) -> str | None:
    """A cursor the list would hand out for this query (None: the query is invalid)."""
    op = OPERATIONS[path]
    given = {k: v if isinstance(v, str) else str(v) for k, v in query.items() if k != "cursor"}
    try:
        parsed = _convert(given, op.query, "query")
    except ProblemError:
        return None
    kind, key, bound = KEYS[path]
    if bound:
        extra = [uuid.UUID(str(v)) for v in (path_parameters or {}).values()]
        kind = bound_kind(kind, parsed, *extra)
    return encode_cursor(kind, key(parsed))


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    query = case.query
    if not query or not isinstance(query.get("cursor"), str):
        return
    if case.operation.path not in KEYS:  # export's: only ever refused in that run (403)
        return
    if re.fullmatch(CURSOR_PATTERN, query["cursor"]) and len(query["cursor"]) <= 4000:
        try:
            cursor = real_cursor(case.operation.path, query, case.path_parameters)
        except ValueError:  # a path parameter that is no id: answers 400 or 404 first
            return
        if cursor is not None:
            query["cursor"] = cursor
