"""The response bodies of /runs.

The shapes they share (references, freshness, times, totals) and the glossary: models.py.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from metastore.api import limits, models
from metastore.api.models import (
    Cursor,
    DatasetRef,
    RunBasics,
    RunRef,
    Struct,
    Time,
    Total,
    TotalIsExact,
)

RUN_STANDARD_FACETS = models.standard_facets("nominalTime", "parent", "errorMessage", "tags")

RunFacets = Annotated[msgspec.Raw, models.facets_of(RUN_STANDARD_FACETS)]


Root = Annotated[
    RunRef | None,
    Meta(description="The top of its parent chain; null for a run without a parent."),
]


# (the fields a run's list item and page begin with, in this order)
class RunHead(RunBasics):
    nominal_start: Time | None
    nominal_end: Time | None
    error_message: str | None


class RunSummary(RunHead):
    parent: RunRef | None
    root: Root
    first_seen: Time
    last_seen: Time


class RunPage(Struct):
    items: list[RunSummary]
    next_cursor: Cursor
    total: Total
    total_is_exact: TotalIsExact


class Run(RunHead):
    facets: RunFacets
    first_seen: Time
    last_seen: Time
    parent: RunRef | None
    root: Root
    children: Annotated[list[RunRef], Meta(description="Its child runs (the first 1,000).")]
    inputs: Annotated[list[DatasetRef], models.first_datasets("read")]
    input_count: Annotated[int, models.all_datasets("read")]
    outputs: Annotated[list[DatasetRef], models.first_datasets("wrote")]
    output_count: Annotated[int, models.all_datasets("wrote")]


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
