"""What every projection's fold shares: the decoded event, facet merging, order keys.

Order-independence: every "latest" rule compares the key `[eventTime in µs, seq]`, so
the result of folding a set of events does not depend on the order they arrive in (only
exact ties in eventTime fall back to log order).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from collections.abc import Sequence
from typing import Any

import msgspec

from metastore.eventlog import Position
from metastore.metrics import MALFORMED_FACETS

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
TERMINAL_STATES = frozenset({"COMPLETE", "FAIL", "ABORT"})
# Job ids are uuid5 of the job's name, so they are the same after any replay.
JOB_ID_NAMESPACE = uuid.UUID("6f1d9f0e-8a51-4f43-9d5e-1c1f5a7c2b10")
DATASET_ID_NAMESPACE = uuid.UUID("3b4e3c8a-2d8e-4b54-a1a4-6f8f0f3d9e21")


# Facets as the folds keep them: name -> the facet's JSON, undecoded. Merging facets only
# needs their names; the few facets a projection reads are decoded where it reads them
# (`facet`), so large ones (Spark's logical plan) are never parsed into Python objects.
Facets = dict[str, msgspec.Raw]


class FoldEvent(msgspec.Struct, frozen=True):
    """An event as the folds see it: its log position, envelope columns and facets."""

    position: Position
    received_at: dt.datetime
    event_time: dt.datetime
    kind: str
    event_type: str | None
    run_id: uuid.UUID | None
    job_namespace: str | None
    job_name: str | None
    run_facets: Facets | None = None
    job_facets: Facets | None = None
    job_id: uuid.UUID | None = None  # of (job_namespace, job_name)
    refs: list[DatasetRef] = []  # the datasets it names

    @property
    def seq(self) -> int:
        return self.position.seq

    @property
    def order(self) -> list[int]:
        """The key every latest-wins rule compares: [eventTime µs, seq] (JSON-storable)."""
        return [micros(self.event_time), self.position.seq]


def micros(when: dt.datetime) -> int:
    return (when - EPOCH) // dt.timedelta(microseconds=1)


def job_id(namespace: str, name: str) -> uuid.UUID:
    return uuid.uuid5(JOB_ID_NAMESPACE, f"{namespace}\x00{name}")


def dataset_id(namespace: str, name: str) -> uuid.UUID:
    return uuid.uuid5(DATASET_ID_NAMESPACE, f"{namespace}\x00{name}")


def malformed(facet: str) -> None:
    MALFORMED_FACETS.labels(facet=facet).inc()


def as_dict(value: Any, facet: str | None = None) -> dict[str, Any] | None:
    """`value` when it is a JSON object; otherwise None (counted when it names a facet)."""
    if isinstance(value, dict):
        return value
    if value is not None and facet is not None:
        malformed(facet)
    return None


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def facet(facets: Facets | None, name: str) -> dict[str, Any] | None:
    """The decoded facet `name`, or None when absent or not a JSON object (counted)."""
    if not facets:
        return None
    raw = facets.get(name)
    if raw is None:
        return None
    value = msgspec.json.decode(raw)
    if isinstance(value, dict):
        return value
    malformed(name)
    return None


def _is_deletion(raw: msgspec.Raw) -> bool:
    view = memoryview(raw)
    # A deletion marker is tiny: `{"_deleted": true}` (and maybe _producer, _schemaURL).
    if len(view) > 512 or b'"_deleted"' not in view.tobytes():
        return False
    value = msgspec.json.decode(raw)
    return isinstance(value, dict) and value.get("_deleted") is True


def merge_facets(
    facets: Facets, times: dict[str, Any], incoming: Facets | None, order: list[int]
) -> bool:
    """Merges facets the spec's way, latest by `order` wins per facet name.

    A facet replaces the facet of the same name; `{"_deleted": true}` removes it. The
    deletion is kept in `times`, so an older facet arriving later does not bring it back.
    Returns whether anything changed.
    """
    if not incoming:
        return False
    changed = False
    for name, value in incoming.items():
        previous = times.get(name)
        if previous is not None and previous >= order:
            continue
        view = memoryview(value)
        if not view or view[0] != 0x7B:  # "{": a facet is a JSON object
            malformed(name)
            continue
        if _is_deletion(value):
            facets.pop(name, None)
        else:
            facets[name] = value
        times[name] = order
        changed = True
    return changed


def parse_time(value: Any) -> dt.datetime | None:
    """An ISO-8601 timestamp (zone-less means UTC), or None."""
    if not isinstance(value, str):
        return None
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def parse_uuid(value: Any) -> uuid.UUID | None:
    if not isinstance(value, str):
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


class ParentRef(msgspec.Struct, frozen=True):
    run_id: uuid.UUID
    job_namespace: str | None
    job_name: str | None
    root_run_id: uuid.UUID | None


def parent_ref(run_facets: Facets | None) -> ParentRef | None:
    """The `parent` run facet (run.runId required; job and root optional), or None."""
    parent = facet(run_facets, "parent")
    if parent is None:
        return None
    run = as_dict(parent.get("run"))
    run_id = parse_uuid(run.get("runId")) if run else None
    if run_id is None:
        malformed("parent")
        return None
    job = as_dict(parent.get("job")) or {}
    root = as_dict(parent.get("root")) or {}
    root_run = as_dict(root.get("run")) or {}
    return ParentRef(
        run_id, text(job.get("namespace")), text(job.get("name")), parse_uuid(root_run.get("runId"))
    )


def json_text(value: Any) -> str:
    return msgspec.json.encode(value).decode()


# --- writing rows -----------------------------------------------------------------------
# Each fold writes its rows with one INSERT ... SELECT per table. The rows go as one jsonb
# parameter (a JSON array of row arrays, encoded by msgspec in C) rather than one array
# parameter per column: psycopg dumps array parameters element by element in Python, which
# was the fold's hottest spot (40 % of its time). jsonb is parsed once by the server, then
# each column is a cast of one element.


def rows_select(types: Sequence[str]) -> str:
    """`SELECT (r->>0)::type0, ... FROM jsonb_array_elements(%s::jsonb) r`, for `row_param`."""
    columns = [
        f"nullif(r->{i}, 'null')" if t == "jsonb" else f"(r->>{i})::{t}"
        for i, t in enumerate(types)
    ]
    return f"SELECT {', '.join(columns)} FROM jsonb_array_elements(%s::jsonb) AS r"


def row_param(types: Sequence[str], columns: Sequence[Sequence[Any]]) -> tuple[str]:
    """The parameter of `rows_select(types)` for rows given column by column.

    jsonb columns hold JSON text (or None), embedded as is; bytea goes as `\\x` hex.
    """
    converted: list[Sequence[Any]] = []
    for kind, column in zip(types, columns, strict=True):
        if kind == "jsonb":
            column = [None if v is None else msgspec.Raw(v) for v in column]
        elif kind == "bytea":
            column = [None if v is None else "\\x" + v.hex() for v in column]
        converted.append(column)
    return (_rows_encoder.encode(list(zip(*converted, strict=True))).decode(),)


_rows_encoder = msgspec.json.Encoder()


def fields_hash(fields: Any) -> bytes:
    return hashlib.sha256(msgspec.json.encode(fields, order="sorted")).digest()


class DatasetRef(msgspec.Struct, frozen=True):
    """A dataset an event names: where (input, output, the dataset of a DatasetEvent)."""

    role: str  # "input" | "output" | "dataset"
    namespace: str
    name: str
    facets: Facets | None
    symlinks: list[tuple[str, str, str | None]] = []  # its other names, from `symlinks`


class _Dataset(msgspec.Struct):
    namespace: Any = None
    name: Any = None
    facets: Facets | None = None


class _Section(msgspec.Struct):
    facets: Facets | None = None


class _Event(msgspec.Struct):
    """The parts of an event the folds use (everything else is skipped, not decoded)."""

    run: _Section | None = None
    job: _Section | None = None
    inputs: list[_Dataset] | None = None
    outputs: list[_Dataset] | None = None
    dataset: _Dataset | None = None


_event_decoder = msgspec.json.Decoder(_Event)
FACETS_DECODER = msgspec.json.Decoder(Facets)


def decode_event(event_json: str | bytes) -> _Event:
    """Decodes the parts the folds use; a part of the wrong shape is dropped (counted)."""
    try:
        return _event_decoder.decode(event_json)
    except msgspec.ValidationError:
        pass
    try:
        doc = msgspec.json.decode(event_json)
    except msgspec.DecodeError:
        return _Event()
    return _lenient_event(doc if isinstance(doc, dict) else {})


def _lenient_facets(value: Any, where: str) -> Facets | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        malformed(where)
        return None
    return {k: msgspec.Raw(msgspec.json.encode(v)) for k, v in value.items()}


def _lenient_dataset(value: Any) -> _Dataset | None:
    if not isinstance(value, dict):
        return None
    return _Dataset(
        value.get("namespace"),
        value.get("name"),
        _lenient_facets(value.get("facets"), "dataset.facets"),
    )


def _lenient_event(doc: dict[str, Any]) -> _Event:
    def section(key: str) -> _Section | None:
        part = doc.get(key)
        if not isinstance(part, dict):
            return None
        return _Section(_lenient_facets(part.get("facets"), f"{key}.facets"))

    def datasets(key: str) -> list[_Dataset]:
        return [d for d in map(_lenient_dataset, as_list(doc.get(key))) if d is not None]

    return _Event(
        section("run"),
        section("job"),
        datasets("inputs"),
        datasets("outputs"),
        _lenient_dataset(doc.get("dataset")),
    )


def fold_event(
    position: Position,
    received_at: dt.datetime,
    event_time: dt.datetime,
    kind: str,
    event_type: str | None,
    run_id: uuid.UUID | None,
    job_namespace: str | None,
    job_name: str | None,
    event_json: str | bytes,
) -> FoldEvent:
    """A FoldEvent with what every projection needs worked out once."""
    doc = decode_event(event_json)
    return FoldEvent(
        position,
        received_at,
        event_time,
        kind,
        event_type,
        run_id,
        job_namespace,
        job_name,
        doc.run.facets if doc.run else None,
        doc.job.facets if doc.job else None,
        job_id(job_namespace, job_name) if job_namespace and job_name else None,
        dataset_refs(kind, doc),
    )


def dataset_refs(kind: str, doc: _Event) -> list[DatasetRef]:
    refs: list[DatasetRef] = []
    if kind == "dataset":
        if doc.dataset is not None:
            _add_ref(refs, "dataset", doc.dataset)
        return refs
    for role, datasets in (("input", doc.inputs), ("output", doc.outputs)):
        for ds in datasets or ():
            _add_ref(refs, role, ds)
    return refs


def _add_ref(refs: list[DatasetRef], role: str, ds: _Dataset) -> None:
    namespace, name = text(ds.namespace), text(ds.name)
    if namespace is None or name is None:
        return
    refs.append(DatasetRef(role, namespace, name, ds.facets, symlink_names(ds.facets)))


def symlink_names(facets: Facets | None) -> list[tuple[str, str, str | None]]:
    """(namespace, name, type) of each identifier of a `symlinks` dataset facet."""
    symlinks = facet(facets, "symlinks")
    if symlinks is None:
        return []
    names = []
    for ident in as_list(symlinks.get("identifiers")):
        if not isinstance(ident, dict):
            malformed("symlinks")
            continue
        namespace, name = text(ident.get("namespace")), text(ident.get("name"))
        if namespace is None or name is None:
            malformed("symlinks")
            continue
        names.append((namespace, name, text(ident.get("type"))))
    return names
