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
    changes,
    column_lineage,
    datasets,
    facets,
    impact,
    job_stats,
    jobs,
    lineage,
    lineage_diff,
    models,
    namespace_stats,
    namespaces,
    run_lineage,
    runs,
    search,
    status,
)
from metastore.api.examples import example
from metastore.api.operation import NoParams, Operation
from metastore.api.responses import json_response
from metastore.ingest import BatchResult
from metastore.problems import PROBLEM_BASE, PROBLEM_JSON, TITLES, TYPES, Problem, type_uri

PREFIX = "/api/v1"
CHECKED_IN = Path(__file__).resolve().parent.parent / "openapi.json"
REF = "#/components/schemas/{name}"

API_RESOURCES = (
    namespaces,
    namespace_stats,
    jobs,
    job_stats,
    runs,
    datasets,
    lineage,
    column_lineage,
    run_lineage,
    lineage_diff,
    impact,
    search,
    status,
    changes,
)

DESCRIPTION = """\
The metastore of the Stackable Data Platform: OpenLineage events in (`/ingest`), the
lineage graph out (`/api/v1`, the read API Cockpit uses), and the stored events back
as a pull feed (`/export`).

**Experimental.** The read API is versioned under `/api/v1` from the start, but v1 may
still change before it is declared stable.

Conventions of `/api/v1`: lists answer `{"items": [...], "next_cursor": ...}` with
keyset pagination (`limit`, default 50, at most 500; pass `next_cursor` back as the
opaque `cursor`, with the same filters and sort: it is bound to them; it is null on the
last page), stable under concurrent ingest; `/runs`, `/jobs`, `/datasets`, `/search` and
`/namespaces` add `total`, exact up to 10,000 (`total_is_exact`; beyond, 10,000 and
false: at least that many). Every answer carries an `ETag` and honours `If-None-Match`
(304). The ETags of search, namespaces, runs and the lineage graphs are weak ones made from
the read models' position: their 304 reads no read model, so polling them with
`If-None-Match` is cheap; `/changes?since=` tells a screen whether anything changed at
all. Errors are RFC 9457 `application/problem+json` whose `type` (an enum) tells them apart
(`.../not-found`: no such id; `.../not-yet`: not yet at `as_of`;
`.../invalid-request`, `.../invalid-cursor`, ...); every member of a problem is sent,
null when it does not apply. Times are RFC 3339 in UTC (`Z`), whatever the database
server's time zone.

With authorization configured (a policy, README "Authorization"), each read is computed
over the namespaces the caller may read. Lists, their `total`, `/search` and
`/namespaces` (and their counts) hold only visible objects: a job or run when its job's
namespace is readable, a dataset when any of its names is (it answers under its display
name among its readable names, lists and matches only those, and `q` or `name` never
match a hidden name). A hidden job, run or dataset, and its sub-resources, answer 404
`.../not-found` exactly as an unknown id does, never 403. A page embeds visible jobs,
runs and datasets only (a run of a hidden job, as a freshness' writer or a run's parent
or root, keeps its id and no job); a run's events leave out the datasets of namespaces
the caller may not read. Query text and plan-like facets (SENSITIVE_FACETS) are left
out of facets and of a run's events unless the policy shows them for the job's namespace
(a dataset's: any of its readable names'). ETags differ between callers who may see
different things.

Parameters are strict: a query parameter an operation does not take is a 400 naming it
in `invalid-params` (a typo never answers unfiltered data), and so is a parameter given
twice. A list is one comma-separated parameter (`state=FAIL,ABORT`). A time parameter
(`as_of`, `since`, `until`) whose `+` offset arrived as a space (sent unencoded) is read
with the `+`.

One shape per thing: a run is `id` everywhere; what an answer points at is an embedded
reference (`{id, namespace, name}`; a run `{id, job, state}`; a job's parent and
children and a dataset's writers and readers add the job's `latest_run`, as graph nodes
do), never a bare id; a run's `started_at` is its START eventTime, else its earliest
eventTime, in every answer; `root` is null for a run without a parent. A dataset answers
under its display name, its most table-like name (a `symlinks` identifier of type TABLE,
else a name an event used), lists all its names with their kind, and counts in one
namespace (that of its most table-like name an event used), so namespace counts add up.

Cockpit's screens: namespaces with their counts (`/namespaces`), a namespace's recent
failures (`/runs?namespace=...&state=FAIL,ABORT`), a lineage graph whose nodes carry
what it draws and what lies beyond (`/lineage`), a dataset page (`/datasets/{dataset_id}`
and its `/column-lineage`), a job page (`/jobs/{job_id}` and `/runs?job_id=`), what a
failed run broke (`/impact`), what changed between two moments (`/lineage/diff`): one or
two calls each.

Writes: a write is a successful one. A run writes its outputs when it COMPLETEs (a
STREAMING job, `jobType.processingType` STREAMING in the event, also at each RUNNING event
that names them), unless it ends FAIL or ABORT (its latest terminal event, as its `state`:
a COMPLETE then a FAIL ends FAIL, a FAIL then a retry's COMPLETE ends COMPLETE): then it
only attempted them: its job keeps its edges in the graph, but the attempt does not move
`last_write_at` and is never the writer run lineage or `as_of` names, as of any moment.
Every dataset and dataset node has its `freshness`: its last successful write, a failed
attempt after it, and whether it is stale (a writer's latest run failed after that write,
or a dataset its writers read was successfully written after it).

Bounds: each statement of a read runs at most METASTORE_READ_TIMEOUT (10 s by default;
past it a 503 of type `.../read-timeout`); graph walks stop at `max_nodes` nodes, 20,000
edges looked at or 5,000 edges (`truncated: true`); an embedded list holds its first 100
(an edge's `jobs`: 20) with a count of all; a page ends at `limit` items or 4 MiB of stored
JSON; no answer exceeds 16 MiB apart from the parts producers sent, served as sent.

Time travel: `/lineage`, `/impact`, `/jobs/{job_id}`, `/datasets/{dataset_id}` (and its `/versions`,
`/runs` and `/column-lineage`) take `as_of` (RFC 3339, for example
`?as_of=2026-11-24T09:00:00Z`) and answer as things were at that moment, by eventTime:
each job's inputs and outputs are those of its latest run started at or before it (and
its static lineage declared by then), a dataset's schema its latest version by then, its
names those first seen by then (a name joined by a rule, a catalog map or a facet, stays
joined in the past), its freshness as it was then. A late event about the past changes
only the answers about the past.
`/datasets/{dataset_id}/runs` and `/lineage/runs` answer which run wrote what another
read.

Ingest: emitters POST events to `/ingest/openlineage` (or a JSON array to
`/ingest/openlineage/batch`). `POST /api/v1/lineage` and `POST /api/v1/lineage/batch`
are the same operations at the path OpenLineage clients post to when left at their
defaults (the Python and Java clients, Marquez): an emitter configured with nothing but
the URL and the token works. `schemaURL` may be left out.

Authentication: a bearer token of the scope the path belongs to: `ingest` for
`/ingest/...` and for POST to `/api/v1/lineage`, `read` for the rest of `/api/v1/...`,
`export` for `/export/...` (the scope is listed in each operation's security
requirement). No or an unknown token answers 401; a token of another scope 403, whose
detail says which paths that token is for. Health endpoints need none.

A user's OIDC JWT is a bearer token too, when the service names an issuer: it has the
scopes the service grants JWTs (`read` unless configured), and one failing a check answers
401 whose detail names the check (expiry, audience, issuer, key id, signature, the claim
naming the user); while the issuer's keys cannot be fetched, 503 of type
`issuer-unavailable`. A service token allowed to act for users (Cockpit's) may name the
user in the header `X-Metastore-User` (and the user's groups, comma-separated, in
`X-Metastore-Groups`): the request is then that user's. From any other caller either
header answers 403, an empty user 400.
"""
# (the names of the sensitive facets, from the one list api/facets.py applies)
DESCRIPTION = DESCRIPTION.replace(
    "SENSITIVE_FACETS", ", ".join(f"`{name}`" for name in sorted(facets.SENSITIVE_FACETS))
)


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
    "(https://openlineage.io/spec/2-0-2/OpenLineage.json). `schemaURL` may be left out "
    "(as Marquez allows): the kind follows from the event's shape.",
    "properties": {
        "eventTime": {
            "type": "string",
            "format": "date-time",
            "description": "When the event happened.",
        },
        "producer": {"type": "string", "description": "URI of the software that emitted it."},
        "schemaURL": {"type": "string", "description": "URI of the spec version it follows."},
    },
    "required": ["eventTime", "producer"],
}
TAGS = {
    "namespaces": "Namespaces with their job and dataset counts.",
    "jobs": "Jobs with their latest run.",
    "runs": "Runs: state, times, parents, inputs and outputs, raw events.",
    "datasets": "Datasets with all their names, schema history, readers and writers.",
    "lineage": "The job/dataset graph, field-level lineage, run-level lineage.",
    "search": "Jobs and datasets by name.",
    "status": "The event log and the projections' progress.",
    "meta": "This document.",
    "ingest": "OpenLineage events in.",
    "export": "The stored events out, as a pull feed.",
    "health": "Liveness, readiness and metrics for the platform.",
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


def _problem(
    description: str, headers: dict[str, Any] | None = None, *, kind: str = ""
) -> dict[str, Any]:
    """A problem answer; `kind` (a key of problems.TYPES) names its example's type."""
    example = {"type": PROBLEM_BASE + kind} if kind else {}
    answer: dict[str, Any] = {
        "description": description,
        "content": {
            PROBLEM_JSON: {"schema": {"$ref": REF.format(name="Problem")}, "x-kind": example}
        },
    }
    if headers:
        answer["headers"] = headers
    return answer


_UNKNOWN_PARAMETER = (
    "A query parameter was given: this operation takes none; `invalid-params` names it."
)
_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait.", "schema": {"type": "string"}}}
_READ_UNAVAILABLE = (
    "The database is unavailable (type `unavailable`): retry after `Retry-After`; or the "
    "read models are another release's while the projector rebuilds them after an upgrade "
    "or rollback (type `read-models-rebuilding`): retry after `Retry-After`; or the "
    "read ran past its time limit, METASTORE_READ_TIMEOUT (type `read-timeout`, no "
    "Retry-After): ask for less (a smaller depth or limit, no `as_of`) or retry later; or, "
    "for a graph, impact, diff, search or `as_of` read, their share of the read "
    "connections and its queue are full (type `reads-busy`): retry after `Retry-After`."
)
_INGESTED = {"type": "object", "properties": {"status": {"const": "success"}}}
# Probes and scrapers are configured by others and filter nothing: parameters are ignored.
_PROBE = " It takes no query parameters and ignores any (probes and scrapers add their own)."
_HEALTH = {"type": "object", "properties": {"status": {"type": "string"}}, "required": ["status"]}

_UNSUPPORTED = _problem("Content-Type is not JSON or Content-Encoding not gzip or identity.")
# Ingest takes no query parameters and ignores any: emitters can be configured to add some
# (the Java client's `urlParams`), and one refused would only log a warning and lose events.
_IGNORES_PARAMETERS = (
    " Query parameters are ignored (emitters may add some, such as the Java client's "
    "`urlParams`; refusing them would lose events)."
)
_EVENT_DESCRIPTION = (
    "Validates the envelope and appends the event, unchanged, to the log. 200 means it "
    "is committed (a retry of the same event is stored once)." + _IGNORES_PARAMETERS
)
_EVENT_RESPONSES = {
    "200": _json(_INGESTED, "Stored (committed to the log)."),
    "400": _problem("The body is not JSON (or not valid gzip)."),
    "413": _problem("The event is larger than METASTORE_MAX_EVENT_BYTES."),
    "415": _UNSUPPORTED,
    "422": _problem("The event breaks the OpenLineage envelope; `pointer` names the field."),
}
_BATCH_DESCRIPTION = (
    "Each event is validated and stored on its own; the answer says which "
    "failed and whether retrying them can help." + _IGNORES_PARAMETERS
)
_BATCH_RESPONSES = {
    "200": _json({"$ref": REF.format(name="BatchResult")}, "Per-event results."),
    "400": _problem("The body is not JSON (or not valid gzip)."),
    "413": _problem("The batch is too large."),
    "415": _UNSUPPORTED,
    "422": _problem("The body is not a JSON array."),
}
_AT_DEFAULT_PATH = (
    " The OpenLineage clients' default path, for clients left at their defaults: the same "
    "as POST /ingest/openlineage{suffix}, which is the documented path."
)


def _ingest(path: str, operation_id: str, summary: str, batch: bool) -> OtherOperation:
    """An ingest operation: one event or a batch, at the documented path or (under
    /api/v1) at the clients' default one."""
    description = _BATCH_DESCRIPTION if batch else _EVENT_DESCRIPTION
    if path.startswith("/api/v1/"):
        description += _AT_DEFAULT_PATH.format(suffix="/batch" if batch else "")
    return OtherOperation(
        "POST",
        path,
        operation_id,
        summary,
        "ingest",
        description,
        scope="ingest",
        body={"type": "array", "items": OPENLINEAGE_EVENT} if batch else OPENLINEAGE_EVENT,
        responses=_BATCH_RESPONSES if batch else _EVENT_RESPONSES,
    )


OTHER_OPERATIONS = (
    _ingest("/ingest/openlineage", "ingestEvent", "Ingest an OpenLineage event", False),
    _ingest("/ingest/openlineage/batch", "ingestBatch", "Ingest a batch of events", True),
    _ingest(
        "/api/v1/lineage",
        "ingestEventAtDefaultPath",
        "Ingest an OpenLineage event (the clients' default path)",
        False,
    ),
    _ingest(
        "/api/v1/lineage/batch",
        "ingestBatchAtDefaultPath",
        "Ingest a batch of events (the clients' default path)",
        True,
    ),
    OtherOperation(
        "GET",
        "/export/openlineage/events",
        "exportEvents",
        "Read the stored events",
        "export",
        "The log as a pull feed, in log order: a cursor never skips an event. A JSON page "
        "ends early once it holds 4 MiB of events (its first event whatever its size): "
        "continue from `next_cursor`. Events go out as stored. An unknown query parameter "
        "is a 400 naming it. With authorization configured, a reader gets only whole events "
        "whose every namespace (its job's, each input's and output's and their `symlinks`' "
        "names; a DatasetEvent's dataset's) it may read, never a copy cut down, and their "
        "sensitive facets (query text, plans, engine properties, environment, Airflow task "
        "info) only where its job's namespace shows them: a page may hold fewer events than "
        "it read, even none, and its cursor still moves past them.",
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
            "400": _problem(
                "A parameter is invalid, or not one of this operation's; `invalid-params` "
                "names it.",
                kind="invalid-request",
            ),
        },
    ),
    OtherOperation(
        "GET",
        "/healthz",
        "healthz",
        "The process is alive",
        "health",
        "Answers while the process runs (it checks nothing else)." + _PROBE,
        responses={"200": _json(_HEALTH, "Alive.")},
    ),
    OtherOperation(
        "GET",
        "/readyz",
        "readyz",
        "The database answers and the schema is current",
        "health",
        "200 when the database answers and its schema is the code's; 503 otherwise." + _PROBE,
        responses={"200": _json(_HEALTH, "Ready."), "503": _json(_HEALTH, "Not ready.")},
    ),
    OtherOperation(
        "GET",
        "/metrics",
        "metrics",
        "Prometheus metrics",
        "health",
        "The process's metrics in the Prometheus text format." + _PROBE,
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


PATH_PARAMETERS = {
    "dataset_id": "The dataset's id (an id absorbed by a merge answers as the dataset it "
    "was merged into).",
    "job_id": "The job's id.",
    "run_id": "The run's id: its OpenLineage runId.",
}


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
        elif name in PATH_PARAMETERS:
            parameter["description"] = PATH_PARAMETERS[name]
        if "examples" in schema:  # the parameter's own `example` is what viewers show
            parameter["example"] = schema["examples"][0]
        parameter["required"] = where == "path" or name in required
        if schema.get("type") == "array":  # one parameter, comma-separated: state=FAIL,ABORT
            parameter["style"], parameter["explode"] = "form", False
        parameter["schema"] = schema
        parameters.append(parameter)
    return parameters


_ETAG = {
    "ETag": {
        "description": "Hash of the body; send it as If-None-Match.",
        "schema": {"type": "string"},
    }
}
# Operations whose answer the read models' position determines (Operation.etag_from_position).
_POSITION_ETAG = {
    "ETag": {
        "description": "A weak validator of the read models' position, this request and "
        'what you may see (`W/"p..."`): send it as If-None-Match to poll; while the '
        "projector folds nothing, the answer is a 304 that reads no read model. Any folded "
        "event changes it, whatever it is about (the body may then be the same).",
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


def _refusals(scope: str, not_found: str | None) -> dict[str, Any]:
    """401, 403 and 404, which every operation with a scope can answer."""
    return {
        "401": _problem(
            f"No bearer token, or one that is not valid (the `{scope}` scope is needed).",
            {"WWW-Authenticate": {"description": "`Bearer`.", "schema": {"type": "string"}}},
            kind="unauthorized",
        ),
        "403": _problem(
            f"The bearer token is valid, but for another scope than `{scope}`; the detail "
            "names the paths that token is for. Or `X-Metastore-User` from a caller not "
            "allowed to act for users.",
            kind="forbidden",
        ),
        "404": _problem(
            not_found
            or "No such path (a path that differs from this one's, for example by a trailing "
            "slash); a POST's detail names the ingest path.",
            kind="not-found",
        ),
    }


def _api_operation(op: Operation, schema_name: str) -> dict[str, Any]:
    parameters = _parameters(op.path_params, "path") + _parameters(op.query, "query")
    body = _json({"$ref": REF.format(name=schema_name)}, "OK.")
    etag = _POSITION_ETAG if op.etag_from_position else _ETAG
    responses: dict[str, Any] = {
        "200": {**body, "headers": etag},
        "304": {"description": "Not modified (the If-None-Match ETag matches).", "headers": etag},
    }
    responses["400"] = _problem(
        (
            "A parameter is invalid, or not one of this operation's; `invalid-params` names "
            "it (type `invalid-request`, or `invalid-cursor` for a cursor of another list, "
            "filter or sort)."
        )
        if parameters
        else _UNKNOWN_PARAMETER,
        kind="invalid-request",
    )
    responses.update(
        _refusals(
            "read",
            "No such id (type `not-found`); with `as_of`, an id whose first event is later "
            "(type `not-yet`)."
            if op.not_found
            else None,
        )
    )
    responses["503"] = _problem(_READ_UNAVAILABLE, _RETRY_AFTER, kind="unavailable")
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
        responses.update(_refusals(op.scope, None))
        responses["503"] = _problem(
            _READ_UNAVAILABLE
            if op.body is None
            else "The database is unavailable, or the server holds its budget of request "
            "bytes in flight (METASTORE_MAX_INFLIGHT_BYTES); retry after Retry-After seconds.",
            _RETRY_AFTER,
        )
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


def _add_examples(paths: dict[str, Any], components: dict[str, Any]) -> None:
    """An example on every JSON answer that has none: made from its schema."""
    for operations in paths.values():
        for operation in operations.values():
            for code, answer in operation["responses"].items():
                for media, content in answer.get("content", {}).items():
                    if media == PROBLEM_JSON:
                        kind = content.pop("x-kind", {})
                        content["example"] = {
                            "type": kind.get("type") or type_uri(int(code)),
                            "title": TITLES.get(int(code), "Error"),
                            "status": int(code),
                            "detail": answer["description"],
                            "instance": None,
                            "pointer": None,
                            "invalid-params": None,
                        }
                    elif media.endswith("json") and "example" not in content:
                        content["example"] = example(content["schema"], components)


def _passed_through(schema: dict[str, Any], is_facet: bool) -> None:
    """A facet (or a part of one) is JSON as the producer sent it: no defaults are filled
    in, and a facet has `_producer`, `_schemaURL` and maybe fields of its own."""
    for prop in schema.get("properties", {}).values():
        prop.pop("default", None)
    if is_facet:
        schema["properties"] = {**models.FACET_SCHEMA["properties"], **schema["properties"]}
        schema["additionalProperties"] = True


def _describe(components: dict[str, Any]) -> None:
    """Gives every property a description: its own, else the glossary's."""
    for schema_name, schema in components.items():
        for prop, sub in schema.get("properties", {}).items():
            if "description" in sub:
                continue
            text = GLOSSARY.get(f"{schema_name}.{prop}") or GLOSSARY.get(prop)
            assert text, f"no description for {schema_name}.{prop}: add it to GLOSSARY"
            sub["description"] = text


GLOSSARY = {
    **models.GLOSSARY,
    "Problem.type": "What went wrong, as a URI (RFC 9457), one of: "
    + "; ".join(f"`{PROBLEM_BASE}{kind}`: {text}" for kind, text in TYPES.items()),
    "Problem.title": "A short summary of the type.",
    "Problem.status": "The HTTP status code.",
    "Problem.detail": "What went wrong in this case.",
    "Problem.instance": "The path of the request.",
    "Problem.pointer": "The offending field of the body, as a JSON pointer.",
    "Problem.invalid-params": "Each invalid field or parameter and why.",
    "InvalidParam.name": "The field (a JSON pointer) or the query parameter's name.",
    "InvalidParam.reason": "Why it is invalid.",
    "BatchResult.status": "`success` (all stored) or `partial_success`.",
    "BatchResult.summary": "How many events were received, stored and refused.",
    "BatchResult.failed_events": "Each refused event and why.",
    "BatchSummary.received": "Events in the batch.",
    "BatchSummary.successful": "Events stored.",
    "BatchSummary.failed": "Events refused.",
    "BatchSummary.retriable": "Refused events a retry may store.",
    "BatchSummary.non_retriable": "Refused events a retry cannot store.",
    "FailedEvent.index": "Its position in the batch (from 0).",
    "FailedEvent.reason": "Why it was refused.",
    "FailedEvent.retriable": "Whether a retry may store it.",
    "FailedEvent.pointer": "The offending field, as a JSON pointer into the event.",
    "ExportPage.events": "Events as stored, in log order.",
}


def build_document() -> dict[str, Any]:
    ops = api_operations()
    refs, components = msgspec.json.schema_components(
        [
            *(op.response for op in ops),
            Problem,
            BatchResult,
            ExportPage,
            *models.FACET_SCHEMAS,
            *models.PASSED_THROUGH,
        ],
        ref_template=REF,
    )
    components["Facet"] = copy.deepcopy(models.FACET_SCHEMA)
    for facet in models.FACET_SCHEMAS:
        _passed_through(components[facet.__name__], facet.__name__.endswith("Facet"))
    for part in models.PASSED_THROUGH:
        _passed_through(components[part.__name__], False)
        components[part.__name__]["additionalProperties"] = True
    _describe(components)
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
            "description": OPENAPI_OPERATION.description,
            "tags": ["meta"],
            "security": [{"bearer": ["read"]}],
            "responses": {
                "200": {
                    **_json({"type": "object", "additionalProperties": True}, "The document."),
                    "headers": _ETAG,
                },
                "400": _problem(_UNKNOWN_PARAMETER, kind="invalid-request"),
                **_refusals("read", None),
            },
        }
    }
    for other in OTHER_OPERATIONS:
        paths.setdefault(other.path, {})[other.method.lower()] = _other_operation(other)
    _add_examples(paths, components)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Stackable metastore API",
            "version": "1.0.0-experimental",
            "description": DESCRIPTION,
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
            "contact": {"name": "Stackable", "url": "https://stackable.tech"},
            "x-experimental": True,
        },
        "servers": [{"url": "/"}],
        "tags": [{"name": name, "description": text} for name, text in TAGS.items()],
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
