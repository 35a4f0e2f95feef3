"""One table row per HTTP operation: it parses the request and describes it in OpenAPI.

Each resource module declares its `Operation`s; the handler parses its parameters with
`op.parse(request)` and openapi.py renders the same objects, so the documented parameters
(types, enums, limits) are exactly the ones the handler accepts. The route an operation
makes refuses a query parameter its struct does not have before the handler runs, so a
typo (`stat=FAIL`) is a 400 naming it on every operation, never unfiltered data.
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

from metastore.api import read_position
from metastore.problems import InvalidParam, ProblemError
from metastore.timeparam import plus_for_space

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
    # Its answer is a function of the read models, the request and the caller's access
    # alone (not of the clock): its ETag is made from the read models' position, and an
    # unchanged answer's 304 reads no read model (api/read_position.py).
    etag_from_position: bool = False
    # a graph walk or search: takes a slot of the read pool's expensive share (api/bulkhead.py),
    # as every request with `as_of` does
    expensive: bool = False

    def parse_query(self, request: Request) -> Any:
        given: dict[str, str] = {}
        for name, value in request.query_params.multi_items():
            if name in given:
                reason = "given more than once"
                if name in _list_fields(self.query):
                    reason += f" (a list is comma-separated: {name}=A,B)"
                raise ProblemError(
                    400,
                    f"query parameter `{name}` is invalid: {reason}",
                    invalid_params=[InvalidParam(name=name, reason=reason)],
                )
            given[name] = value
        return _convert(given, self.query, "query")

    def parse_path(self, request: Request) -> Any:
        return _convert(dict(request.path_params), self.path_params, "path")

    def check_names(self, request: Request) -> None:
        """400 naming every query parameter this operation does not take."""
        known = _names(self.query)
        unknown = sorted({name for name in request.query_params if name not in known})
        if not unknown:
            return
        takes = ", ".join(f"`{n}`" for n in sorted(known)) if known else "none"
        reason = f"not a parameter of this operation (it takes: {takes})"
        listed = ", ".join(f"`{n}`" for n in unknown)
        raise ProblemError(
            400,
            f"query parameter {listed} is unknown: {reason}",
            invalid_params=[InvalidParam(name=name, reason=reason) for name in unknown],
        )

    def route(self, handler: Handler) -> Route:
        async def checked(request: Request) -> Response:
            self.check_names(request)
            if self.etag_from_position:
                # (what the handler would refuse is refused first: a 304 never answers a
                # malformed request)
                self.parse_query(request)
                self.parse_path(request)
                unchanged = await read_position.not_modified(request)
                if unchanged is not None:
                    return unchanged
            bulkhead = getattr(request.app.state, "bulkhead", None)
            if bulkhead is None or not (self.expensive or "as_of" in request.query_params):
                return await handler(request)
            async with bulkhead.slot(self.path):
                return await handler(request)

        return Route(self.path, checked, methods=[self.method], name=self.operation_id)


def _fields(struct: type[msgspec.Struct]) -> tuple[msgspec.inspect.Field, ...]:
    info = msgspec.inspect.type_info(struct)
    assert isinstance(info, msgspec.inspect.StructType)
    return info.fields


def _options(field: msgspec.inspect.Field) -> tuple[msgspec.inspect.Type, ...]:
    """The types a field takes (a union's members, each unwrapped from its Metadata)."""
    # (a type annotated with a description or examples comes wrapped in Metadata)
    kind = field.type.type if isinstance(field.type, msgspec.inspect.Metadata) else field.type
    options = kind.types if isinstance(kind, msgspec.inspect.UnionType) else (kind,)
    return tuple(t.type if isinstance(t, msgspec.inspect.Metadata) else t for t in options)


@functools.cache
def _names(struct: type[msgspec.Struct]) -> frozenset[str]:
    return frozenset(f.encode_name for f in _fields(struct))


@functools.cache
def _taking(struct: type[msgspec.Struct], kind: type[msgspec.inspect.Type]) -> frozenset[str]:
    """The parameters of `struct` that take a `kind`: a ListType (a list, sent
    comma-separated: OpenAPI's form style without explode) or a DateTimeType."""
    return frozenset(
        f.encode_name for f in _fields(struct) if any(isinstance(t, kind) for t in _options(f))
    )


def _list_fields(struct: type[msgspec.Struct]) -> frozenset[str]:
    return _taking(struct, msgspec.inspect.ListType)


def _convert(values: dict[str, Any], struct: type[msgspec.Struct], where: str) -> Any:
    values = dict(values)
    for name in _taking(struct, msgspec.inspect.DateTimeType) & values.keys():
        values[name] = plus_for_space(values[name])  # `+00:00` sent unencoded
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
    for name in _list_fields(struct) & values.keys():
        # One order and no repeats, so a cursor is bound to the set of values, not its spelling.
        values[name] = sorted(set(values[name].split(",")))
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
