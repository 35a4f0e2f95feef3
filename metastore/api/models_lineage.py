"""The response bodies of the graphs: /lineage, impact, lineage diff, run and column lineage.

The shapes they share (references, freshness, times, totals) and the glossary: models.py.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from metastore.api import limits
from metastore.api.breaking_models import BreakingChange
from metastore.api.models import (
    DatasetRef,
    ExpectedWriteField,
    FreshnessField,
    JobRef,
    LastWriteAt,
    LatenessField,
    LatestRun,
    Lifecycle,
    NameKey,
    Owner,
    Owners,
    RunBasics,
    RunRef,
    Struct,
    Time,
    raw_list_of,
)

Transformations = Annotated[
    msgspec.Raw,
    raw_list_of(
        "Transformation", "How the output field is made from the input field (columnLineage)."
    ),
]

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
    columns: Annotated[
        list[ColumnEdge],
        Meta(
            description="From fields (`node=field:...`): every field edge downstream of "
            "them within `depth` field hops, nearest first (`depth` counts hops from a field "
            "asked; `to` is a dependent field; `max_nodes` bounds the dependent fields kept, "
            "nearest first, `truncated` then). `nodes` are then the datasets of the fields "
            "asked (depth 0) and every dataset holding a dependent field (at the depth of its "
            "nearest), with owners and freshness, `beyond` zero; `edges` is empty. Empty for "
            "other nodes."
        ),
    ] = []


class FieldType(Struct):
    """A schema field by its path (nested fields as `parent.child`) and type."""

    name: str
    type: str | None


class TypeChange(Struct):
    name: Annotated[str, Meta(description="The field's path (nested fields as `parent.child`).")]
    from_type: Annotated[str | None, Meta(description="Its type at `from`.")]
    to_type: Annotated[str | None, Meta(description="Its type at `to`.")]
    breaking: Annotated[
        bool,
        Meta(
            description="True when the new type does not hold every value of the old one "
            "(narrowed or changed; see `breaking` of the schema change); false for a "
            "widening (`int` -> `bigint`) or a type unknown on one side."
        ),
    ] = False


class SchemaChange(Struct):
    """How a dataset's schema changed between its versions at `from` and at `to`."""

    dataset: DatasetRef
    from_version: Annotated[int, Meta(ge=1, description="Its version at `from`.")]
    to_version: Annotated[int, Meta(ge=1, description="Its version at `to`.")]
    added: Annotated[list[FieldType], Meta(description="Fields at `to`, not at `from`.")]
    removed: Annotated[list[FieldType], Meta(description="Fields at `from`, not at `to`.")]
    type_changed: Annotated[list[TypeChange], Meta(description="Fields whose type changed.")]
    breaking: Annotated[
        list[BreakingChange],
        Meta(
            description="The changes that can break a reader (a field removed, narrowed, its "
            "type changed incompatibly, made required), each with the downstream fields it "
            "reaches; widened and added fields are not in it."
        ),
    ] = []


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


class RunNode(RunBasics):
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
