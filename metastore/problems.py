"""RFC 9457 problem details: every error answer of every API is one of these."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

import msgspec
from msgspec import Meta
from starlette.responses import Response

PROBLEM_JSON = "application/problem+json"

# RFC 9457 `type` URIs: one per kind of error a client tells apart (they identify, they
# are not fetched). Each status has its own; `not-yet` and `invalid-cursor` refine one.
PROBLEM_BASE = "https://stackable.tech/metastore/problems/"
TYPES: dict[str, str] = {
    "invalid-request": "A parameter or the body is invalid; `invalid-params` names it.",
    "invalid-cursor": "The `cursor` was not handed out by this list with these filters.",
    "unauthorized": "No valid bearer token of the path's scope.",
    "forbidden": "The token's scope does not cover the path.",
    "not-found": "No such id, or no such path.",
    "not-yet": "The id is known, but its first event is after `as_of`.",
    "method-not-allowed": "The path does not take this method.",
    "not-acceptable": "No answer in an accepted media type.",
    "request-timeout": "The request was not sent in time.",
    "conflict": "The request conflicts with the stored state.",
    "precondition-failed": "A precondition header does not hold.",
    "too-large": "The body is larger than the limit.",
    "unsupported-media-type": "The body's media type is not accepted.",
    "unprocessable": "The body is well-formed but cannot be processed.",
    "too-many-requests": "Too many requests; retry later.",
    "header-too-large": "The request line and headers are larger than the limit.",
    "not-implemented": "A transfer coding the server does not apply.",
    "internal": "An unexpected error; it is logged.",
    "unavailable": "The database is unavailable; retry after `Retry-After`.",
    "issuer-unavailable": "The OIDC issuer's keys cannot be fetched, so a bearer JWT "
    "cannot be checked; retry after `Retry-After`.",
    "read-models-rebuilding": "The read models are another release's (an upgrade or a "
    "rollback): the projector rebuilds them for this one; retry after `Retry-After`.",
    "read-timeout": "The read ran past its time limit (METASTORE_READ_TIMEOUT) and was "
    "stopped; ask for less, or retry later.",
    "reads-busy": "Expensive reads (graphs, impact, diffs, search, `as_of`) fill their share "
    "of the read connections and its queue; retry after `Retry-After`, or ask for less.",
    "policy-forbidden": "The authorization policy does not allow it: a namespace the "
    "principal may not write (`invalid-params` names each; nothing was stored), or the "
    "export feed.",
    "authorization-unavailable": "The authorization service (OPA) did not decide (an "
    "error, a timeout): nothing is allowed meanwhile; retry after `Retry-After`.",
}
_TYPE_OF_STATUS = {
    400: "invalid-request",
    401: "unauthorized",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    406: "not-acceptable",
    408: "request-timeout",
    409: "conflict",
    412: "precondition-failed",
    413: "too-large",
    415: "unsupported-media-type",
    422: "unprocessable",
    429: "too-many-requests",
    431: "header-too-large",
    500: "internal",
    501: "not-implemented",
    503: "unavailable",
}


def type_uri(status: int, kind: str | None = None) -> str:
    """The `type` of a problem: `kind` (a key of TYPES), else the status's own."""
    kind = kind or _TYPE_OF_STATUS.get(status)
    return PROBLEM_BASE + kind if kind else "about:blank"


# What `type` can be: the URIs above, or RFC 9457's `about:blank` for a status without one.
TYPE_URIS: tuple[str, ...] = (*(PROBLEM_BASE + kind for kind in TYPES), "about:blank")


class InvalidParam(msgspec.Struct):
    name: str  # the field, as a JSON pointer ("/run/runId") or a query parameter name
    reason: str


class Problem(msgspec.Struct, kw_only=True):
    """Every member is always sent (null when it does not apply), as the schema says."""

    type: Annotated[str, Meta(extra_json_schema={"enum": list(TYPE_URIS)})]  # see type_uri
    title: str
    status: int
    detail: str | None
    instance: str | None
    pointer: str | None  # the first offending field (JSON pointer), when there is one
    invalid_params: list[InvalidParam] | None = msgspec.field(name="invalid-params")


TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    406: "Not Acceptable",
    408: "Request Timeout",
    409: "Conflict",
    412: "Precondition Failed",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Content",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
}


class ProblemError(Exception):
    """Raise from a handler to answer with a problem document."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        pointer: str | None = None,
        invalid_params: list[InvalidParam] | None = None,
        headers: Mapping[str, str] | None = None,
        kind: str | None = None,
    ) -> None:
        super().__init__(detail)
        self.kind = kind  # a key of TYPES when it refines the status's type
        self.status = status
        self.detail = detail
        self.pointer = pointer
        self.invalid_params = invalid_params
        self.headers = dict(headers or {})


def problem_body(
    status: int,
    detail: str | None,
    *,
    title: str | None = None,
    kind: str | None = None,
    instance: str | None = None,
    pointer: str | None = None,
    invalid_params: list[InvalidParam] | None = None,
) -> bytes:
    """The encoded problem document; `title` defaults to the status's own."""
    return msgspec.json.encode(
        Problem(
            type=type_uri(status, kind),
            title=TITLES.get(status, "Error") if title is None else title,
            status=status,
            detail=detail,
            instance=instance,
            pointer=pointer,
            invalid_params=invalid_params,
        )
    )


def problem_response(
    status: int,
    detail: str | None = None,
    *,
    pointer: str | None = None,
    invalid_params: list[InvalidParam] | None = None,
    instance: str | None = None,
    headers: Mapping[str, str] | None = None,
    kind: str | None = None,
) -> Response:
    if invalid_params is None and pointer is not None:
        invalid_params = [InvalidParam(name=pointer, reason=detail or "")]
    body = problem_body(
        status,
        detail,
        kind=kind,
        instance=instance,
        pointer=pointer,
        invalid_params=invalid_params,
    )
    return Response(
        body,
        status_code=status,
        media_type=PROBLEM_JSON,
        headers=dict(headers or {}),
    )


def from_error(exc: ProblemError, instance: str | None = None) -> Response:
    return problem_response(
        exc.status,
        exc.detail,
        pointer=exc.pointer,
        invalid_params=exc.invalid_params,
        instance=instance,
        headers=exc.headers,
        kind=exc.kind,
    )
