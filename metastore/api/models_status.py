"""The response bodies of /status.

The shapes they share (references, freshness, times, totals) and the glossary: models.py.
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from metastore.api.models import (
    Struct,
    Time,
)


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
