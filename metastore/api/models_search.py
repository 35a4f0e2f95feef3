"""The response bodies of /search.

The shapes they share (references, freshness, times, totals) and the glossary: models.py.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from msgspec import Meta

from metastore.api.models import (
    Cursor,
    Struct,
    Total,
    TotalIsExact,
)


class MatchedName(Struct):
    namespace: str
    name: str


Match = Annotated[
    Literal["exact", "prefix", "substring"],
    Meta(description="How the name matched `q`; results are ranked in this order."),
]


class JobHit(Struct, tag_field="type", tag="job"):
    id: uuid.UUID
    namespace: str
    name: str
    matched_name: Annotated[MatchedName, Meta(description="The name that matched `q`.")]
    match: Match


class MatchedField(Struct, omit_defaults=True):
    name: Annotated[str, Meta(description="The field's name.")]
    description: Annotated[str | None, Meta(description="The field's description.")] = None


class DatasetHit(Struct, tag_field="type", tag="dataset", omit_defaults=True):
    id: uuid.UUID
    namespace: Annotated[str, Meta(description="Namespace of its display name.")]
    name: Annotated[str, Meta(description="Its display name.")]
    match: Annotated[
        Match,
        Meta(
            description="How the name (or, with `matched_field`, the field's name) matched "
            "`q`; `substring` also when only the field's description contains it."
        ),
    ]
    matched_name: Annotated[
        MatchedName | None,
        Meta(
            description="The name that matched `q` (maybe not its display name); absent when "
            "none of its names did and a field of its current schema did (`matched_field`)."
        ),
    ] = None
    matched_field: Annotated[
        MatchedField | None,
        Meta(
            description="The top-level field of its current schema whose name or description "
            "contains `q`, when none of its names does (its best-ranked such field)."
        ),
    ] = None


class NamespaceHit(Struct, tag_field="type", tag="namespace"):
    name: Annotated[str, Meta(description="The namespace.")]
    match: Match


SearchHit = JobHit | DatasetHit | NamespaceHit


class SearchPage(Struct):
    items: list[SearchHit]
    next_cursor: Cursor
    total: Total
    total_is_exact: TotalIsExact
