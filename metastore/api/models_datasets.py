"""The response bodies of /datasets.

The shapes they share (references, freshness, times, totals) and the glossary: models.py.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from metastore.api import limits, models
from metastore.api.models import (
    WRITE_RULE,
    Cursor,
    DatasetFreshness,
    Description,
    Duration,
    ExpectedWriteField,
    FreshnessField,
    JobRef,
    JobRefWithRun,
    LastWriteAt,
    Lifecycle,
    NameKey,
    NamespaceText,
    Owners,
    RunRef,
    RunState,
    StartedAt,
    Struct,
    Tags,
    Time,
    Total,
    TotalIsExact,
    raw_list_of,
)

# The standard facets the document types, by name: their component schemas (api/facets.py
# leaves out of an answer one that breaks its schema).
DATASET_STANDARD_FACETS = models.standard_facets(
    "schema",
    "symlinks",
    "documentation",
    "ownership",
    "tags",
    "datasetType",
    "lifecycleStateChange",
)

DatasetFacets = Annotated[msgspec.Raw, models.facets_of(DATASET_STANDARD_FACETS)]

SchemaFields = Annotated[
    msgspec.Raw,
    raw_list_of("SchemaField", "The `schema` facet's fields (nested fields in `fields`)."),
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
