"""The response bodies of /jobs (and the dataset pages of a job or run).

The shapes they share (references, freshness, times, totals) and the glossary: models.py.
"""

from __future__ import annotations

import uuid
from typing import Annotated

import msgspec
from msgspec import Meta

from metastore.api import limits, models
from metastore.api.models import (
    Cursor,
    DatasetRef,
    Description,
    JobRefWithRun,
    LatenessField,
    LatestRun,
    Owners,
    Struct,
    Tags,
    Time,
    Total,
    TotalIsExact,
)

JOB_STANDARD_FACETS = models.standard_facets("jobType", "documentation", "ownership", "tags", "sql")

JobFacets = Annotated[msgspec.Raw, models.facets_of(JOB_STANDARD_FACETS)]


# (the fields a job's list item and page begin with, in this order)
class JobHead(Struct):
    id: uuid.UUID
    namespace: str
    name: str
    job_type: str | None
    processing_type: str | None
    integration: str | None
    description: Description


class JobSummary(JobHead):
    parent: JobRefWithRun | None
    first_seen: Time
    last_seen: Time
    latest_run: LatestRun | None
    lateness: LatenessField


class JobPage(Struct):
    items: list[JobSummary]
    next_cursor: Cursor
    total: Total
    total_is_exact: TotalIsExact


class Job(JobHead):
    owners: Owners
    tags: Tags
    facets: JobFacets
    first_seen: Time
    last_seen: Time
    parent: JobRefWithRun | None
    children: Annotated[
        list[JobRefWithRun],
        Meta(
            description="Its child jobs (jobs whose runs name this job's in their parent "
            f"facet), each with its latest run: the first {limits.EMBEDDED_REFS} by name; "
            "`child_count` counts them all."
        ),
    ]
    child_count: Annotated[int, Meta(ge=0, description="How many child jobs it has.")]
    latest_run: LatestRun | None
    run_count: Annotated[int, Meta(ge=0, description="Its runs (all time).")]
    inputs: Annotated[list[DatasetRef], models.first_datasets("reads")]
    input_count: Annotated[int, models.all_datasets("reads")]
    outputs: Annotated[list[DatasetRef], models.first_datasets("writes")]
    output_count: Annotated[int, models.all_datasets("writes")]
    lateness: LatenessField


class DatasetRefPage(Struct):
    items: list[DatasetRef]
    next_cursor: Cursor
