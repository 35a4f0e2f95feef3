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

from metastore.access import Access
from metastore.api.facets import event_without_sensitive
from metastore.eventlog import EventText

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


def shown(access: Access, text: bytes) -> bytes | None:
    """The stored event `text` as `access` may see it, or None when it may not."""
    if not access.restricted and access.sensitive is None:
        return text
    event = _EVENT.decode(text)
    owner, named = namespaces(event)
    if not all(n is not None and access.reads(n) for n in named):
        return None
    if owner is not None and access.shows_sensitive(owner):
        return text
    return event_without_sensitive(text.decode()).encode()


def visible(access: Access, events: Sequence[EventText]) -> list[EventText]:
    """The events `access` may see, each as it may see it (a page's positions unchanged)."""
    if not access.restricted and access.sensitive is None:
        return list(events)
    kept = []
    for event in events:
        text = shown(access, event.text)
        if text is not None:
            kept.append(event if text is event.text else EventText(event.position, text))
    return kept
