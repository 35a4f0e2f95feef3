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
import uuid
from typing import Any

import msgspec

from metastore.catalogs import NO_CATALOGS, CatalogMap, metastore_namespace
from metastore.envelope import MAX_NAME_BYTES
from metastore.eventlog import Position
from projections.common import (
    CatalogLink,
    ColumnEdge,
    DatasetRef,
    Facets,
    FoldEvent,
    as_dict,
    as_list,
    edge_key,
    facet,
    fields_hash,
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
    if kind == "dataset":
        if doc.dataset is not None:
            _add_ref(refs, "dataset", doc.dataset, catalogs)
        return refs
    for role, datasets in (("input", doc.inputs), ("output", doc.outputs)):
        for ds in datasets or ():
            _add_ref(refs, role, ds, catalogs)
    return refs


def _add_ref(refs: list[DatasetRef], role: str, ds: _Dataset, catalogs: CatalogMap) -> None:
    namespace, name = text(ds.namespace), text(ds.name)
    if namespace is None or name is None:
        return
    facets = ds.facets
    schema = schema_of(facets)
    refs.append(
        DatasetRef(
            role,
            namespace,
            name,
            facets,
            symlink_names(facets),
            None if schema is None else schema[0],
            None if schema is None else schema[1],
            # An input's column lineage describes another dataset's fields: not folded.
            lineage_edges(namespace, name, facets) if facets and role != "input" else [],
            catalog_link(namespace, name, facets, catalogs),
            lifecycle_state(facets) if facets and role == "output" else None,
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
    limit = MAX_NAME_BYTES
    return (len(namespace) * 4 <= limit or len(namespace.encode()) <= limit) and (
        len(name) * 4 <= limit or len(name.encode()) <= limit
    )


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
        if namespace is None or name is None or not indexable(namespace, name):
            malformed("symlinks")
            continue
        names.append((namespace, name, text(ident.get("type"))))
    return names


# A dataset's schema facet comes back unchanged with every event that names it (nearly all
# of the benchmark workload's were seen among the last 1,024), so its fields' JSON and
# hash are kept by the facet's bytes. Only well-formed
# schemas are kept: a malformed one is counted each time it is seen.
KNOWN_SCHEMAS = 1024
_known_schemas: dict[bytes, tuple[str, bytes]] = {}


def schema_of(facets: Facets | None) -> tuple[str, bytes] | None:
    """The `schema` facet's fields as JSON text and their hash (None: no usable schema)."""
    raw = facets.get("schema") if facets else None
    if raw is None:
        return None
    key = bytes(raw)
    known = _known_schemas.get(key)
    if known is not None:
        return known
    fields = schema_fields(facets)
    if fields is None:
        return None
    known = json_text(fields), fields_hash(fields)
    if len(_known_schemas) >= KNOWN_SCHEMAS:
        _known_schemas.clear()  # simpler than LRU, and the working set refills it at once
    _known_schemas[key] = known
    return known


def schema_fields(facets: Facets | None) -> list[Any] | None:
    """The `fields` of a `schema` facet, or None (absent, deleted, or malformed: counted)."""
    schema = facet(facets, "schema")
    if schema is None or schema.get("_deleted") is True:
        return None
    fields = schema.get("fields")
    if not isinstance(fields, list):
        malformed("schema")
        return None
    return fields


def lineage_edges(namespace: str, name: str, facets: Facets | None) -> list[ColumnEdge]:
    """The edges into dataset `namespace`/`name` of its `columnLineage` facet ([] when
    absent or deleted)."""
    lineage = facet(facets, "columnLineage")
    if lineage is None or lineage.get("_deleted") is True:
        return []
    return column_edges(namespace, name, lineage)


def column_edges(namespace: str, name: str, lineage: dict[str, Any]) -> list[ColumnEdge]:
    """(out_field, in_namespace, in_name, in_field, transformations, edge_key) of a
    columnLineage facet of dataset `namespace`/`name`.

    The transformations as JSON text and the key, computed once for the tables that store
    them.
    """
    fields = as_dict(lineage.get("fields"))
    if fields is None:
        malformed("columnLineage")
        return []
    edges = []
    for out_field, spec in fields.items():
        spec = as_dict(spec)
        if spec is None:
            malformed("columnLineage")
            continue
        # Facet 1-0-x describes the transformation per output field; 1-1-0 per input field.
        legacy = []
        if text(spec.get("transformationType")) or text(spec.get("transformationDescription")):
            legacy = [
                {
                    "type": spec.get("transformationType"),
                    "description": spec.get("transformationDescription"),
                }
            ]
        for source in as_list(spec.get("inputFields")):
            source = as_dict(source)
            in_namespace, in_name, in_field = (
                (text(source.get("namespace")), text(source.get("name")), text(source.get("field")))
                if source
                else (None, None, None)
            )
            if (
                in_namespace is None
                or in_name is None
                or in_field is None
                or not indexable(in_namespace, in_name)
            ):
                malformed("columnLineage")
                continue
            assert source is not None
            transformations = [
                t for t in as_list(source.get("transformations")) if isinstance(t, dict)
            ] or legacy
            key = edge_key((namespace, name, out_field, in_namespace, in_name, in_field))
            edges.append(
                (out_field, in_namespace, in_name, in_field, json_text(transformations), key)
            )
    return edges
