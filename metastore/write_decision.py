"""Ingest bound to namespaces: a request's events are appended only when the principal may
write every namespace they write (each event's job namespace and output dataset
namespaces; a DatasetEvent's dataset namespace).

One batch decision per request (`WriteNamespace`, the authorizer caches them); any namespace
denied refuses the request whole with a 403 problem naming each denied namespace where it
occurs, so a token leaked from one team's jobs cannot write another team's lineage, and
nothing of a refused batch is stored.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import msgspec

from metastore.authz import Authorizer
from metastore.eventlog import LogRecord
from metastore.metrics import INGEST_EVENTS
from metastore.principal import Principal
from metastore.problems import InvalidParam, ProblemError

# The invalid-params of a refusal name at most this many places.
MAX_NAMED = 100


async def authorize_writes(
    authorizer: Authorizer,
    principal: Principal,
    records: Sequence[LogRecord],
    indexes: Sequence[int] | None = None,
) -> None:
    """Raises a 403 ProblemError unless every namespace the records write is allowed.

    `indexes`: each record's place in the batch (None: one event, pointers without it).
    """
    wanted = {namespace for record in records for namespace in record.writes}
    allowed = await authorizer.allowed(principal, "WriteNamespace", wanted)
    if len(allowed) == len(wanted):
        return
    denied = wanted - allowed
    INGEST_EVENTS.labels("forbidden").inc(len(records))
    who = f"{principal.name!r}" if principal.name else "an anonymous caller"
    names = ", ".join(repr(n) for n in sorted(denied))
    what = "the event is" if indexes is None else "the batch is refused whole and"
    params = [
        InvalidParam(name=pointer, reason=f"{who} may not write namespace {namespace!r}")
        for pointer, namespace in _places(records, indexes, denied)
    ][:MAX_NAMED]
    raise ProblemError(
        403,
        f"{who} may not write namespace(s) {names}: {what} not stored",
        pointer=params[0].name if params else None,
        invalid_params=params,
        kind="policy-forbidden",
    )


def _places(
    records: Sequence[LogRecord], indexes: Sequence[int] | None, denied: set[str]
) -> Iterator[tuple[str, str]]:
    """(JSON pointer, namespace) of each denied namespace an event writes (the refusal
    path only: it decodes the events again)."""
    for position, record in enumerate(records):
        prefix = "" if indexes is None else f"/{indexes[position]}"
        event: dict[str, Any] = msgspec.json.decode(record.event_json)
        if record.kind == "dataset":
            fields = [("/dataset/namespace", event["dataset"]["namespace"])]
        else:
            fields = [("/job/namespace", event["job"]["namespace"])] + [
                (f"/outputs/{k}/namespace", output["namespace"])
                for k, output in enumerate(event.get("outputs") or ())
            ]
        for pointer, namespace in fields:
            if namespace in denied:
                yield prefix + pointer, namespace
