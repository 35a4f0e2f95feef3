"""Query and path parameter types shared by the operations (their limits are documented)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

import msgspec
from msgspec import Meta

from metastore.api.models import RunState

Limit = Annotated[int, Meta(ge=1, le=500, description="Items per page (at most 500).")]
DEFAULT_LIMIT = 50
# Opaque: only the `next_cursor` values a list hands out are valid (others answer 400).
CURSOR_PATTERN = "^[A-Za-z0-9_-]+$"
Cursor = (
    Annotated[
        str,
        Meta(
            pattern=CURSOR_PATTERN,
            max_length=4000,
            description="The `next_cursor` of the previous page (opaque).",
        ),
    ]
    | None
)


class Paged(msgspec.Struct, frozen=True, kw_only=True):
    """A list's page parameters; keyword-only, so a list's query struct that extends it
    keeps `limit` and `cursor` last, where every list documents them."""

    limit: Limit = DEFAULT_LIMIT
    cursor: Cursor = None


# PostgreSQL text cannot hold NUL, so no name can contain one.
NO_NUL = "^[^\x00]*$"
Substring = (
    Annotated[
        str,
        Meta(pattern=NO_NUL, max_length=200, description="Case-insensitive substring of the name."),
    ]
    | None
)
# A name or a namespace (a filter's value, described where it is used).
Name = Annotated[str, Meta(pattern=NO_NUL, max_length=2000)]
NamespaceName = (
    Annotated[str, Meta(pattern=NO_NUL, max_length=2000, description="Exact namespace.")] | None
)
ExactName = (
    Annotated[
        str,
        Meta(
            pattern=NO_NUL,
            max_length=2000,
            description="Exact name (with `namespace`: the lookup of one name).",
        ),
    ]
    | None
)
Timestamp = Annotated[dt.datetime, Meta(tz=True)]
# Several values in one parameter, comma-separated (`state=FAIL,ABORT`; the same name twice
# is refused, as for every parameter).
RunStates = Annotated[list[RunState], Meta(min_length=1, max_length=6)]
