"""RFC 9457 problem details: every error answer of every API is one of these."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec
from starlette.responses import Response

PROBLEM_JSON = "application/problem+json"


class InvalidParam(msgspec.Struct, omit_defaults=True):
    name: str  # the field, as a JSON pointer ("/run/runId") or a query parameter name
    reason: str


class Problem(msgspec.Struct, omit_defaults=True):
    type: str = "about:blank"
    title: str = ""
    status: int = 500
    detail: str | None = None
    instance: str | None = None
    pointer: str | None = None  # the first offending field (JSON pointer), when there is one
    invalid_params: list[InvalidParam] | None = msgspec.field(name="invalid-params", default=None)


_TITLES = {
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
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.pointer = pointer
        self.invalid_params = invalid_params
        self.headers = dict(headers or {})


def problem_response(
    status: int,
    detail: str | None = None,
    *,
    pointer: str | None = None,
    invalid_params: list[InvalidParam] | None = None,
    instance: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    if invalid_params is None and pointer is not None:
        invalid_params = [InvalidParam(name=pointer, reason=detail or "")]
    body = Problem(
        title=_TITLES.get(status, "Error"),
        status=status,
        detail=detail,
        instance=instance,
        pointer=pointer,
        invalid_params=invalid_params,
    )
    return Response(
        msgspec.json.encode(body),
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
    )
