"""Facets as the read API serves them: as the producer sent them, less a malformed one.

The OpenAPI document types each facet (an object with string `_producer`/`_schemaURL`) and
the standard ones by their schema (models.*_STANDARD_FACETS), and clients generate their
types from it. A producer may still send a facet that breaks its schema (the corpus's
`facet_invalid`); the fold ignores it where it uses it, and an answer leaves it out the
same way, so every answer matches the document, and counts it
(metastore_api_malformed_parts_total, part `facet`). The log keeps it as sent: a run's
events and the export feed still show it. api/parts.py does the same for the parts of a
facet served on their own (schema fields, transformations).

Sensitive facets (query text, plans, engine properties, environment, Airflow task info:
SENSITIVE_FACETS) are left out where the reader's Access may not see them
(`served(..., sensitive=False)`, `without_sensitive`, `event_without_sensitive`): the
one rule every answer (pages, graphs, run events, the export feed) applies; `event_shown`
also leaves out an event's datasets in namespaces the reader may not read.
"""

from __future__ import annotations

from typing import Any

import msgspec

from metastore.access import Access
from metastore.api import models, models_datasets, models_jobs, models_runs
from metastore.metrics import MALFORMED_PARTS


class _AnyFacet(msgspec.Struct):
    """What every facet must be: an object whose `_producer`/`_schemaURL` are strings."""

    producer: str | None = msgspec.field(name="_producer", default=None)
    schema_url: str | None = msgspec.field(name="_schemaURL", default=None)


_FACETS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ANY_FACET = msgspec.json.Decoder(_AnyFacet)


def _decoders(standard: dict[str, str]) -> dict[str, msgspec.json.Decoder[object]]:
    return {
        name: msgspec.json.Decoder(getattr(models, struct)) for name, struct in standard.items()
    }


DATASET = _decoders(models_datasets.DATASET_STANDARD_FACETS)
JOB = _decoders(models_jobs.JOB_STANDARD_FACETS)
RUN = _decoders(models_runs.RUN_STANDARD_FACETS)


# Facets holding query text, plans or what an engine ran with (properties, environment
# variables, a DAG's task definitions), by the names the producers send them under (the
# conformance corpus: Spark, Airflow, Dataproc; the standard facets' spec). Job, run and
# dataset facets share one set: a name means the same wherever it is sent.
SENSITIVE_FACETS = frozenset(
    {
        "sql",  # job: the query text (Trino, dbt, Airflow SQL operators)
        "sourceCode",  # job: the code itself
        "spark.logicalPlan",  # run: Spark's plan, with its literals
        "spark_unknown",  # run: plan nodes Spark could not map, serialized
        "spark_properties",  # run: spark.* configuration, credentials included
        "environment-properties",  # run: Spark's environment
        "environmentVariables",  # run: the standard EnvironmentVariablesRunFacet
        "environment-variables",
        "airflow",  # job and run: the DAG's and task's definition (commands, params)
        "airflowDagRun",  # run: the DAG run's conf and definition
        "unknownSourceAttribute",  # run: an Airflow operator's properties
    }
)


def served(
    text: str, standard: dict[str, msgspec.json.Decoder[object]], *, sensitive: bool = True
) -> msgspec.Raw:
    """The merged facets `text` (a JSON object) less each facet that breaks its schema,
    and less SENSITIVE_FACETS unless `sensitive` (Access.shows_sensitive of its namespace)."""
    facets = _FACETS.decode(text)
    malformed = [name for name, raw in facets.items() if not _conforms(raw, standard.get(name))]
    hidden = [] if sensitive else [name for name in facets if name in SENSITIVE_FACETS]
    if not malformed and not hidden:
        return msgspec.Raw(text)  # the stored bytes, untouched
    for name in (*malformed, *hidden):
        del facets[name]
    if malformed:
        MALFORMED_PARTS.labels("facet").inc(len(malformed))
    return msgspec.Raw(msgspec.json.encode(facets))


def without_sensitive(facets: dict[str, Any]) -> dict[str, Any]:
    """`facets` (a facet name -> facet mapping) less SENSITIVE_FACETS (a copy when any)."""
    if not any(name in SENSITIVE_FACETS for name in facets):
        return facets
    return {name: facet for name, facet in facets.items() if name not in SENSITIVE_FACETS}


_EVENT = msgspec.json.Decoder(dict[str, Any])
_DATASET_FACET_KEYS = ("facets", "inputFacets", "outputFacets")


def event_shown(text: str, access: Access) -> str:
    """An OpenLineage event (JSON text) as `access` may see it: less the datasets of its
    inputs and outputs in namespaces it may not read, and less SENSITIVE_FACETS unless its
    job's namespace shows them; the text itself when unrestricted or nothing is left out."""
    if not access.restricted:
        return text
    event = _EVENT.decode(text)
    job = event.get("job")
    namespace = job.get("namespace") if isinstance(job, dict) else None
    changed = False
    for side in ("inputs", "outputs"):
        datasets = event.get(side)
        if isinstance(datasets, list):
            kept = [d for d in datasets if not _hidden(d, access)]
            if len(kept) != len(datasets):
                event[side] = kept
                changed = True
    if changed:
        text = msgspec.json.encode(event).decode()
    if isinstance(namespace, str) and access.shows_sensitive(namespace):
        return text
    return event_without_sensitive(text)


def _hidden(dataset: Any, access: Access) -> bool:
    namespace = dataset.get("namespace") if isinstance(dataset, dict) else None
    return not isinstance(namespace, str) or not access.reads(namespace)


def event_without_sensitive(text: str) -> str:
    """An OpenLineage event (JSON text) less the SENSITIVE_FACETS of its run, job and
    datasets; the text itself when it has none. A part of another shape is left as is."""
    if not any(f'"{name}"' in text for name in SENSITIVE_FACETS):
        return text  # (no such key anywhere: nothing to decode)
    event = _EVENT.decode(text)
    changed = False
    parts: list[Any] = [event.get("run"), event.get("job")]
    for side in ("inputs", "outputs"):
        datasets = event.get(side)
        if isinstance(datasets, list):
            parts.extend(datasets)
    for part in parts:
        if not isinstance(part, dict):
            continue
        for key in _DATASET_FACET_KEYS:
            facets = part.get(key)
            if isinstance(facets, dict):
                kept = without_sensitive(facets)
                if kept is not facets:
                    part[key] = kept
                    changed = True
    return msgspec.json.encode(event).decode() if changed else text


def _conforms(raw: msgspec.Raw, decoder: msgspec.json.Decoder[object] | None) -> bool:
    try:
        _ANY_FACET.decode(raw)
        if decoder is not None:
            decoder.decode(raw)
    except msgspec.ValidationError:
        return False
    return True
