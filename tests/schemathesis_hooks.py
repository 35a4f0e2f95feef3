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

from metastore.api.pagination import encode_cursor
from metastore.api.params import CURSOR_PATTERN

_ID = uuid.UUID("0191a3f2-7c1e-7a41-9b3e-3c6f0e1d01b8")
_TIME = dt.datetime(2026, 9, 2, 10, tzinfo=dt.UTC)
CURSORS = {
    "/api/v1/namespaces": encode_cursor("namespaces", ["file"]),
    "/api/v1/jobs": encode_cursor("jobs", ["airflow", "BQ"]),
    "/api/v1/runs": encode_cursor("runs", [_TIME, _ID]),
    "/api/v1/runs/{run_id}/events": encode_cursor("run_events", [0, 0]),
    "/api/v1/datasets": encode_cursor("datasets", ["file", "/tmp"]),
    "/api/v1/datasets/{dataset_id}/versions": encode_cursor("versions", [_TIME, 1]),
    "/api/v1/datasets/{dataset_id}/runs": encode_cursor("dataset-runs", [_TIME, _ID, "output"]),
    "/api/v1/search": encode_cursor("search", [1, "orders", "job", _ID]),
}


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    query = case.query
    if not query or not isinstance(query.get("cursor"), str):
        return
    if case.operation.path not in CURSORS:  # export's: only ever refused in that run (403)
        return
    if re.fullmatch(CURSOR_PATTERN, query["cursor"]) and len(query["cursor"]) <= 4000:
        query["cursor"] = CURSORS[case.operation.path]
