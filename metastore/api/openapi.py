"""The OpenAPI 3.1 document of the service, generated from the operation table.

/api/v1's operations come from the resource modules (their `Operation`s: the same
objects that parse each request), their bodies from the msgspec structs the handlers
encode. The other endpoints (ingest, export, health) are described here, from their
contracts, in `OTHER_OPERATIONS`. `python -m metastore.api.openapi --write` (`make
openapi`) writes the checked-in metastore/openapi.json; a test keeps it equal.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import msgspec
from msgspec import Meta
from starlette.requests import Request
from starlette.responses import Response

from metastore import export
from metastore.api import (
    datasets,
    jobs,
    lineage,
    models,
    namespaces,
    run_lineage,
    runs,
    search,
    status,
)
from metastore.api.operation import NoParams, Operation
from metastore.api.responses import json_response
from metastore.ingest import BatchResult
from metastore.problems import PROBLEM_JSON, Problem

PREFIX = "/api/v1"
CHECKED_IN = Path(__file__).resolve().parent.parent / "openapi.json"
REF = "#/components/schemas/{name}"

API_RESOURCES = (namespaces, jobs, runs, datasets, lineage, run_lineage, search, status)

DESCRIPTION = """\
The metastore of the Stackable Data Platform: OpenLineage events in (`/ingest`), the
lineage graph out (`/api/v1`, the read API Cockpit uses), and the stored events back
as a pull feed (`/export`).

**Experimental.** The read API is versioned under `/api/v1` from the start, but v1 may
still change before it is declared stable.

Conventions of `/api/v1`: lists answer `{"items": [...], "next_cursor": ...}` with
keyset pagination (`limit`, default 50, at most 500; pass `next_cursor` back as the
opaque `cursor`; it is null on the last page), stable under concurrent ingest. Every
answer carries an `ETag` and honours `If-None-Match` (304). Unknown ids answer 404,
bad parameters 400, both as RFC 9457 `application/problem+json`. Times are RFC 3339 in
UTC (`Z`), whatever the database server's time zone.

Time travel: `/lineage`, `/jobs/{job_id}`, `/datasets/{dataset_id}` and
`/datasets/{dataset_id}/column-lineage` take `as_of` (RFC 3339, for example
`?as_of=2026-11-24T09:00:00Z`) and answer as things were at that moment, by eventTime:
each job's inputs and outputs are those of its latest run started at or before it (and
its static lineage declared by then), a dataset's schema its latest version by then. A
late event about the past changes only the answers about the past.
`/datasets/{dataset_id}/runs` and `/lineage/runs` answer which run wrote what another
read.

Authentication: a bearer token of the scope the path belongs to: `ingest` for
`/ingest/...`, `read` for `/api/v1/...`, `export` for `/export/...` (the scope is
listed in each operation's security requirement). Health endpoints need none.
"""


# --- the operations other modules own, described from their contracts -----------------
# (their own structs and limits where they export them, so those cannot drift either)


class ExportPage(msgspec.Struct, frozen=True):
    events: Annotated[list[models.JSONObject], Meta(description="Events as stored, in log order.")]
    next_cursor: Annotated[str, Meta(description="Pass as `cursor` to continue after these.")]


class ExportQuery(msgspec.Struct, frozen=True):
    cursor: Annotated[
        str | None, Meta(description="Where to continue (a `next_cursor`); the start if unset.")
    ] = None
    namespace: Annotated[str | None, Meta(description="Only events of this job namespace.")] = None
    job: Annotated[str | None, Meta(description="Only events of this job name.")] = None
    run_id: Annotated[uuid.UUID | None, Meta(description="Only events of this run.")] = None
    since: (
        Annotated[dt.datetime, Meta(tz=True, description="Only events with eventTime >= since.")]
        | None
    ) = None
    limit: Annotated[
        int, Meta(ge=1, le=export.MAX_JSON_LIMIT, description="Events per page (JSON).")
    ] = export.DEFAULT_LIMIT
    wait: Annotated[
        float,
        Meta(
            ge=0,
            le=export.MAX_WAIT_S,
            description="Seconds to wait for new events when none are past the cursor.",
        ),
    ] = 0


OPENLINEAGE_EVENT = {
    "type": "object",
    "description": "An OpenLineage RunEvent, JobEvent or DatasetEvent "
    "(https://openlineage.io/spec/2-0-2/OpenLineage.json).",
    "required": ["eventTime", "producer", "schemaURL"],
}


@dataclass(frozen=True)
class OtherOperation:
    method: str
    path: str  # absolute
    operation_id: str
    summary: str
    tag: str
    description: str = ""
    scope: str | None = None
    query: type[msgspec.Struct] = NoParams
    body: dict[str, Any] | None = None
    responses: dict[str, dict[str, Any]] = field(default_factory=dict)


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _problem(description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "description": description,
        "content": {PROBLEM_JSON: {"schema": {"$ref": REF.format(name="Problem")}}},
    }
    if headers:
        answer["headers"] = headers
    return answer


_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait.", "schema": {"type": "string"}}}
_INGESTED = {"type": "object", "properties": {"status": {"const": "success"}}}
_HEALTH = {"type": "object", "properties": {"status": {"type": "string"}}, "required": ["status"]}

OTHER_OPERATIONS = (
    OtherOperation(
        "POST",
        "/ingest/openlineage",
        "ingestEvent",
        "Ingest an OpenLineage event",
        "ingest",
        "Validates the envelope and appends the event, unchanged, to the log. 200 means it "
        "is committed (a retry of the same event is stored once).",
        scope="ingest",
        body=OPENLINEAGE_EVENT,
        responses={
            "200": _json(_INGESTED, "Stored (committed to the log)."),
            "400": _problem("The event breaks the OpenLineage envelope."),
            "413": _problem("The event is larger than METASTORE_MAX_EVENT_BYTES."),
        },
    ),
    OtherOperation(
        "POST",
        "/ingest/openlineage/batch",
        "ingestBatch",
        "Ingest a batch of events",
        "ingest",
        "Each event is validated and stored on its own; the answer says which "
        "failed and whether retrying them can help.",
        scope="ingest",
        body={"type": "array", "items": OPENLINEAGE_EVENT},
        responses={
            "200": _json({"$ref": REF.format(name="BatchResult")}, "Per-event results."),
            "400": _problem("The body is not a JSON array of objects."),
            "413": _problem("The batch is too large."),
        },
    ),
    OtherOperation(
        "GET",
        "/export/openlineage/events",
        "exportEvents",
        "Read the stored events",
        "export",
        "The log as a pull feed, in log order: a cursor never skips an event. A JSON page "
        "ends early once it holds 4 MiB of events (its first event whatever its size): "
        "continue from `next_cursor`. Events go out as stored.",
        scope="export",
        query=ExportQuery,
        responses={
            "200": {
                "description": "A page of events; with `Accept: application/x-ndjson`, one "
                "whole stored event a line (one stored with line breaks has its whitespace "
                "between tokens removed), resuming at the `X-Next-Cursor` header.",
                "content": {
                    "application/json": {"schema": {"$ref": REF.format(name="ExportPage")}},
                    "application/x-ndjson": {"schema": {"type": "string"}},
                },
                "headers": {
                    "X-Next-Cursor": {
                        "schema": {"type": "string"},
                        "description": "Where to continue (ndjson).",
                    }
                },
            },
            "400": _problem("A parameter is invalid."),
        },
    ),
    OtherOperation(
        "GET",
        "/healthz",
        "healthz",
        "The process is alive",
        "health",
        responses={"200": _json(_HEALTH, "Alive.")},
    ),
    OtherOperation(
        "GET",
        "/readyz",
        "readyz",
        "The database answers and the schema is current",
        "health",
        responses={"200": _json(_HEALTH, "Ready."), "503": _json(_HEALTH, "Not ready.")},
    ),
    OtherOperation(
        "GET",
        "/metrics",
        "metrics",
        "Prometheus metrics",
        "health",
        responses={
            "200": {
                "description": "Prometheus text format.",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            }
        },
    ),
)


# --- generation ------------------------------------------------------------------------


def _plain_parameter_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A struct field's schema as a parameter's: an absent parameter is not a null."""
    schema = dict(schema)
    if "anyOf" in schema:
        options = [s for s in schema.pop("anyOf") if s != {"type": "null"}]
        schema = {**schema, **options[0]} if len(options) == 1 else {**schema, "anyOf": options}
    if schema.get("default", 0) is None:
        del schema["default"]
    return schema


def _parameters(struct: type[msgspec.Struct], where: str) -> list[dict[str, Any]]:
    if struct is NoParams:
        return []
    (_,), components = msgspec.json.schema_components([struct], ref_template=REF)
    own = components.pop(struct.__name__)
    assert not components, f"{struct.__name__}: parameters must be plain values"
    required = set(own.get("required", []))
    parameters = []
    for name, prop in own["properties"].items():
        schema = _plain_parameter_schema(prop)
        parameter: dict[str, Any] = {"name": name, "in": where}
        if "description" in schema:
            parameter["description"] = schema.pop("description")
        if "examples" in schema:  # the parameter's own `example` is what viewers show
            parameter["example"] = schema["examples"][0]
        parameter["required"] = where == "path" or name in required
        parameter["schema"] = schema
        parameters.append(parameter)
    return parameters


_ETAG = {
    "ETag": {
        "description": "Hash of the body; send it as If-None-Match.",
        "schema": {"type": "string"},
    }
}
_IF_NONE_MATCH = {
    "name": "If-None-Match",
    "in": "header",
    "required": False,
    "description": "ETags of an answer you hold: 304 without a body when it is unchanged.",
    "schema": {"type": "string"},
}


def _api_operation(op: Operation, schema_name: str) -> dict[str, Any]:
    parameters = _parameters(op.path_params, "path") + _parameters(op.query, "query")
    responses: dict[str, Any] = {
        "200": {**_json({"$ref": REF.format(name=schema_name)}, "OK."), "headers": _ETAG},
        "304": {"description": "Not modified (the If-None-Match ETag matches).", "headers": _ETAG},
    }
    if parameters:
        responses["400"] = _problem("A parameter is invalid; `invalid-params` names it.")
    responses["401"] = _problem("No valid bearer token of the `read` scope.")
    if op.not_found:
        responses["404"] = _problem("No such id.")
    responses["503"] = _problem("The database is unavailable; retry.", _RETRY_AFTER)
    return {
        "operationId": op.operation_id,
        "summary": op.summary,
        **({"description": op.description} if op.description else {}),
        "tags": [op.tag],
        "security": [{"bearer": [op.scope]}],
        "parameters": [*parameters, _IF_NONE_MATCH],
        "responses": responses,
    }


def _other_operation(op: OtherOperation) -> dict[str, Any]:
    document: dict[str, Any] = {"operationId": op.operation_id, "summary": op.summary}
    if op.description:
        document["description"] = op.description
    document["tags"] = [op.tag]
    document["security"] = [{"bearer": [op.scope]}] if op.scope else []
    parameters = _parameters(op.query, "query")
    if parameters:
        document["parameters"] = parameters
    if op.body is not None:
        document["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": op.body}},
        }
    responses = dict(op.responses)
    if op.scope:
        responses["401"] = _problem(f"No valid bearer token of the `{op.scope}` scope.")
        responses["503"] = _problem("The database is unavailable; retry.", _RETRY_AFTER)
    document["responses"] = responses
    return document


OPENAPI_OPERATION = Operation(
    "GET",
    "/openapi.json",
    "getOpenAPI",
    "This OpenAPI document",
    dict[str, Any],
    tag="meta",
    description="The OpenAPI 3.1 document of the service.",
)


def api_operations() -> list[Operation]:
    return [op for module in API_RESOURCES for op, _ in module.resource.operations]


def build_document() -> dict[str, Any]:
    ops = api_operations()
    refs, components = msgspec.json.schema_components(
        [*(op.response for op in ops), Problem, BatchResult, ExportPage], ref_template=REF
    )
    names = {
        op.operation_id: ref["$ref"].rsplit("/", 1)[1]
        for op, ref in zip(ops, refs[: len(ops)], strict=True)
    }
    paths: dict[str, dict[str, Any]] = {}
    for op in ops:
        paths.setdefault(PREFIX + op.path, {})[op.method.lower()] = _api_operation(
            op, names[op.operation_id]
        )
    paths[PREFIX + OPENAPI_OPERATION.path] = {
        "get": {
            "operationId": OPENAPI_OPERATION.operation_id,
            "summary": OPENAPI_OPERATION.summary,
            "tags": ["meta"],
            "security": [{"bearer": ["read"]}],
            "responses": {
                "200": {**_json({"type": "object"}, "The document."), "headers": _ETAG},
                "401": _problem("No valid bearer token of the `read` scope."),
            },
        }
    }
    for other in OTHER_OPERATIONS:
        paths.setdefault(other.path, {})[other.method.lower()] = _other_operation(other)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Stackable metastore API",
            "version": "1.0.0-experimental",
            "description": DESCRIPTION,
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
            "x-experimental": True,
        },
        "servers": [{"url": "/"}],
        "tags": [
            {"name": t}
            for t in (
                "namespaces",
                "jobs",
                "runs",
                "datasets",
                "lineage",
                "search",
                "status",
                "meta",
                "ingest",
                "export",
                "health",
            )
        ],
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A token of the path's scope: ingest, read or export.",
                }
            },
        },
    }


def render(document: dict[str, Any]) -> bytes:
    """Stable bytes: sorted keys, two-space indent, newline at the end."""
    return msgspec.json.format(msgspec.json.encode(document, order="sorted"), indent=2) + b"\n"


_document: bytes | None = None


def document_bytes() -> bytes:
    global _document
    if _document is None:
        _document = render(copy.deepcopy(build_document()))
    return _document


async def get_openapi(request: Request) -> Response:
    return json_response(request, document_bytes())


routes = [OPENAPI_OPERATION.route(get_openapi)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {CHECKED_IN}")
    args = parser.parse_args()
    if args.write:
        CHECKED_IN.write_bytes(document_bytes())
        print(f"wrote {CHECKED_IN}")
    else:
        import sys

        sys.stdout.buffer.write(document_bytes())


if __name__ == "__main__":
    main()
