"""An event from the log, decoded once for every fold: a FoldEvent.

Besides the envelope and the facets (kept undecoded, see common.Facets), it works out
once what more than one fold reads: the order key, the `parent` run facet, and per
dataset its other names (`symlinks`, and its metastore's name by a catalog rule), its
schema (`schema`: datasets and history) and its field edges (`columnLineage`:
column_lineage and history). `fold.read_batch` runs this on the prefetcher's thread,
which mostly runs while the folding thread waits for the server, so it costs the fold
little.

A malformed facet is counted here, once per event read.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import uuid
from typing import Any

import msgspec

from metastore.catalogs import NO_CATALOGS, CatalogMap, metastore_namespace
from metastore.envelope import MAX_EVENT_DATASETS, MAX_NAME_BYTES
from metastore.eventlog import Position
from metastore.schema_types import canonical_type
from projections.common import (
    CatalogLink,
    ColumnReport,
    DatasetRef,
    Facets,
    FoldEvent,
    as_list,
    facet,
    job_id,
    json_text,
    malformed,
    micros,
    parent_ref,
    text,
)


class _Dataset(msgspec.Struct):
    namespace: Any = None
    name: Any = None
    facets: Facets | None = None


class _Section(msgspec.Struct):
    facets: Facets | None = None


class _Event(msgspec.Struct):
    """The parts of an event the folds use (everything else is skipped, not decoded)."""

    producer: Any = None
    run: _Section | None = None
    job: _Section | None = None
    inputs: list[_Dataset] | None = None
    outputs: list[_Dataset] | None = None
    dataset: _Dataset | None = None


_event_decoder = msgspec.json.Decoder(_Event)
# The lenient path decodes the whole event: numbers as Decimal (as sent), so one beyond
# float64 (1e400) anywhere does not fail it, and the facets are encoded back as sent.
_lenient_decoder = msgspec.json.Decoder(float_hook=decimal.Decimal)
_lenient_encoder = msgspec.json.Encoder(decimal_format="number")


def decode_event(event_json: str | bytes) -> _Event:
    """Decodes the parts the folds use; a part of the wrong shape is dropped (counted)."""
    try:
        return _event_decoder.decode(event_json)
    except msgspec.ValidationError:
        pass
    try:
        doc = _lenient_decoder.decode(event_json)
    except msgspec.DecodeError:
        return _Event()
    return _lenient_event(doc if isinstance(doc, dict) else {})


def _lenient_facets(value: Any, where: str) -> Facets | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        malformed(where)
        return None
    return {k: msgspec.Raw(_lenient_encoder.encode(v)) for k, v in value.items()}


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
        doc.get("producer"),
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
    catalogs: CatalogMap = NO_CATALOGS,
) -> FoldEvent:
    """A FoldEvent with what every projection needs worked out once (the metastore names
    of its datasets by the catalog map `catalogs` and their `catalog` facets)."""
    doc = decode_event(event_json)
    run_facets = doc.run.facets if doc.run else None
    job_facets = doc.job.facets if doc.job else None
    return FoldEvent(
        position,
        received_at,
        event_time,
        kind,
        event_type,
        run_id,
        job_namespace,
        job_name,
        run_facets,
        job_facets,
        job_id(job_namespace, job_name) if job_namespace and job_name else None,
        dataset_refs(kind, doc, catalogs),
        [micros(event_time), position.seq],
        parent_ref(run_facets) if kind == "run" and run_id is not None else None,
        text(doc.producer),
        kind == "run" and writes_outputs(event_type, job_facets),
    )


def writes_outputs(event_type: str | None, job_facets: Facets | None) -> bool:
    """Whether a run event with this eventType writes its outputs: a COMPLETE does; so does
    a RUNNING of a STREAMING job (its `jobType` facet in this event says so: a stream writes
    while it runs). START, FAIL, ABORT and OTHER name outputs the run only attempted."""
    if event_type == "COMPLETE":
        return True
    if event_type != "RUNNING" or not job_facets or "jobType" not in job_facets:
        return False
    job_type = facet(job_facets, "jobType") or {}
    processing = text(job_type.get("processingType"))
    return processing is not None and processing.upper() == "STREAMING"


def dataset_refs(kind: str, doc: _Event, catalogs: CatalogMap = NO_CATALOGS) -> list[DatasetRef]:
    refs: list[DatasetRef] = []
    symlinks = [MAX_EVENT_SYMLINKS]  # what the event's symlinks facets may still add
    if kind == "dataset":
        if doc.dataset is not None:
            _add_ref(refs, "dataset", doc.dataset, catalogs, symlinks)
        return refs
    named = len(doc.inputs or ()) + len(doc.outputs or ())
    if named > MAX_EVENT_DATASETS:  # (stored before ingest refused such events)
        raise ValueError(
            f"the event names {named:,} datasets; ingest takes at most "
            f"{MAX_EVENT_DATASETS:,} (inputs and outputs) an event"
        )
    for role, datasets in (("input", doc.inputs), ("output", doc.outputs)):
        for ds in datasets or ():
            _add_ref(refs, role, ds, catalogs, symlinks)
    return refs


def _add_ref(
    refs: list[DatasetRef], role: str, ds: _Dataset, catalogs: CatalogMap, symlinks: list[int]
) -> None:
    namespace, name = text(ds.namespace), text(ds.name)
    if namespace is None or name is None:
        return
    facets = ds.facets
    schema = schema_of(facets)
    # An input's column lineage describes another dataset's fields: not folded.
    lineage = facets.get("columnLineage") if facets and role != "input" else None
    deferred = lineage is not None and len(lineage) > EAGER_LINEAGE_BYTES
    refs.append(
        DatasetRef(
            role,
            namespace,
            name,
            facets,
            symlink_names(facets, symlinks),
            None if schema is None else schema[0],
            None if schema is None else schema[1],
            column_report(lineage) if lineage is not None and not deferred else None,
            catalog_link(namespace, name, facets, catalogs),
            lifecycle_state(facets) if facets and role == "output" else None,
            deferred,
        )
    )


def catalog_link(
    namespace: str, name: str, facets: Facets | None, catalogs: CatalogMap
) -> CatalogLink | None:
    """The metastore's name of engine name `namespace`/`name`, or None.

    By the first entry of the catalog map that matches (the operator's word comes first),
    else by the dataset's `catalog` facet: a facet whose `name` is the catalog the name
    starts with (`lakehouse.sales.orders` in catalog `lakehouse`) and whose `metadataUri`
    is a Hive metastore (`thrift://` or `hive://`) makes the rest of the name
    (`sales.orders`) that metastore's name. A facet of a name that does not start with
    its catalog (Spark names a Hive table by its location, and says its Hive name with
    `symlinks`) joins nothing.
    """
    link = _catalog_link(namespace, name, facets, catalogs)
    if link is not None and not indexable(link.namespace, link.name):
        # (a metastore URI of kilobytes: no index holds that name, so the facet joins nothing)
        malformed("catalog")
        return None
    return link


def _catalog_link(
    namespace: str, name: str, facets: Facets | None, catalogs: CatalogMap
) -> CatalogLink | None:
    match = catalogs.match(namespace, name) if catalogs else None
    if match is not None:
        entry = match.entry
        rule: dict[str, Any] = {
            "rule": "map",
            "entry": match.index,
            "engine": entry.engine,
            "catalog": entry.catalog,
            "metastore": entry.metastore,
        }
        return _link(rule, namespace, name, entry.metastore, match.name)
    if not facets or "catalog" not in facets:
        return None
    described = facet(facets, "catalog")
    if described is None or described.get("_deleted") is True:
        return None
    catalog, uri = text(described.get("name")), text(described.get("metadataUri"))
    if catalog is None or uri is None:
        return None  # (`name` is required by the facet's schema; older Sparks omit it)
    metastore = metastore_namespace(uri)
    prefix = catalog + "."
    if metastore is None or not name.startswith(prefix) or len(name) == len(prefix):
        return None
    rule = {
        "rule": "facet",
        "entry": None,
        "engine": namespace,
        "catalog": catalog,
        "metastore": metastore,
    }
    return _link(rule, namespace, name, metastore, name[len(prefix) :])


def _link(
    rule: dict[str, Any], namespace: str, name: str, metastore: str, metastore_name: str
) -> CatalogLink:
    return CatalogLink(
        metastore,
        metastore_name,
        json_text(
            {**rule, "role": "engine", "via": {"namespace": metastore, "name": metastore_name}}
        ),
        json_text({**rule, "role": "metastore", "via": {"namespace": namespace, "name": name}}),
    )


def lifecycle_state(facets: Facets | None) -> str | None:
    """The `lifecycleStateChange` of an output's facet of that name (CREATE, DROP, ...)."""
    change = facet(facets, "lifecycleStateChange")
    if change is None or change.get("_deleted") is True:
        return None
    return text(change.get("lifecycleStateChange"))


def indexable(namespace: str, name: str) -> bool:
    """Whether a dataset name is within what ingest takes for one (MAX_NAME_BYTES each):
    a facet naming a longer one could not be stored (the names are index keys), so that
    part of the facet is malformed, where ingest refuses such a name in the envelope."""
    return _fits(namespace, MAX_NAME_BYTES) and _fits(name, MAX_NAME_BYTES)


def _fits(text: str, limit: int) -> bool:
    # (a character is at most 4 bytes: most texts need no encoding to pass)
    return len(text) * 4 <= limit or len(text.encode()) <= limit


# A field name of column lineage at most this many bytes: column_lineage's lookup indexes
# key (namespace, name, field), and two names at MAX_NAME_BYTES and a field at this fit an
# index entry (2,704 bytes). A longer one (no table has such a column) makes its edge a
# malformed part of the facet, ignored and counted.
MAX_FIELD_BYTES = 512


# The names one event's `symlinks` facets give, all its datasets together: each is a name
# the datasets fold holds (about 3 KB of memory each, over the projections), and a facet
# of 30 MB lists a million. Real tables have a handful; the identifiers past this are
# ignored (counted as malformed). The datasets an event names are bounded at ingest
# (envelope.MAX_EVENT_DATASETS).
MAX_EVENT_SYMLINKS = 10_000


class _Symlinks(msgspec.Struct):
    """A `symlinks` facet with each identifier left undecoded."""

    identifiers: list[msgspec.Raw] | None = None


_symlinks_decoder = msgspec.json.Decoder(_Symlinks)


def symlink_names(
    facets: Facets | None, budget: list[int] | None = None
) -> list[tuple[str, str, str | None]]:
    """(namespace, name, type) of each identifier of a `symlinks` dataset facet, no more
    than `budget[0]` of them (decremented), the event's MAX_EVENT_SYMLINKS by default."""
    raw = facets.get("symlinks") if facets else None
    if raw is None:
        return []
    budget = budget if budget is not None else [MAX_EVENT_SYMLINKS]
    try:
        identifiers = _symlinks_decoder.decode(raw).identifiers or []
    except (msgspec.DecodeError, RecursionError):  # (a ValidationError is a DecodeError)
        malformed("symlinks")
        return []
    names = []
    for identifier in identifiers:
        if budget[0] <= 0:
            malformed("symlinks")
            break
        try:
            ident = msgspec.json.decode(identifier)
        except (msgspec.DecodeError, RecursionError):
            ident = None
        if not isinstance(ident, dict):
            malformed("symlinks")
            continue
        namespace, name = text(ident.get("namespace")), text(ident.get("name"))
        if namespace is None or name is None or not indexable(namespace, name):
            malformed("symlinks")
            continue
        names.append((namespace, name, text(ident.get("type"))))
        budget[0] -= 1
    return names


# A dataset's schema facet comes back unchanged with every event that names it (nearly all
# of the benchmark workload's were seen among the last 1,024), so its fields' JSON and
# hash are kept by the facet's bytes. Only well-formed schemas up to KNOWN_SCHEMA_BYTES are
# kept (1,024 schemas of 30 MB would be 60 GB): a malformed one is counted each time seen.
KNOWN_SCHEMAS = 1024
KNOWN_SCHEMA_BYTES = 64 * 1024
_known_schemas: dict[bytes, tuple[str, bytes]] = {}


class _Schema(msgspec.Struct, rename={"deleted": "_deleted"}):
    """A `schema` facet with each field left undecoded."""

    fields: list[msgspec.Raw] | None = None
    deleted: Any = None


_schema_decoder = msgspec.json.Decoder(_Schema)
_sorted_encoder = msgspec.json.Encoder(order="sorted")


def schema_of(facets: Facets | None) -> tuple[str, bytes] | None:
    """The `schema` facet's fields as JSON text and their hash (None: no usable schema)."""
    raw = facets.get("schema") if facets else None
    if raw is None:
        return None
    key = bytes(raw) if len(raw) <= KNOWN_SCHEMA_BYTES else None
    known = _known_schemas.get(key) if key is not None else None
    if known is not None:
        return known
    known = schema_text(raw)
    if known is None or key is None:
        return known
    if len(_known_schemas) >= KNOWN_SCHEMAS:
        _known_schemas.clear()  # simpler than LRU, and the working set refills it at once
    _known_schemas[key] = known
    return known


def _neutral_field(field: Any) -> Any:
    """A schema field with its type (and its nested fields' types) spelled engine-neutrally,
    so Spark's `long` and Trino's `bigint` hash as one schema (metastore.schema_types)."""
    if not isinstance(field, dict):
        return field
    neutral = dict(field)
    if isinstance(field.get("type"), str):
        neutral["type"] = canonical_type(field["type"])
    if isinstance(field.get("fields"), list):
        neutral["fields"] = [_neutral_field(f) for f in field["fields"]]
    return neutral


def schema_text(raw: msgspec.Raw) -> tuple[str, bytes] | None:
    """The `fields` of a `schema` facet as JSON text (as sent) and the sha256 of their JSON
    with sorted keys and engine-neutral types; None when absent, deleted or malformed
    (counted).

    Field by field, so a schema of a million fields is never a million dicts at once (its
    JSON took 8 times its size as Python objects).
    """
    try:
        schema = _schema_decoder.decode(raw)
    except (msgspec.DecodeError, RecursionError):  # (a ValidationError is a DecodeError)
        schema = None
    if schema is not None and schema.deleted is True:
        return None
    if schema is None or schema.fields is None:
        malformed("schema")
        return None
    texts, digest = [], hashlib.sha256(b"[")
    for number, field in enumerate(schema.fields):
        try:
            value = msgspec.json.decode(field)
        except (msgspec.DecodeError, RecursionError):
            malformed("schema")
            return None
        texts.append(json_text(value))
        neutral = _neutral_field(value)
        digest.update(
            b"," + _sorted_encoder.encode(neutral) if number else _sorted_encoder.encode(neutral)
        )
    digest.update(b"]")
    return "[" + ",".join(texts) + "]", digest.digest()


# A `columnLineage` facet up to this size has its report worked out as the event is read
# (on the prefetcher's thread, beside the fold); a larger one (a table of thousands of
# columns) where it is folded, its pairs encoded EDGE_CHUNK at a time: as Python objects
# its pairs take about 6 times their JSON, and the whole facet decoded 8 times, so a batch
# of such events held at once took the projector past 1 GiB (docs/PERFORMANCE.md).
EAGER_LINEAGE_BYTES = 64 * 1024
EDGE_CHUNK = 10_000


class _Lineage(msgspec.Struct, rename={"deleted": "_deleted"}):
    """A `columnLineage` facet with each field's description left undecoded."""

    fields: dict[str, msgspec.Raw] | None = None
    deleted: Any = None


_lineage_decoder = msgspec.json.Decoder(_Lineage)


def report_of(ref: DatasetRef) -> ColumnReport | None:
    """The column lineage report of `ref`: the one worked out when the event was read, or
    that of its deferred facet, made here (its malformed parts counted: once per fold)."""
    if ref.column_report is not None:
        return ref.column_report
    if ref.deferred_lineage and ref.facets:
        return column_report(ref.facets["columnLineage"])
    return None


# A job sends the same `columnLineage` facet with every run (its report), so a report is
# kept by the facet's bytes, as schemas are: well-formed ones of up to EAGER_LINEAGE_BYTES
# (the eager ones), KNOWN_REPORTS of them.
KNOWN_REPORTS = 1024
_known_reports: dict[bytes, ColumnReport] = {}


def column_report(raw: msgspec.Raw) -> ColumnReport | None:
    """The report of `columnLineage` facet `raw` (None when deleted, or without one
    well-formed pair)."""
    key = bytes(raw) if len(raw) <= EAGER_LINEAGE_BYTES else None
    known = _known_reports.get(key) if key is not None else None
    if known is not None:
        return known
    report, well_formed = _column_report(raw)
    if report is None or not well_formed or key is None:
        return report
    if len(_known_reports) >= KNOWN_REPORTS:
        _known_reports.clear()  # simpler than LRU, and the working set refills it at once
    _known_reports[key] = report
    return report


def _column_report(raw: msgspec.Raw) -> tuple[ColumnReport | None, bool]:
    """The report of facet `raw`, and whether every part of it was well formed (the
    others counted). Each field is decoded on its own, so a field that cannot be (a
    number beyond float64) loses only its own pairs; the pairs are encoded EDGE_CHUNK at a
    time, so a facet of a million pairs is never a million tuples at once."""
    try:
        lineage = _lineage_decoder.decode(raw)
    except (msgspec.DecodeError, RecursionError):  # (a ValidationError is a DecodeError)
        malformed("columnLineage")
        return None, False
    if lineage.deleted is True:
        return None, True
    if lineage.fields is None:
        malformed("columnLineage")
        return None, False
    parts: list[bytes] = []
    inputs: dict[tuple[str, str], None] = {}
    edges: list[Any] = []
    well_formed = True
    for out_field, spec in lineage.fields.items():
        try:
            described = msgspec.json.decode(spec)
        except (msgspec.DecodeError, RecursionError):
            described = None
        if not field_edges(edges, out_field, described):
            malformed("columnLineage")
            well_formed = False
        if len(edges) >= EDGE_CHUNK:
            _encode_pairs(parts, edges, inputs)
            edges = []
    _encode_pairs(parts, edges, inputs)
    if not parts:
        return None, well_formed
    report = ColumnReport(
        hashlib.blake2b(raw, digest_size=16).digest(),
        "[" + ",".join(p.decode() for p in parts) + "]",
        list(inputs),
    )
    return report, well_formed


def _encode_pairs(
    parts: list[bytes], edges: list[Any], inputs: dict[tuple[str, str], None]
) -> None:
    if not edges:
        return
    for edge in edges:
        inputs[(edge[1], edge[2])] = None
    parts.append(_pairs_encoder.encode(edges)[1:-1])  # (the list's items, without brackets)


_pairs_encoder = msgspec.json.Encoder()


def field_edges(edges: list[Any], out_field: str, spec: Any) -> bool:
    """Appends the pairs into field `out_field` its description `spec` gives:
    [out_field, in_namespace, in_name, in_field, transformations], the transformations as
    undecoded JSON. False when any part was malformed (and left out). (Written for speed:
    a wide table's facet has hundreds of thousands of inputs.)"""
    if type(spec) is not dict or not _fits(out_field, MAX_FIELD_BYTES):
        return False
    well_formed = True
    # Facet 1-0-x describes the transformation per output field; 1-1-0 per input field.
    kind, description = spec.get("transformationType"), spec.get("transformationDescription")
    legacy = msgspec.Raw(
        json_text([{"type": kind, "description": description}])
        if (kind or description) and (text(kind) or text(description))
        else "[]"
    )
    for source in as_list(spec.get("inputFields")):
        if type(source) is not dict:
            well_formed = False
            continue
        in_namespace, in_name, in_field = (
            source.get("namespace"),
            source.get("name"),
            source.get("field"),
        )
        if not (
            type(in_namespace) is str
            and type(in_name) is str
            and type(in_field) is str
            and in_namespace
            and in_name
            and in_field
            # (a character is at most 4 bytes: short names need no closer look)
            and (
                (len(in_namespace) <= 256 and len(in_name) <= 256)
                or indexable(in_namespace, in_name)
            )
            and (len(in_field) <= 128 or _fits(in_field, MAX_FIELD_BYTES))
        ):
            well_formed = False
            continue
        listed = source.get("transformations")
        transformations = legacy
        if listed and type(listed) is list:
            kept = [t for t in listed if type(t) is dict]
            if kept:
                transformations = msgspec.Raw(json_text(kept))
        edges.append((out_field, in_namespace, in_name, in_field, transformations))
    return well_formed
