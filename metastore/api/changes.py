"""GET /changes?since=: whether the read models changed since a position, for a screen that
polls (Cockpit every few seconds): one read of `projection_state`, no read model.

The position is api/read_position.py's token: it changes with every folded batch, rebuild
or reset. A screen keeps the `position` of its last answer and asks again with it as
`since`; `changed` false means every answer made from the read models alone is as it was
(their ETags too: a conditional GET would answer 304).
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta
from starlette.requests import Request
from starlette.responses import Response

from metastore.api import read_position
from metastore.api.db import connection
from metastore.api.operation import Operation, Resource
from metastore.api.responses import json_response

Position = Annotated[
    str,
    Meta(
        pattern=r"^[A-Za-z0-9_-]+$",
        max_length=64,
        description="The read models' position from an earlier answer (opaque).",
        examples=["q1FRnLzMh2cXQe0d3fQ9AA"],
    ),
]


class ChangesQuery(msgspec.Struct, frozen=True):
    since: Position | None = None


class Changes(msgspec.Struct):
    position: Annotated[
        str,
        Meta(
            description="Where the read models stand now (opaque): pass it as `since` next "
            "time. It changes whenever the projector folds events, or a rebuild is swapped "
            "in, whatever namespace they are about.",
            examples=["q1FRnLzMh2cXQe0d3fQ9AA"],
        ),
    ]
    changed: Annotated[
        bool,
        Meta(
            description="Whether the read models changed since `since` (true without "
            "`since`, or with a position of another store or release). False: answers "
            "made from the read models alone are as they were."
        ),
    ]


OP = Operation(
    "GET",
    "/changes",
    "getChanges",
    "Whether anything changed since a position (cheap polling)",
    Changes,
    tag="status",
    query=ChangesQuery,
    description="For a screen that polls: call without `since` for the read models' "
    "`position`, then every few seconds with `since=<that position>`; while `changed` is "
    "false nothing the projector folds has changed, so the screen need not reload (a "
    "conditional GET of an answer you hold would answer 304 too). When it is true, reload "
    "and keep the new `position`. The answer costs one read of the projections' positions, "
    "no read model; it says whether anything changed, not what (any namespace's events "
    "move it). Answers that depend on the clock (lateness, run statistics) change without "
    "it: reload those on their own schedule.",
)
resource = Resource()


@resource.add(OP)
async def get_changes(request: Request) -> Response:
    query: ChangesQuery = OP.parse_query(request)
    async with connection(request) as conn:
        position = await read_position.current(conn)
    return json_response(request, Changes(position=position, changed=query.since != position))
