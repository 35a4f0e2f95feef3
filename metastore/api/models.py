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


def standard_facets(*names: str) -> dict[str, str]:
    """The standard facets a document types, by name: each its component schema, named
    after it (`datasetType`: DatasetTypeFacet; api/facets.py leaves out of an answer one
    that breaks its schema)."""
    return {name: f"{name[0].upper()}{name[1:]}Facet" for name in names}


def facets_of(standard: dict[str, str]) -> Meta:
    """A facets object's schema: the standard facets typed by name, any other a `Facet`;
    merged the OpenLineage way (MERGED)."""
    schema = {
        "type": "object",
        "properties": {
            name: {"$ref": REF.format(name=schema)} for name, schema in standard.items()
        },
        "additionalProperties": {"$ref": REF.format(name="Facet")},
    }
    return Meta(description=MERGED, extra_json_schema=schema)


def raw_list_of(component: str, description: str) -> Meta:
    """Passed-through JSON (msgspec.Raw) documented as a list of `component`."""
    return Meta(
        description=description,
        extra_json_schema={"type": "array", "items": {"$ref": REF.format(name=component)}},
    )


MERGED = (
    "Facets by name, merged the OpenLineage way: the latest of each name by eventTime, "
    'removed by a later `{"_deleted": true}`. Each facet is as the producer sent it; '
    "the standard ones are described by the OpenLineage facet schemas."
)

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

# --- facet shapes (documentation of what passes through) ----------------------------


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


# --- references ---------------------------------------------------------------------


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


# The fields every run in an answer begins with, in this order (a run's page, a list item,
# a node of the run graph).
class RunBasics(Struct):
    id: uuid.UUID
    job: JobRef
    state: RunState
    state_time: Time
    started_at: StartedAt
    ended_at: Time | None
    duration_seconds: Duration


def first_datasets(verb: str) -> Meta:
    """The description of a job's or run's embedded datasets (`verb`: reads, wrote)."""
    return Meta(description=f"The first datasets it {verb}, by name (capped).")


def all_datasets(verb: str) -> Meta:
    """The description of how many datasets a job or run (`verb`: reads, wrote) has."""
    return Meta(ge=0, description=f"All the datasets it {verb}.")


# --- writes and freshness -----------------------------------------------------------


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

# --- catalogue fields (standard facets surfaced) ------------------------------------


Description = Annotated[str | None, Meta(description="The `documentation` facet's description.")]

Owners = Annotated[list[Owner], Meta(description="The `ownership` facet's owners.")]

Tags = Annotated[list[Tag], Meta(description="The `tags` facet's tags.")]


# --- what several answers embed: a job's latest run, lateness -----------------------


class LatestRun(Struct):
    """A job's latest run (by start): what a graph or list colours a job by."""

    id: uuid.UUID
    state: RunState
    state_time: Time
    started_at: StartedAt
    ended_at: Time | None
    duration_seconds: Duration


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


# --- a stored event (documentation of what passes through) --------------------------


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


PASSED_THROUGH: tuple[Any, ...] = (StoredEvent, StoredRun, StoredJob, StoredDataset)


# --- dataset names and lifecycle (datasets, graphs, search) -------------------------


class NameKey(Struct):
    namespace: str
    name: str


class Lifecycle(Struct):
    """The latest `lifecycleStateChange` reported for the dataset."""

    state: LifecycleState
    changed_at: Time


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
