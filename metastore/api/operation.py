"""One table row per HTTP operation: it parses the request and describes it in OpenAPI.

Each resource module declares its `Operation`s; the handler parses its parameters with
`op.parse(request)` and openapi.py renders the same objects, so the documented parameters
(types, enums, limits) are exactly the ones the handler accepts.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import msgspec.inspect
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from metastore.problems import InvalidParam, ProblemError

Handler = Callable[[Request], Awaitable[Response]]

_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")
_FIELD = re.compile(r"(?:at `\$\.|missing required field `)([A-Za-z_][A-Za-z0-9_]*)")


class NoParams(msgspec.Struct, frozen=True):
    """An operation without query (or path) parameters."""


@dataclass(frozen=True)
class Operation:
    method: str
    path: str  # relative to the mount point (/api/v1), Starlette/OpenAPI template syntax
    operation_id: str
    summary: str
    response: Any  # the msgspec type of the 200 body
    tag: str
    query: type[msgspec.Struct] = NoParams
    path_params: type[msgspec.Struct] = NoParams
    description: str = ""
    not_found: bool = False  # answers 404 for an unknown id
    scope: str = "read"

    def parse_query(self, request: Request) -> Any:
        given: dict[str, str] = {}
        for name, value in request.query_params.multi_items():
            if name in given:
                reason = "given more than once"
                raise ProblemError(
                    400,
                    f"query parameter `{name}` is invalid: {reason}",
                    invalid_params=[InvalidParam(name=name, reason=reason)],
                )
            given[name] = value
        return _convert(given, self.query, "query")

    def parse_path(self, request: Request) -> Any:
        return _convert(dict(request.path_params), self.path_params, "path")

    def route(self, handler: Handler) -> Route:
        return Route(self.path, handler, methods=[self.method], name=self.operation_id)


@functools.cache
def _datetime_fields(struct: type[msgspec.Struct]) -> frozenset[str]:
    info = msgspec.inspect.type_info(struct)
    assert isinstance(info, msgspec.inspect.StructType)
    names = set()
    for f in info.fields:
        options = f.type.types if isinstance(f.type, msgspec.inspect.UnionType) else (f.type,)
        # (a type annotated with a description or examples comes wrapped in Metadata)
        options = tuple(t.type if isinstance(t, msgspec.inspect.Metadata) else t for t in options)
        if any(isinstance(t, msgspec.inspect.DateTimeType) for t in options):
            names.add(f.encode_name)
    return frozenset(names)


def _convert(values: dict[str, Any], struct: type[msgspec.Struct], where: str) -> Any:
    for name in _datetime_fields(struct) & values.keys():
        # Lax conversion would read a number as a Unix time; the API takes RFC 3339 only.
        if not _RFC3339.match(values[name]):
            reason = "expected an RFC 3339 date-time with an offset (2024-01-31T12:00:00Z)"
            raise ProblemError(
                400,
                f"{where} parameter `{name}` is invalid: {reason}",
                invalid_params=[InvalidParam(name=name, reason=reason)],
            )
    for name, value in values.items():
        if isinstance(value, str) and "\x00" in value:  # PostgreSQL text cannot hold NUL
            reason = "must not contain NUL characters"
            raise ProblemError(
                400,
                f"{where} parameter `{name}` is invalid: {reason}",
                invalid_params=[InvalidParam(name=name, reason=reason)],
            )
    try:
        parsed = msgspec.convert(values, struct, strict=False)
    except msgspec.ValidationError as exc:
        message = str(exc)
        match = _FIELD.search(message)
        name = match.group(1) if match else "?"
        reason = message.split(" - at `")[0].replace("Object missing required field", "missing")
        detail = f"{where} parameter `{name}` is invalid: {reason}"
        raise ProblemError(
            400, detail, invalid_params=[InvalidParam(name=name, reason=reason)]
        ) from None
    # Lax conversion reads "null" as None (absent); a parameter that is given has a value.
    for name in values:
        if getattr(parsed, name, "") is None:
            reason = f"{values[name]!r} is not a value"
            raise ProblemError(
                400,
                f"{where} parameter `{name}` is invalid: {reason}",
                invalid_params=[InvalidParam(name=name, reason=reason)],
            )
    return parsed


@dataclass(frozen=True)
class Resource:
    """A module's operations with their handlers (a route list and an OpenAPI section)."""

    operations: list[tuple[Operation, Handler]] = field(default_factory=list)

    def add(self, op: Operation) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.operations.append((op, handler))
            return handler

        return register

    @property
    def routes(self) -> list[Route]:
        return [op.route(handler) for op, handler in self.operations]
