"""The response bodies of /api/v1, as msgspec structs: the handlers encode these, and
openapi.py publishes their JSON Schemas, so the document cannot drift from the answers."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

# JSON passed through without a decode: stored events, schema fields, facets.
JSONObject = Annotated[msgspec.Raw, Meta(extra_json_schema={"type": "object"})]
JSONArray = Annotated[msgspec.Raw, Meta(extra_json_schema={"type": "array"})]
Facets = Annotated[
    msgspec.Raw,
    Meta(
        description=(
            "Facets by name, merged the OpenLineage way: the latest of each name by eventTime, "
            'removed by a later `{"_deleted": true}`. Each facet is as the producer sent it.'
        ),
        extra_json_schema={"type": "object"},
    ),
]
Cursor = Annotated[
    str | None,
    Meta(description="Pass as `cursor` to read the next page; null on the last page."),
]
RunState = Literal["START", "RUNNING", "COMPLETE", "FAIL", "ABORT", "OTHER"]


class Struct(msgspec.Struct, kw_only=True):
    pass


# --- references -----------------------------------------------------------------------


class JobRef(Struct):
    id: uuid.UUID
    namespace: str
    name: str


class DatasetRef(Struct):
    id: uuid.UUID
    namespace: str
    name: str


class RunRef(Struct):
    """A run another run points at; `job_id` and `state` are null for a run never seen."""

    id: uuid.UUID
    job_namespace: str | None
    job_name: str | None
    job_id: uuid.UUID | None
    state: RunState | None


# --- namespaces -----------------------------------------------------------------------


class Namespace(Struct):
    name: str
    has_jobs: bool
    has_datasets: bool
    first_seen: dt.datetime
    last_seen: dt.datetime


class NamespacePage(Struct):
    items: list[Namespace]
    next_cursor: Cursor


# --- jobs -----------------------------------------------------------------------------


class LatestRun(Struct):
    id: uuid.UUID
    state: RunState
    state_time: dt.datetime
    started_at: dt.datetime | None
    ended_at: dt.datetime | None


class JobSummary(Struct):
    id: uuid.UUID
    namespace: str
    name: str
    job_type: str | None
    processing_type: str | None
    integration: str | None
    parent_job_id: uuid.UUID | None
    first_seen: dt.datetime
    last_seen: dt.datetime
    latest_run: LatestRun | None


class JobPage(Struct):
    items: list[JobSummary]
    next_cursor: Cursor


class Job(Struct):
    id: uuid.UUID
    namespace: str
    name: str
    job_type: str | None
    processing_type: str | None
    integration: str | None
    facets: Facets
    first_seen: dt.datetime
    last_seen: dt.datetime
    parent: JobRef | None
    children: list[JobRef]
    latest_run: LatestRun | None
    inputs: list[DatasetRef]
    outputs: list[DatasetRef]


# --- runs -----------------------------------------------------------------------------


class RunSummary(Struct):
    id: uuid.UUID
    job: JobRef
    state: RunState
    state_time: dt.datetime
    started_at: dt.datetime | None
    ended_at: dt.datetime | None
    duration_seconds: float | None
    nominal_start: dt.datetime | None
    nominal_end: dt.datetime | None
    error_message: str | None
    parent_run_id: uuid.UUID | None
    root_run_id: uuid.UUID | None
    first_seen: dt.datetime
    last_seen: dt.datetime


class RunPage(Struct):
    items: list[RunSummary]
    next_cursor: Cursor


class Run(Struct):
    id: uuid.UUID
    job: JobRef
    state: RunState
    state_time: dt.datetime
    started_at: dt.datetime | None
    ended_at: dt.datetime | None
    duration_seconds: float | None
    nominal_start: dt.datetime | None
    nominal_end: dt.datetime | None
    error_message: str | None
    facets: Facets
    first_seen: dt.datetime
    last_seen: dt.datetime
    parent: RunRef | None
    root: RunRef | None
    children: list[RunRef]
    inputs: list[DatasetRef]
    outputs: list[DatasetRef]


class RunEventPage(Struct):
    items: Annotated[
        list[JSONObject], Meta(description="The run's OpenLineage events as stored, in log order.")
    ]
    next_cursor: Cursor


# --- datasets -------------------------------------------------------------------------


class DatasetSummary(Struct):
    id: uuid.UUID
    namespace: str
    name: str
    first_seen: dt.datetime
    last_seen: dt.datetime


class DatasetPage(Struct):
    items: list[DatasetSummary]
    next_cursor: Cursor


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
    catalog: str
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
    namespace: str
    name: str
    kind: Annotated[
        Literal["emitted", "symlink", "catalog"],
        Meta(
            description="`emitted`: used by an event; `symlink`: from a symlinks facet; "
            "`catalog`: joined by a catalog rule (`joined_by` says which): an engine's name "
            "joined to its metastore's name, or a metastore's name known only from one."
        ),
    ]
    symlink_type: str | None
    joined_by: Annotated[
        NameJoin | None, Meta(description="For kind `catalog`: the rule that joined it.")
    ] = None


class Dataset(Struct):
    id: uuid.UUID
    namespace: str
    name: str
    names: list[DatasetName]
    fields: Annotated[
        JSONArray | None, Meta(description="The `schema` facet fields of the latest version.")
    ]
    facets: Facets
    first_seen: dt.datetime
    last_seen: dt.datetime
    producers: list[JobRef]
    consumers: list[JobRef]


class DatasetVersion(Struct):
    version: Annotated[int, Meta(ge=1, description="1 for the first schema seen, then up.")]
    event_time: dt.datetime
    fields: JSONArray
    run_id: uuid.UUID | None
    job_id: uuid.UUID | None


class DatasetVersionPage(Struct):
    items: list[DatasetVersion]
    next_cursor: Cursor


class RunOfDataset(Struct):
    """A run that read (`role` input) or wrote (output) a dataset, and the schema it met."""

    run_id: uuid.UUID
    job: JobRef
    role: Literal["input", "output"]
    state: RunState
    started_at: Annotated[
        dt.datetime, Meta(description="Its START eventTime, else its earliest eventTime.")
    ]
    ended_at: dt.datetime | None
    schema_version: Annotated[
        int | None,
        Meta(
            description="The version (as in /versions) of the schema: the one the run's "
            "events carried for the dataset; for a reader that carried none, the latest "
            "at its start; null when unknown."
        ),
    ]


class RunOfDatasetPage(Struct):
    items: list[RunOfDataset]
    next_cursor: Cursor


# --- lineage --------------------------------------------------------------------------


NodeKey = Annotated[
    str,
    Meta(
        pattern="^(dataset|job):[0-9a-f-]{36}$",
        description="`dataset:<id>` or `job:<id>`, as in the `node` parameter.",
    ),
]


class LineageNode(Struct):
    key: NodeKey
    type: Literal["dataset", "job"]
    id: uuid.UUID
    namespace: str
    name: str
    depth: Annotated[int, Meta(ge=0, description="Hops from the start node.")]


class LineageEdge(Struct):
    """Data flow: dataset -> job (the job reads it), job -> dataset (the job writes it)."""

    from_: NodeKey = msgspec.field(name="from")
    to: NodeKey


class LineageGraph(Struct):
    nodes: list[LineageNode]
    edges: list[LineageEdge]
    truncated: Annotated[
        bool, Meta(description="True when the node limit cut the graph short of `depth`.")
    ]


class RunNode(Struct):
    run_id: uuid.UUID
    job: JobRef
    state: RunState
    started_at: dt.datetime
    ended_at: dt.datetime | None
    depth: Annotated[int, Meta(ge=0, description="Hops from the start run.")]


class RunLink(Struct):
    """Run `from` wrote `dataset`, and run `to` read that write (the last before it started)."""

    from_: uuid.UUID = msgspec.field(name="from")
    to: uuid.UUID
    dataset: DatasetRef


class RunLineage(Struct):
    nodes: list[RunNode]
    edges: list[RunLink]
    truncated: Annotated[
        bool, Meta(description="True when the node limit cut the walk short of `depth`.")
    ]


class ColumnRef(Struct):
    dataset_id: uuid.UUID | None
    namespace: str
    name: str
    field: str


class ColumnEdge(Struct):
    """Field-level data flow: `to` is derived from `from`."""

    from_: ColumnRef = msgspec.field(name="from")
    to: ColumnRef
    transformations: JSONArray
    job_id: uuid.UUID | None
    depth: Annotated[int, Meta(ge=1)]


class ColumnLineage(Struct):
    dataset: DatasetRef
    edges: list[ColumnEdge]
    truncated: bool


# --- search ---------------------------------------------------------------------------


class SearchHit(Struct):
    type: Literal["dataset", "job"]
    id: uuid.UUID
    namespace: str
    name: str
    match: Annotated[
        Literal["exact", "prefix", "substring"],
        Meta(description="How the name matched `q`; results are ranked in this order."),
    ]


class SearchPage(Struct):
    items: list[SearchHit]
    next_cursor: Cursor


# --- status ---------------------------------------------------------------------------


class LogStatus(Struct):
    events: Annotated[int, Meta(description="Stored events (an estimate above 50,000).")]
    size_bytes: int
    position: Annotated[str, Meta(description="The last readable position (an export cursor).")]
    last_received_at: dt.datetime | None


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
    updated_at: dt.datetime


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
    log: LogStatus
    projections: list[ProjectionStatus]
    freshness: Freshness


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
    LineageGraph,
    ColumnLineage,
    SearchPage,
    Status,
)
