"""The response bodies of /api/v1, as msgspec structs: the handlers encode these, and
openapi.py publishes their JSON Schemas, so the document cannot drift from the answers.

One shape per thing: a run is `id` wherever it is the subject, a job, dataset or run
another object points at is an embedded reference (`JobRef`, `DatasetRef`, `RunRef`),
never a bare id, and a field means the same in every response (`started_at`: the START
eventTime, else the earliest eventTime of the run; `root`: null for a run without a
parent). Properties without a description of their own get the glossary's in openapi.py.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from metastore.api import limits

REF = "#/components/schemas/{name}"

# JSON passed through without a decode (stored events, schema fields, facets): the schema
# describes what the producer is expected to have sent (the OpenLineage spec's shapes).
JSONObject = Annotated[
    msgspec.Raw, Meta(extra_json_schema={"type": "object", "additionalProperties": True})
]


def _facets(standard: dict[str, str]) -> dict[str, Any]:
    """A facets object's schema: the standard facets typed by name, any other a `Facet`."""
    return {
        "type": "object",
        "properties": {
            name: {"$ref": REF.format(name=schema)} for name, schema in standard.items()
        },
        "additionalProperties": {"$ref": REF.format(name="Facet")},
    }


_MERGED = (
    "Facets by name, merged the OpenLineage way: the latest of each name by eventTime, "
    'removed by a later `{"_deleted": true}`. Each facet is as the producer sent it; '
    "the standard ones are described by the OpenLineage facet schemas."
)
# The standard facets the document types, by name: their component schemas (api/facets.py
# leaves out of an answer one that breaks its schema).
DATASET_STANDARD_FACETS: dict[str, str] = {
    "schema": "SchemaFacet",
    "symlinks": "SymlinksFacet",
    "documentation": "DocumentationFacet",
    "ownership": "OwnershipFacet",
    "tags": "TagsFacet",
    "datasetType": "DatasetTypeFacet",
    "lifecycleStateChange": "LifecycleStateChangeFacet",
}
DatasetFacets = Annotated[
    msgspec.Raw,
    Meta(description=_MERGED, extra_json_schema=_facets(DATASET_STANDARD_FACETS)),
]
JOB_STANDARD_FACETS: dict[str, str] = {
    "jobType": "JobTypeFacet",
    "documentation": "DocumentationFacet",
    "ownership": "OwnershipFacet",
    "tags": "TagsFacet",
    "sql": "SqlFacet",
}
JobFacets = Annotated[
    msgspec.Raw,
    Meta(description=_MERGED, extra_json_schema=_facets(JOB_STANDARD_FACETS)),
]
RUN_STANDARD_FACETS: dict[str, str] = {
    "nominalTime": "NominalTimeFacet",
    "parent": "ParentFacet",
    "errorMessage": "ErrorMessageFacet",
    "tags": "TagsFacet",
}
RunFacets = Annotated[
    msgspec.Raw,
    Meta(description=_MERGED, extra_json_schema=_facets(RUN_STANDARD_FACETS)),
]
SchemaFields = Annotated[
    msgspec.Raw,
    Meta(
        description="The `schema` facet's fields (nested fields in `fields`).",
        extra_json_schema={"type": "array", "items": {"$ref": REF.format(name="SchemaField")}},
    ),
]
Transformations = Annotated[
    msgspec.Raw,
    Meta(
        description="How the output field is made from the input field (columnLineage).",
        extra_json_schema={"type": "array", "items": {"$ref": REF.format(name="Transformation")}},
    ),
]
Cursor = Annotated[
    str | None,
    Meta(description="Pass as `cursor` to read the next page; null on the last page."),
]
# Every time in an answer is RFC 3339 in UTC with its offset (`Z`): `format: date-time`.
Time = Annotated[dt.datetime, Meta(tz=True)]
RunState = Literal["START", "RUNNING", "COMPLETE", "FAIL", "ABORT", "OTHER"]
LifecycleState = Annotated[
    str,
    Meta(
        description="A `lifecycleStateChange`: ALTER, CREATE, DROP, OVERWRITE, RENAME or "
        "TRUNCATE (as the producer wrote it).",
        examples=["CREATE"],
    ),
]
NameKind = Annotated[
    str,
    Meta(
        description="Where the name comes from: `emitted` (an event used it, whether or not "
        "a catalog rule also joined it: `joined_by` says so), `symlink` (an identifier of a "
        "`symlinks` facet, and no event used it), `catalog` (no event used it: a catalog "
        "rule derived it, the metastore's name of an engine's name, as `joined_by` says); "
        "more kinds may come, so treat an unknown kind as a name like the others.",
        examples=["symlink"],
    ),
]
NamespaceText = Annotated[str, Meta(examples=["s3a://warehouse"])]
StartedAt = Annotated[
    Time,
    Meta(
        description="The eventTime of the run's START, else (no START seen) the earliest "
        "eventTime of its events: the same rule in every response."
    ),
]
Duration = Annotated[
    float | None,
    Meta(description="Seconds from `started_at` to `ended_at`; null while running."),
]


class Struct(msgspec.Struct, kw_only=True):
    pass


# A list's total: counted up to 10,000 (api/pagination.py, TOTAL_CAP), so no page pays for
# counting a long list to its end.
Total = Annotated[
    int,
    Meta(
        ge=0,
        description="How many items all the pages hold, with these filters: exact up to "
        "10,000; beyond, 10,000 with `total_is_exact` false (there are at least that many).",
    ),
]
TotalIsExact = Annotated[
    bool, Meta(description="False when `total` is a lower bound (more than 10,000 items).")
]


# --- facet shapes (documentation of what passes through) -----------------------------


# Any facet: a JSON object (its own fields besides these two are the facet's business).
FACET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A facet as the producer sent it: `_producer` and `_schemaURL`, then "
    "its own fields.",
    "properties": {
        "_producer": {"type": "string", "description": "URI of the software that made it."},
        "_schemaURL": {"type": "string", "description": "URI of the facet's JSON Schema."},
    },
    "additionalProperties": True,
}


class SchemaField(Struct):
    """A field of a `schema` facet."""

    name: str
    type: str | None = None
    description: str | None = None
    fields: list[SchemaField] | None = None


class Transformation(Struct):
    """A transformation of a columnLineage input field."""

    type: str | None = None
    subtype: str | None = None
    description: str | None = None
    masking: bool | None = None


class SchemaFacet(Struct):
    fields: list[SchemaField] | None = None


class SymlinkIdentifier(Struct):
    namespace: str
    name: str
    type: str | None = None


class SymlinksFacet(Struct):
    identifiers: list[SymlinkIdentifier] | None = None


class DocumentationFacet(Struct):
    description: str | None = None


class Owner(Struct):
    name: Annotated[str, Meta(examples=["team:sales-analytics"])]
    type: str | None = None


class OwnershipFacet(Struct):
    owners: list[Owner] | None = None


class Tag(Struct):
    key: str
    value: str | None = None
    source: str | None = None


class TagsFacet(Struct):
    tags: list[Tag] | None = None


class DatasetTypeFacet(Struct):
    datasetType: str | None = None
    subType: str | None = None


class LifecycleStateChangeFacet(Struct):
    lifecycleStateChange: str | None = None


class JobTypeFacet(Struct):
    processingType: str | None = None
    integration: str | None = None
    jobType: str | None = None


class SqlFacet(Struct):
    query: str | None = None


class NominalTimeFacet(Struct):
    nominalStartTime: str | None = None
    nominalEndTime: str | None = None


class ParentRun(Struct):
    runId: str


class ParentJob(Struct):
    namespace: str
    name: str


class ParentFacet(Struct):
    run: ParentRun | None = None
    job: ParentJob | None = None


class ErrorMessageFacet(Struct):
    message: str | None = None
    programmingLanguage: str | None = None
    stackTrace: str | None = None


FACET_SCHEMAS: tuple[Any, ...] = (
    SchemaFacet,
    SymlinksFacet,
    DocumentationFacet,
    OwnershipFacet,
    TagsFacet,
    DatasetTypeFacet,
    LifecycleStateChangeFacet,
    JobTypeFacet,
    SqlFacet,
    NominalTimeFacet,
    ParentFacet,
    ErrorMessageFacet,
    SchemaField,
    Transformation,
)


# --- references -----------------------------------------------------------------------


class JobRef(Struct):
    """A job another object points at."""

    id: uuid.UUID
    namespace: str
    name: str


class DatasetRef(Struct):
    """A dataset another object points at, under its display name."""

    id: uuid.UUID
    namespace: str
    name: str


class RunRef(Struct):
    """A run another object points at: its job and state (null for a run never seen)."""

    id: uuid.UUID
    job: Annotated[
        JobRef | None,
        Meta(
            description="Its job (null when unknown). Job ids derive from the name, so this "
            "is the job's id even before the job emits events of its own."
        ),
    ]
    state: RunState | None


# --- writes and freshness ---------------------------------------------------------------

WRITE_RULE = (
    "A write is a successful one: a run writes its outputs when it COMPLETEs (a STREAMING "
    "job, `jobType.processingType` STREAMING in the event, also at each RUNNING event that "
    "names them), unless it ends FAIL or ABORT (its latest terminal event, as its `state`): "
    "then it only attempted them, even after a COMPLETE: its job keeps its edges, but the "
    "attempt makes no schema version and is never a write, now or `as_of` any moment."
)


class Write(Struct):
    """A successful write of the dataset (see the write rule in the API description)."""

    run: Annotated[RunRef, Meta(description="The run that wrote it.")]
    at: Annotated[
        Time,
        Meta(
            description="When: the run's COMPLETE eventTime (a STREAMING job's RUNNING eventTime)."
        ),
    ]


class FailedAttempt(Struct):
    """A run that named the dataset as an output and then FAILed or ABORTed: it wrote
    nothing, and the data is what the last successful write left."""

    run: RunRef
    state: Annotated[Literal["FAIL", "ABORT"], Meta(description="How the attempt ended.")]
    at: Annotated[Time, Meta(description="Its FAIL or ABORT eventTime.")]


class StaleReason(Struct):
    """Why a dataset is stale."""

    reason: Annotated[
        Literal["writer_failed", "input_rewritten", "upstream_failed"],
        Meta(
            description="`writer_failed`: the latest run of a job that writes it failed "
            "(or aborted) after its last successful write; `input_rewritten`: a dataset "
            "the run that wrote it last read (one hop) was successfully written since; "
            "`upstream_failed`: it is at risk, as a dataset upstream of it (through the "
            "inputs of each one's last write, any number of hops, at most "
            f"{limits.UPSTREAM_HOPS} beyond the answer's datasets) is stale because its "
            "writer failed: `run` is that root failed run, `dataset` the input of its last "
            "write it came through."
        ),
    ]
    at: Annotated[
        Time,
        Meta(
            description="When the writer's run (for `upstream_failed`, the root run) "
            "failed, or the input was written."
        ),
    ]
    run: Annotated[
        RunRef | None,
        Meta(
            description="`writer_failed`: the writer's failed run; `upstream_failed`: the "
            "root failed run upstream, with its job; `input_rewritten`: null (the input's "
            "own `freshness` names the run that wrote it)."
        ),
    ]
    dataset: Annotated[
        DatasetRef | None,
        Meta(
            description="`input_rewritten`: the input; `upstream_failed`: the input it "
            "came through; null otherwise."
        ),
    ]


class DatasetFreshness(Struct):
    """Whether the data is current: its last successful write, a failed attempt after it,
    and whether it is stale (with every reason)."""

    last_write: Annotated[
        Write | None, Meta(description="Its last successful write; null when none.")
    ]
    failed_attempt: Annotated[
        FailedAttempt | None,
        Meta(
            description="The latest run that attempted to write it and failed, when that "
            "was after the last successful write; null otherwise."
        ),
    ]
    stale: Annotated[bool, Meta(description="True when `stale_reasons` is not empty.")]
    stale_reasons: Annotated[
        list[StaleReason], Meta(description="Each reason it is stale, the latest first.")
    ]


FreshnessField = Annotated[
    DatasetFreshness,
    Meta(
        description="Its last successful write, a later failed attempt, and whether it is "
        "stale: a writer's latest run failed after that write, an input of the run that "
        "made it was successfully written since (one hop), or a dataset upstream of it is "
        "stale because its writer failed (any number of hops: `upstream_failed`). With "
        "`as_of`: as of that moment. " + WRITE_RULE
    ),
]
LastWriteAt = Annotated[
    Time | None,
    Meta(
        description="When it was last successfully written (`freshness.last_write.at`); "
        "a failed or aborted run does not move it."
    ),
]


# --- catalogue fields (standard facets surfaced) ----------------------------------------

Description = Annotated[str | None, Meta(description="The `documentation` facet's description.")]
Owners = Annotated[list[Owner], Meta(description="The `ownership` facet's owners.")]
Tags = Annotated[list[Tag], Meta(description="The `tags` facet's tags.")]


# --- namespaces -----------------------------------------------------------------------


class Namespace(Struct):
    name: NamespaceText
    has_jobs: bool
    has_datasets: bool
    job_count: Annotated[int, Meta(ge=0, description="Jobs in this namespace.")]
    dataset_count: Annotated[
        int,
        Meta(
            ge=0,
            description="Datasets with a name in this namespace (an emitted, symlink or "
            "catalog name), each once: what /datasets?namespace= and /search?namespace= list. "
            "A dataset with names in several namespaces counts in each (a Spark table with "
            "its Hive symlink in both), so the counts of all namespaces can add up to more "
            "than the datasets.",
        ),
    ]
    first_seen: Time
    last_seen: Time


class NamespacePage(Struct):
    items: list[Namespace]
    next_cursor: Cursor
    total: Annotated[int, Meta(ge=0, description="Namespaces in all pages.")]
    total_is_exact: Annotated[bool, Meta(description="Always true: namespaces are few.")]


# --- jobs -----------------------------------------------------------------------------


class LatestRun(Struct):
    """A job's latest run (by start): what a graph or list colours a job by."""

    id: uuid.UUID
    state: RunState
    state_time: Time
    started_at: StartedAt
    ended_at: Time | None
    duration_seconds: Duration


# --- lateness learned from history (api/lateness.py) ----------------------------------

LatenessStatus = Annotated[
    Literal["on_time", "late", "missed"],
    Meta(
        description="`late`: the next run has not started within the tolerance after it was "
        "expected; `missed`: nor by the slot after that (at least one run is missing); else "
        "`on_time`."
    ),
]


class Lateness(Struct):
    """When a job's next run is expected, learned from its own latest runs (no configuration;
    docs/LATENESS.md states the method and its error rates), or as an override sets it."""

    status: LatenessStatus
    cadence: Annotated[
        Literal["hourly", "daily", "weekly", "regular", "irregular"],
        Meta(
            description="Its cadence: `regular` another fixed period (`period_seconds`), "
            "`irregular` gaps that vary more than a tenth of their median."
        ),
    ]
    basis: Annotated[
        Literal["nominal", "start"],
        Meta(description="Learned from its runs' nominalTime (`nominal`) or start times."),
    ]
    period_seconds: Annotated[float, Meta(description="The median gap between its runs.")]
    tolerance_seconds: Annotated[
        float, Meta(description="How late a run may start before it counts as late.")
    ]
    learned_from: Annotated[
        int, Meta(ge=1, description="How many scheduled times it was learned from.")
    ]
    last_expected: Annotated[Time, Meta(description="The latest scheduled time seen.")]
    next_expected: Annotated[Time, Meta(description="When its next run should start.")]
    late_at: Annotated[Time, Meta(description="When that run is late: next_expected + tolerance.")]
    missed_at: Annotated[Time, Meta(description="When it is missed: late_at + a period.")]
    source: Annotated[
        Literal["learned", "override"],
        Meta(
            description="`learned` from its runs, or `override`: a per-job override "
            "(METASTORE_CADENCE_OVERRIDES) set its cadence or tolerance."
        ),
    ]


LatenessField = Annotated[
    Lateness | None,
    Meta(
        description="When its next run is due, learned from its runs (null: fewer than 4 "
        "scheduled times seen). Judged now, also in an `as_of` answer."
    ),
]


class ExpectedWrite(Struct):
    """The next write of a dataset its writers' cadences lead to expect."""

    job: Annotated[JobRef, Meta(description="The writer whose write is expected first.")]
    status: LatenessStatus
    expected_at: Annotated[
        Time, Meta(description="Its next run's expected start plus its median duration.")
    ]
    late_at: Annotated[Time, Meta(description="When that write is late.")]


ExpectedWriteField = Annotated[
    ExpectedWrite | None,
    Meta(
        description="The next write expected of it: of the writer (a job that wrote it) "
        "whose next run is due first, by its learned cadence (null: no writer has one)."
    ),
]


class JobRefWithRun(Struct):
    """A job another object points at, with its latest run: what a list colours it by."""

    id: uuid.UUID
    namespace: str
    name: str
    latest_run: LatestRun | None


class JobSummary(Struct):
    id: uuid.UUID
    namespace: str
    name: str
    job_type: str | None
    processing_type: str | None
    integration: str | None
    description: Description
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


class Job(Struct):
    id: uuid.UUID
    namespace: str
    name: str
    job_type: str | None
    processing_type: str | None
    integration: str | None
    description: Description
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
    inputs: Annotated[
        list[DatasetRef], Meta(description="The first datasets it reads, by name (capped).")
    ]
    input_count: Annotated[int, Meta(ge=0, description="All the datasets it reads.")]
    outputs: Annotated[
        list[DatasetRef], Meta(description="The first datasets it writes, by name (capped).")
    ]
    output_count: Annotated[int, Meta(ge=0, description="All the datasets it writes.")]
    lateness: LatenessField


class DatasetRefPage(Struct):
    items: list[DatasetRef]
    next_cursor: Cursor


# --- runs -----------------------------------------------------------------------------


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


# --- a stored event (documentation of what passes through) ---------------------------
# What ingest checked of a run event (metastore/envelope.py), spelled as the producer sent
# it: the answer is the stored text itself, so these structs only describe it, and every
# object may hold fields beyond them. Facets were not checked: any JSON.

AsSent = Annotated[
    msgspec.Raw,
    Meta(
        description="As the producer sent it, not checked: per the spec an object of "
        "facets by name."
    ),
]


class StoredDataset(Struct):
    namespace: str
    name: str
    facets: AsSent | msgspec.UnsetType = msgspec.UNSET


class StoredRun(Struct):
    runId: Annotated[str, Meta(description="A UUID, spelled as sent.")]
    facets: AsSent | msgspec.UnsetType = msgspec.UNSET


class StoredJob(Struct):
    namespace: str
    name: str
    facets: AsSent | msgspec.UnsetType = msgspec.UNSET


class StoredEvent(Struct):
    """A run event as stored: the OpenLineage envelope ingest checked, with the rest of the
    event (facets, fields of later spec versions) as sent."""

    eventTime: Annotated[
        str, Meta(description="A date-time as sent (one without an offset counts as UTC).")
    ]
    producer: Annotated[str, Meta(description="URI of the software that sent it.")]
    run: Annotated[StoredRun, Meta(description="The run, with its facets.")]
    job: Annotated[StoredJob, Meta(description="The run's job, with its facets.")]
    eventType: Annotated[
        RunState | None, Meta(description="START, RUNNING, COMPLETE, ABORT, FAIL or OTHER.")
    ] = None
    schemaURL: Annotated[
        str | None, Meta(description="URI of the OpenLineage schema it follows.")
    ] = None
    inputs: Annotated[
        list[StoredDataset], Meta(description="The datasets it read, with their facets.")
    ] = []
    outputs: Annotated[
        list[StoredDataset], Meta(description="The datasets it wrote, with their facets.")
    ] = []


# The field type of a stored event in an answer: its text, described by StoredEvent.
StoredEventText = Annotated[
    msgspec.Raw, Meta(extra_json_schema={"$ref": "#/components/schemas/StoredEvent"})
]
PASSED_THROUGH: tuple[Any, ...] = (StoredEvent, StoredRun, StoredJob, StoredDataset)


class RunEventPage(Struct):
    items: Annotated[
        list[StoredEventText],
        Meta(
            description="The run's OpenLineage events as stored, in log order (a page ends "
            f"once it holds {limits.PAGE_BYTES // 2**20} MiB of events, always holding one)."
        ),
    ]
    next_cursor: Cursor


# --- datasets -------------------------------------------------------------------------


class NameKey(Struct):
    namespace: str
    name: str


class NameJoin(Struct):
    """The catalog rule that made a name one of the dataset's."""

    rule: Annotated[
        Literal["map", "facet"],
        Meta(
            description="`map`: an entry of the catalog map (METASTORE_CATALOGS_FILE); "
            "`facet`: the `catalog` facet the engine's event sent with the dataset."
        ),
    ]
    entry: Annotated[
        int | None,
        Meta(description="The map entry's position in the `catalogs` list, from 0 (`map`)."),
    ]
    engine: Annotated[
        str, Meta(description="The entry's engine namespace (exact or a glob), or the facet's.")
    ]
    catalog: Annotated[str, Meta(description="The engine's catalog (the name's first part).")]
    metastore: Annotated[str, Meta(description="The metastore's namespace.")]
    role: Annotated[
        Literal["engine", "metastore"],
        Meta(
            description="`engine`: this is the engine's name `<catalog>.<rest>`; "
            "`metastore`: this is the metastore's name `<rest>` the rule derived."
        ),
    ]
    via: Annotated[NameKey, Meta(description="The other name of the pair the rule joined.")]


class DatasetName(Struct):
    namespace: NamespaceText
    name: str
    kind: NameKind
    symlink_type: Annotated[
        str | None, Meta(description="The symlinks identifier's `type` (TABLE, ...).")
    ]
    joined_by: Annotated[
        NameJoin | None,
        Meta(
            description="The catalog rule that joined it (of any kind: an engine's name an "
            "event emitted, or the metastore's name the rule derived); null when none did."
        ),
    ] = None


class Lifecycle(Struct):
    """The latest `lifecycleStateChange` reported for the dataset."""

    state: LifecycleState
    changed_at: Time


class DatasetSummary(Struct):
    id: uuid.UUID
    namespace: Annotated[str, Meta(description="Namespace of its display name.")]
    name: Annotated[
        str,
        Meta(
            description="Its display name: the most table-like of its names (the table's "
            "name in its metastore: a `symlinks` identifier of type TABLE, or the metastore's "
            "name a catalog rule derived; else a name an event used; else another; the first "
            "seen among equals)."
        ),
    ]
    matched_name: Annotated[
        DatasetName | None,
        Meta(
            description="The name that matched the list's `namespace` (the name it counts "
            "there by), `name` or `q` filter (null without one)."
        ),
    ]
    name_count: Annotated[int, Meta(ge=1, description="How many names it has.")]
    lifecycle: Lifecycle | None
    first_seen: Time
    last_seen: Time
    freshness: Annotated[
        DatasetFreshness,
        Meta(
            description="Its freshness now, as the dataset page gives it: its last "
            "successful write, a later failed attempt, and whether it is stale (a writer's "
            "latest run failed after that write, or an input of the run that made it was "
            "successfully written since, one hop), so a list colours stale datasets from "
            "one call. " + WRITE_RULE
        ),
    ]


class DatasetPage(Struct):
    items: list[DatasetSummary]
    next_cursor: Cursor
    total: Total
    total_is_exact: TotalIsExact


class DatasetVersion(Struct):
    version: Annotated[int, Meta(ge=1, description="1 for the first schema seen, then up.")]
    event_time: Annotated[Time, Meta(description="When this schema was first seen.")]
    fields: SchemaFields
    run: Annotated[
        RunRef | None,
        Meta(description="The run whose output first carried it (null: not from a run)."),
    ]


class DatasetVersionPage(Struct):
    items: list[DatasetVersion]
    next_cursor: Cursor


class ReaderSchema(Struct):
    """A schema a job reported reading the dataset with: its engine's view of the data
    (Trino reads Spark's `long` as `bigint`), an observation, never a version."""

    fields: SchemaFields
    version: (
        Annotated[
            int,
            Meta(
                ge=1,
                description="The version (as in /versions) it is, its types compared "
                "engine-neutrally (`long` is `bigint`); null: no write produced it.",
            ),
        ]
        | None
    )
    run: Annotated[RunRef | None, Meta(description="The latest run that reported it.")]
    first_seen: Annotated[Time, Meta(description="When a reader first reported it.")]
    last_seen: Annotated[Time, Meta(description="When a reader last reported it.")]


class RunOfDataset(Struct):
    """A run that read (`role` input) or wrote (output) a dataset, and the schema it met."""

    id: uuid.UUID
    job: JobRef
    role: Literal["input", "output"]
    state: RunState
    started_at: StartedAt
    ended_at: Time | None
    duration_seconds: Duration
    schema_version: Annotated[
        int | None,
        Meta(
            description="The version (as in /versions) of the schema: the one the run's "
            "events carried for the dataset; for a reader that carried none, the latest "
            "at its start; null when unknown."
        ),
    ]
    lifecycle_state: Annotated[
        str | None,
        Meta(
            description="The `lifecycleStateChange` the run reported for the dataset "
            "(CREATE, OVERWRITE, DROP, ...); null when none."
        ),
    ]


class RunOfDatasetPage(Struct):
    items: list[RunOfDataset]
    next_cursor: Cursor


class DatasetWriter(Struct):
    """A job that wrote the dataset, or changed its lifecycle (a DROP writes no data)."""

    job: Annotated[JobRefWithRun, Meta(description="The job, with its latest run.")]
    last_write_at: Annotated[
        Time | None,
        Meta(
            description="Its last successful write (a run of it that COMPLETEd; null: it "
            "never wrote it, only declared it in a JobEvent or failed)."
        ),
    ]
    lifecycle_state: Annotated[
        str | None,
        Meta(
            description="The latest `lifecycleStateChange` it reported (CREATE, DROP, ...): "
            "a writer whose latest is DROP dropped the table; null when none."
        ),
    ]


class DatasetReader(Struct):
    """A job that read the dataset: the shape of a writer, with its read beside the job."""

    job: Annotated[JobRefWithRun, Meta(description="The job, with its latest run.")]
    last_read_at: Annotated[
        Time | None,
        Meta(
            description="When a run of it last named the dataset as an input (its latest "
            "eventTime doing so; null: only a JobEvent declared it)."
        ),
    ]


class Dataset(Struct):
    id: uuid.UUID
    namespace: Annotated[str, Meta(description="Namespace of its display name.")]
    name: Annotated[str, Meta(description="Its display name (the rule in DatasetSummary).")]
    names: Annotated[
        list[DatasetName],
        Meta(
            description=f"Its names with their kind: the first {limits.EMBEDDED_REFS} (by "
            "kind, namespace and name); `name_count` counts them all."
        ),
    ]
    name_count: Annotated[int, Meta(ge=1, description="How many names it has.")]
    fields: Annotated[
        SchemaFields | None,
        Meta(
            description="The fields of its latest version: the schema its last successful "
            "write produced (a reader's schema is in `reader_schemas`, never here)."
        ),
    ]
    reader_schemas: Annotated[
        list[ReaderSchema],
        Meta(
            description=f"The distinct schemas readers reported for it, latest first (the "
            f"first {limits.EMBEDDED_PAGE}): observations, never versions. As of T: those "
            "first reported by then."
        ),
    ]
    description: Description
    owners: Owners
    tags: Tags
    dataset_type: Annotated[str | None, Meta(description="The `datasetType` facet's type.")]
    lifecycle: Lifecycle | None
    facets: DatasetFacets
    first_seen: Time
    last_seen: Time
    last_write_at: LastWriteAt
    freshness: FreshnessField
    next_write: ExpectedWriteField
    producers: Annotated[
        list[DatasetWriter],
        Meta(
            description="Jobs that wrote it (or changed its lifecycle): the first "
            f"{limits.EMBEDDED_REFS} by name; `producer_count` counts them all."
        ),
    ]
    producer_count: Annotated[int, Meta(ge=0, description="How many jobs wrote it.")]
    consumers: Annotated[
        list[DatasetReader],
        Meta(
            description="The jobs that read it, each with its latest run and last read, "
            "as `producers` (the same shape): the first "
            f"{limits.EMBEDDED_REFS} by name; `consumer_count` counts them all."
        ),
    ]
    consumer_count: Annotated[int, Meta(ge=0, description="How many jobs read it.")]
    versions: Annotated[
        DatasetVersionPage,
        Meta(
            description=f"The first page ({limits.EMBEDDED_PAGE}, ending early past "
            f"{limits.EMBEDDED_BYTES // 2**20} MiB of fields) of /datasets/{{id}}/versions: "
            "its history."
        ),
    ]
    runs: Annotated[
        RunOfDatasetPage,
        Meta(
            description="The first page (10) of /datasets/{id}/runs?sort=outputs_first: "
            "the runs that wrote it, newest first, then those that read it (a busy reader "
            "never pushes the writers off)."
        ),
    ]


# --- lineage --------------------------------------------------------------------------


NodeKey = Annotated[
    str,
    Meta(
        pattern="^(dataset|job):[0-9a-f-]{36}$",
        description="`dataset:<id>` or `job:<id>`, as in the `node` parameter.",
    ),
]
Depth = Annotated[
    int,
    Meta(
        ge=0,
        description="Hops from the start node (dataset -> job -> dataset is two): a job's "
        "datasets are one hop from it.",
    ),
]


class Beyond(Struct):
    """How many of a node's neighbours this answer leaves out: what expanding it would add."""

    upstream: Annotated[
        int,
        Meta(
            ge=0,
            description="Its neighbours upstream not in the answer (a dataset's writers, a "
            "job's inputs).",
        ),
    ]
    downstream: Annotated[
        int,
        Meta(
            ge=0,
            description="Its neighbours downstream not in the answer (a dataset's readers, "
            "a job's outputs).",
        ),
    ]


class JobNode(Struct, tag_field="type", tag="job"):
    """A job in the graph, with what a graph colours it by."""

    key: NodeKey
    id: uuid.UUID
    namespace: str
    name: str
    depth: Depth
    job_type: str | None
    processing_type: str | None
    integration: str | None
    owners: Annotated[list[Owner], Meta(description="The owners its `ownership` job facet names.")]
    latest_run: LatestRun | None
    lateness: LatenessField
    beyond: Beyond


class DatasetNode(Struct, tag_field="type", tag="dataset"):
    """A dataset in the graph, under its display name."""

    key: NodeKey
    id: uuid.UUID
    namespace: str
    name: str
    depth: Depth
    name_count: Annotated[int, Meta(ge=1, description="How many names it has.")]
    dataset_type: Annotated[str | None, Meta(description="The `datasetType` facet's type.")]
    last_write_at: LastWriteAt
    lifecycle: Lifecycle | None
    owners: Owners
    freshness: FreshnessField
    next_write: ExpectedWriteField
    beyond: Beyond


LineageNode = JobNode | DatasetNode


class NodeRef(Struct):
    """A graph node an edge points at, named: its key (as in `nodes`), kind, id and name."""

    key: NodeKey
    type: Literal["job", "dataset"]
    id: uuid.UUID
    namespace: str
    name: str


class LineageEdge(Struct):
    """Data flow: dataset -> job (the job reads it), job -> dataset (the job writes it)."""

    from_: Annotated[NodeRef, Meta(description="Where the data comes from.")] = msgspec.field(
        name="from"
    )
    to: Annotated[NodeRef, Meta(description="Where it goes.")]
    lifecycle_state: Annotated[
        str | None,
        Meta(
            description="On a job -> dataset edge, the latest `lifecycleStateChange` the job "
            "reported for it (DROP: it dropped the table); null otherwise."
        ),
    ]
    first_seen: Annotated[
        Time | None,
        Meta(
            description="When the job first read or wrote the dataset (any run, or static lineage)."
        ),
    ] = None
    last_seen: Annotated[
        Time | None,
        Meta(
            description="The latest eventTime that named the dataset in the run that holds "
            "the edge (its job's latest run, then), or in the static lineage."
        ),
    ] = None
    last_run: Annotated[
        RunRef | None,
        Meta(
            description="The run that holds the edge, with its job and its state at the "
            "moment answered: its job's latest run started by then (`/runs/{run_id}`); null "
            "when static lineage (a JobEvent) alone declares it."
        ),
    ] = None


class LineageGraph(Struct):
    nodes: list[LineageNode]
    edges: list[LineageEdge]
    truncated: Annotated[
        bool,
        Meta(
            description="True when a limit cut the graph short of `depth`: the node limit, "
            f"{limits.VISIT_LIMIT:,} edges looked at, or {limits.EDGE_LIMIT:,} edges."
        ),
    ]


class UpstreamFailure(Struct):
    """A failed run upstream whose failure the start's data depends on."""

    run: Annotated[RunRef, Meta(description="The root failed run, with its job and state.")]
    at: Annotated[Time, Meta(description="When it failed.")]
    via: Annotated[
        DatasetRef,
        Meta(
            description="Which of the start's datasets it reaches: the start dataset, or "
            "a dataset the start job or run read (whose freshness says how: its writer "
            "failed, or `upstream_failed` through one of its inputs)."
        ),
    ]


class Impact(Struct):
    """What a failure or change reaches downstream: a lineage graph from the start node."""

    node: Annotated[str, Meta(description="The start, as given (`run:`, `job:` or `dataset:`).")]
    run: Annotated[
        RunRef | None, Meta(description="From a run: the run (its state); null otherwise.")
    ]
    causes: Annotated[
        list[UpstreamFailure],
        Meta(
            description="What broke upstream, in the same answer: the root failed runs the "
            "start depends on (a dataset: its failed writer and the failures upstream of "
            "it; a job or run: those of the datasets it read), as `upstream_failed` "
            "staleness finds them, each run once, the latest first; empty when nothing "
            "upstream failed (the failure, if any, is the start's own)."
        ),
    ]
    nodes: Annotated[
        list[LineageNode],
        Meta(
            description="The start node and everything downstream, nearest first: datasets "
            "with their freshness and owners, jobs with their latest run."
        ),
    ]
    edges: list[LineageEdge]
    truncated: Annotated[
        bool, Meta(description="True when the node limit cut the graph short of `depth`.")
    ]


class FieldType(Struct):
    """A schema field by its path (nested fields as `parent.child`) and type."""

    name: str
    type: str | None


class TypeChange(Struct):
    name: Annotated[str, Meta(description="The field's path (nested fields as `parent.child`).")]
    from_type: Annotated[str | None, Meta(description="Its type at `from`.")]
    to_type: Annotated[str | None, Meta(description="Its type at `to`.")]


class SchemaChange(Struct):
    """How a dataset's schema changed between its versions at `from` and at `to`."""

    dataset: DatasetRef
    from_version: Annotated[int, Meta(ge=1, description="Its version at `from`.")]
    to_version: Annotated[int, Meta(ge=1, description="Its version at `to`.")]
    added: Annotated[list[FieldType], Meta(description="Fields at `to`, not at `from`.")]
    removed: Annotated[list[FieldType], Meta(description="Fields at `from`, not at `to`.")]
    type_changed: Annotated[list[TypeChange], Meta(description="Fields whose type changed.")]


class LineageDiff(Struct):
    """What changed in the lineage graph around a node between two moments."""

    from_: Annotated[Time, Meta(description="The earlier moment.")] = msgspec.field(name="from")
    to: Annotated[Time, Meta(description="The later moment.")]
    nodes_added: Annotated[
        list[LineageNode],
        Meta(
            description="Nodes of the graph at `to` that it had not at "
            "`from` (as they were at `to`)."
        ),
    ]
    nodes_removed: Annotated[
        list[LineageNode],
        Meta(
            description="Nodes of the graph at `from` that it has not at `to` (as they were "
            "at `from`)."
        ),
    ]
    edges_added: Annotated[list[LineageEdge], Meta(description="Edges at `to`, not at `from`.")]
    edges_removed: Annotated[list[LineageEdge], Meta(description="Edges at `from`, not at `to`.")]
    schema_changes: Annotated[
        list[SchemaChange],
        Meta(
            description="For each dataset in either graph with a schema version at both "
            "moments, and not the same one: the fields added, removed and changed in type."
        ),
    ]
    truncated: Annotated[
        bool, Meta(description="True when the node limit cut either graph short of `depth`.")
    ]


class RunNode(Struct):
    id: uuid.UUID
    job: JobRef
    state: RunState
    state_time: Time
    started_at: StartedAt
    ended_at: Time | None
    duration_seconds: Duration
    depth: Annotated[int, Meta(ge=0, description="Hops from the start run.")]


class RunLink(Struct):
    """Run `from` wrote `dataset`, and run `to` read that write (the last before it started)."""

    from_: Annotated[RunRef, Meta(description="The writing run.")] = msgspec.field(name="from")
    to: Annotated[RunRef, Meta(description="The reading run.")]
    dataset: DatasetRef


class RunDatasetEdge(Struct):
    """A run read (`role` input) or wrote (output) a dataset."""

    run: RunRef
    dataset: DatasetRef
    role: Literal["input", "output"]
    written: Annotated[
        bool,
        Meta(
            description="An output: whether the run wrote it (false: it only attempted to, "
            "or has not completed yet). An input: false."
        ),
    ]


class RunLineage(Struct):
    nodes: list[RunNode]
    edges: list[RunLink]
    datasets: Annotated[
        list[DatasetNode],
        Meta(
            description="What the start run and each leaf run read and wrote, as graph "
            "nodes (`depth`: of the nearest of those runs; `beyond`: the jobs writing or "
            "reading it that ran none of the answer's runs)."
        ),
    ]
    dataset_edges: Annotated[
        list[RunDatasetEdge], Meta(description="Which of those runs read or wrote which.")
    ]
    truncated: Annotated[
        bool, Meta(description="True when the node limit cut the walk short of `depth`.")
    ]


class ColumnRef(Struct):
    """A field of a dataset, under the dataset's display name (as everywhere in the answer);
    `reported_as` is the name the columnLineage facet used."""

    dataset: Annotated[
        DatasetRef | None,
        Meta(description="The dataset the facet named (null: no event named it)."),
    ]
    namespace: Annotated[
        str, Meta(description="Namespace of the dataset's display name (else as reported).")
    ]
    name: Annotated[str, Meta(description="The dataset's display name (else as reported).")]
    field: str
    reported_as: Annotated[
        NameKey, Meta(description="The dataset's name as the columnLineage facet gave it.")
    ]


class ColumnEdge(Struct):
    """Field-level data flow: `to` is derived from `from`."""

    from_: ColumnRef = msgspec.field(name="from")
    to: ColumnRef
    transformations: Transformations
    job: Annotated[JobRef | None, Meta(description="The job of the latest report of this edge.")]
    jobs: Annotated[
        list[JobRef],
        Meta(
            description=f"Jobs that reported this edge (all time): up to {limits.EDGE_JOBS} "
            "of them, by name; `job_count` counts them all."
        ),
    ]
    job_count: Annotated[int, Meta(ge=0, description="How many jobs ever reported this edge.")]
    depth: Annotated[int, Meta(ge=1)]


class ColumnLineage(Struct):
    dataset: DatasetRef
    edges: list[ColumnEdge]
    truncated: Annotated[
        bool,
        Meta(
            description=f"True when the walk stopped short of `depth`: at {limits.EDGE_LIMIT:,} "
            f"edges, or {limits.VISIT_LIMIT:,} edges looked at."
        ),
    ]


# --- search ---------------------------------------------------------------------------


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


class DatasetHit(Struct, tag_field="type", tag="dataset"):
    id: uuid.UUID
    namespace: Annotated[str, Meta(description="Namespace of its display name.")]
    name: Annotated[str, Meta(description="Its display name.")]
    matched_name: Annotated[
        MatchedName,
        Meta(description="The name that matched `q` (maybe not its display name)."),
    ]
    match: Match


class NamespaceHit(Struct, tag_field="type", tag="namespace"):
    name: Annotated[str, Meta(description="The namespace.")]
    match: Match


SearchHit = JobHit | DatasetHit | NamespaceHit


class SearchPage(Struct):
    items: list[SearchHit]
    next_cursor: Cursor
    total: Total
    total_is_exact: TotalIsExact


# --- status ---------------------------------------------------------------------------


class LogStatus(Struct):
    events: Annotated[int, Meta(description="Stored events (an estimate above 50,000).")]
    size_bytes: int
    position: Annotated[str, Meta(description="The last readable position (an export cursor).")]
    last_received_at: Time | None


class ProjectionStatus(Struct):
    name: str
    version: int
    position: str
    events_folded: int
    lag_events: Annotated[int, Meta(description="Readable events past its position.")]
    lag_seconds: Annotated[
        float, Meta(description="Age of the oldest event it has not folded; 0 when caught up.")
    ]
    dead_letters: int
    updated_at: Time
    stalled: Annotated[
        bool,
        Meta(
            description="It has not folded for longer than METASTORE_STALL_TIMEOUT (60 s by "
            "default) while the oldest event past its position is older than that: a rebuild "
            "under way, a projector down, or one stuck. Its answers are that old."
        ),
    ] = False


class Freshness(Struct):
    source: Annotated[
        Literal["primary", "replica"],
        Meta(
            description="The database these answers come from (a streaming replica when "
            "METASTORE_READ_DATABASE_URL is set)."
        ),
    ]
    replication_lag_seconds: Annotated[
        float,
        Meta(
            description="How far the replica's replay is behind what it has received from "
            "the primary; 0 on the primary, or when the replica has replayed everything."
        ),
    ]
    lag_seconds: Annotated[
        float,
        Meta(
            description="How old an answer can be: the replication lag plus the largest "
            "projection lag."
        ),
    ]


class Status(Struct):
    version: Annotated[str, Meta(description="The metastore release of the API process answering.")]
    log: LogStatus
    projections: list[ProjectionStatus]
    freshness: Freshness
    rebuilding: Annotated[
        list[str],
        Meta(
            description="Projections whose live tables are another release's than this "
            "process reads (an upgrade or rollback): until the projector swaps in their "
            "rebuild, reads answer 503 of type `read-models-rebuilding`."
        ),
    ]


ALL: tuple[Any, ...] = (
    NamespacePage,
    JobPage,
    Job,
    RunPage,
    Run,
    RunEventPage,
    DatasetPage,
    Dataset,
    DatasetVersionPage,
    DatasetRefPage,
    LineageGraph,
    Impact,
    LineageDiff,
    ColumnLineage,
    SearchPage,
    Status,
)


# --- the glossary ---------------------------------------------------------------------
# The description of a property that has none of its own, by `Schema.property`, else by
# property name: the same name means the same thing in every response.
GLOSSARY: dict[str, str] = {
    "id": "Its stable id (a run's: the OpenLineage runId).",
    "namespace": "The namespace of its name.",
    "name": "Its name.",
    "first_seen": "The earliest eventTime of an event naming it.",
    "last_seen": "The latest eventTime of an event naming it.",
    "has_jobs": "Whether a job is in this namespace.",
    "has_datasets": "Whether a dataset name is in this namespace.",
    "items": "This page's items.",
    "children": "Its child jobs (jobs whose runs name this job's in their parent facet).",
    "consumers": "The jobs that read it, by name.",
    "dataset": "The dataset, under its display name.",
    "depth": "Hops from the start.",
    "edges": "The edges between the nodes.",
    "nodes": "The nodes reached, nearest first.",
    "truncated": "True when a limit cut the answer short.",
    "ended_at": "The eventTime of its terminal event (COMPLETE, FAIL, ABORT); null before.",
    "error_message": "The `errorMessage` run facet's message.",
    "field": "The field's name.",
    "from": "Where the flow comes from.",
    "to": "Where the flow goes.",
    "integration": "What emitted it: the `jobType` facet's integration, else the one its "
    "producer URL names (`.../integration/spark` is SPARK; Airflow's provider AIRFLOW).",
    "job_type": "The `jobType` facet's jobType (QUERY, DAG, TASK, JOB, ...).",
    "processing_type": "The `jobType` facet's processingType (BATCH or STREAMING).",
    "job": "The job.",
    "latest_run": "Its run with the latest start; null when it never ran.",
    "beyond": "How many of its neighbours the answer leaves out, upstream and downstream.",
    "match": "How the name matched `q`; results are ranked in this order.",
    "total": "How many items all the pages hold.",
    "lifecycle": "The latest lifecycle change reported for it; null when none.",
    "lifecycle_state": "The latest `lifecycleStateChange` reported for it (CREATE, DROP, "
    "...); null when none.",
    "changed_at": "The eventTime of the event that reported it.",
    "freshness": "Where these answers are read from and how old they can be.",
    "names": "All its names, each with its kind.",
    "nominal_start": "The `nominalTime` run facet's nominalStartTime.",
    "nominal_end": "The `nominalTime` run facet's nominalEndTime.",
    "parent": "Its parent (from the `parent` run facet); null when none.",
    "role": "`input`: the run read it; `output`: the run wrote it.",
    "state": "RunState: START, RUNNING, COMPLETE, FAIL, ABORT or OTHER (the latest event "
    "by eventTime; a terminal event wins).",
    "state_time": "The eventTime of the event that set `state`.",
    "type": "What it is.",
    "Owner.type": "The owner's kind (MAINTAINER, ...).",
    "SchemaField.type": "The field's data type, as the producer named it.",
    "SymlinkIdentifier.type": "The identifier's kind (TABLE, ...).",
    "Transformation.type": "DIRECT or INDIRECT.",
    "Transformation.subtype": "IDENTITY, TRANSFORMATION, AGGREGATION, FILTER, JOIN, ...",
    "Transformation.masking": "Whether the transformation masks the input.",
    "Transformation.description": "How the field is derived.",
    "SchemaField.description": "The field's description.",
    "DocumentationFacet.description": "What it is, in prose.",
    "fields": "Its fields.",
    "identifiers": "Other names of the dataset (Hive's, a catalog's, ...).",
    "datasetType": "TABLE, VIEW, FILE, TOPIC, STREAM, MODEL, ...",
    "subType": "A producer-specific refinement of datasetType.",
    "lifecycleStateChange": "ALTER, CREATE, DROP, OVERWRITE, RENAME or TRUNCATE.",
    "jobType": "QUERY, COMMAND, DAG, TASK, JOB, MODEL, ...",
    "processingType": "BATCH or STREAMING.",
    "JobTypeFacet.integration": "SPARK, TRINO, AIRFLOW, DBT, FLINK, ...",
    "owners": "Its owners.",
    "tags": "Its tags.",
    "key": "The tag's key.",
    "value": "The tag's value.",
    "source": "Where the tag comes from.",
    "query": "The SQL text.",
    "nominalStartTime": "When the run was scheduled to start (RFC 3339).",
    "nominalEndTime": "When the run's scheduled interval ends (RFC 3339).",
    "run": "The run.",
    "runId": "The parent run's runId.",
    "message": "The error message.",
    "programmingLanguage": "The language of the failing code.",
    "stackTrace": "The stack trace.",
    "log": "The event log.",
    "projections": "Each read model's progress.",
    "size_bytes": "The log's size on disk.",
    "last_received_at": "When the latest event was received; null when none.",
    "position": "Where it has folded up to (an export cursor).",
    "version": "The version of its code its tables were built by.",
    "events_folded": "Events folded since its tables were (re)built.",
    "dead_letters": "Events it could not fold (kept in the log, counted).",
    "updated_at": "When it last folded.",
}
