"""The response bodies of /runs.

The shapes they share (references, freshness, times, totals) and the glossary: models.py.
"""

from __future__ import annotations

import uuid
from typing import Annotated

import msgspec
from msgspec import Meta

from metastore.api import limits
from metastore.api.models import (
    MERGED,
    Cursor,
    DatasetRef,
    Duration,
    JobRef,
    RunRef,
    RunState,
    StartedAt,
    Struct,
    Time,
    Total,
    TotalIsExact,
    facets_schema,
)

RUN_STANDARD_FACETS: dict[str, str] = {
    "nominalTime": "NominalTimeFacet",
    "parent": "ParentFacet",
    "errorMessage": "ErrorMessageFacet",
    "tags": "TagsFacet",
}

RunFacets = Annotated[
    msgspec.Raw,
    Meta(description=MERGED, extra_json_schema=facets_schema(RUN_STANDARD_FACETS)),
]


class RunSummary(Struct):
    id: uuid.UUID
    job: JobRef
    state: RunState
    state_time: Time
    started_at: StartedAt
    ended_at: Time | None
    duration_seconds: Duration
    nominal_start: Time | None
    nominal_end: Time | None
    error_message: str | None
    parent: RunRef | None
    root: Annotated[
        RunRef | None,
        Meta(description="The top of its parent chain; null for a run without a parent."),
    ]
    first_seen: Time
    last_seen: Time


class RunPage(Struct):
    items: list[RunSummary]
    next_cursor: Cursor
    total: Total
    total_is_exact: TotalIsExact


class Run(Struct):
    id: uuid.UUID
    job: JobRef
    state: RunState
    state_time: Time
    started_at: StartedAt
    ended_at: Time | None
    duration_seconds: Duration
    nominal_start: Time | None
    nominal_end: Time | None
    error_message: str | None
    facets: RunFacets
    first_seen: Time
    last_seen: Time
    parent: RunRef | None
    root: Annotated[
        RunRef | None,
        Meta(description="The top of its parent chain; null for a run without a parent."),
    ]
    children: Annotated[list[RunRef], Meta(description="Its child runs (the first 1,000).")]
    inputs: Annotated[
        list[DatasetRef], Meta(description="The first datasets it read, by name (capped).")
    ]
    input_count: Annotated[int, Meta(ge=0, description="All the datasets it read.")]
    outputs: Annotated[
        list[DatasetRef], Meta(description="The first datasets it wrote, by name (capped).")
    ]
    output_count: Annotated[int, Meta(ge=0, description="All the datasets it wrote.")]


# The field type of a stored event in an answer: its text, described by StoredEvent.
StoredEventText = Annotated[
    msgspec.Raw, Meta(extra_json_schema={"$ref": "#/components/schemas/StoredEvent"})
]


class RunEventPage(Struct):
    items: Annotated[
        list[StoredEventText],
        Meta(
            description="The run's OpenLineage events as stored, in log order (a page ends "
            f"once it holds {limits.PAGE_BYTES // 2**20} MiB of events, always holding one)."
        ),
    ]
    next_cursor: Cursor
