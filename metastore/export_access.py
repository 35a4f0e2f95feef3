"""What an export reader may see of a stored event: the event whole, without its sensitive
facets, or nothing.

An event goes out only when every namespace it names is readable: its job's (a
DatasetEvent's dataset's), each input's and output's, and each name their `symlinks`
facets give. An event touching a hidden namespace is left out whole, never cut down: a
copy without the hidden datasets would tell a consumer the job read or wrote less than
it did, and the hidden names stay out of it. Its sensitive facets (api/facets.py) go out
only where its job's namespace (a DatasetEvent's dataset's) shows them.

Positions are those of the log, so filtering leaves every cursor valid: a page may hold
fewer events than it read (none, even), and its cursor still moves past what it read.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import msgspec

from metastore.api.facets import event_without_sensitive
from metastore.authz import Authorizer
from metastore.eventlog import EventText
from metastore.principal import ANONYMOUS, Principal

_EVENT = msgspec.json.Decoder(dict[str, Any])


def _namespace(part: Any) -> str | None:
    if isinstance(part, dict) and isinstance(part.get("namespace"), str):
        return part["namespace"]
    return None


def _symlink_namespaces(dataset: Any) -> Iterator[str | None]:
    facets = dataset.get("facets") if isinstance(dataset, dict) else None
    symlinks = facets.get("symlinks") if isinstance(facets, dict) else None
    identifiers = symlinks.get("identifiers") if isinstance(symlinks, dict) else None
    for identifier in identifiers if isinstance(identifiers, list) else ():
        yield _namespace(identifier)


def namespaces(event: dict[str, Any]) -> tuple[str | None, set[str | None]]:
    """The namespace deciding its sensitive facets (its job's, else its dataset's), and
    every namespace the event names (None: a part without one, which no access reads
    when restricted)."""
    datasets = [event.get("dataset")] if "dataset" in event else []
    for side in ("inputs", "outputs"):
        if isinstance(event.get(side), list):
            datasets += event[side]
    owner = _namespace(event.get("job")) if "job" in event else _namespace(event.get("dataset"))
    named = {owner}
    for dataset in datasets:
        named.add(_namespace(dataset))
        named.update(_symlink_namespaces(dataset))
    return owner, named


class EventFilter:
    """What one export reader may see of a page of events, decided for the namespaces the
    page's own events name, in one batch: the log, not the read models, says what they
    are, so a reader sees an event as soon as it is logged, whatever the projector's lag."""

    def __init__(self, authorizer: Authorizer | None, principal: Principal) -> None:
        self.authorizer = authorizer
        self.principal = principal
        self.open = (
            authorizer is None or not authorizer.enabled or authorizer.sees_everything(principal)
        )

    async def visible(self, events: Sequence[EventText]) -> list[EventText]:
        """The events the reader may see, each as it may see it (positions unchanged)."""
        if self.open or not events:
            return list(events)
        assert self.authorizer is not None
        parts = [(event, *namespaces(_EVENT.decode(event.text))) for event in events]
        named = {n for _, _, names in parts for n in names if n is not None}
        readable = await self.authorizer.allowed(self.principal, "ReadNamespace", named)
        shown = [
            (event, owner) for event, owner, names in parts if all(n in readable for n in names)
        ]
        owners = {owner for _, owner in shown if owner is not None}
        sensitive = await self.authorizer.allowed(self.principal, "ShowSensitive", owners)
        return [
            event
            if owner in sensitive
            else EventText(event.position, event_without_sensitive(event.text.decode()).encode())
            for event, owner in shown
        ]


# Every event as stored: no authorization, or a reader who sees everything.
EVERY_EVENT = EventFilter(None, ANONYMOUS)
