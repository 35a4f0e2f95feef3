"""Facets as the read API serves them: as the producer sent them, less a malformed one.

The OpenAPI document types each facet (an object with string `_producer`/`_schemaURL`) and
the standard ones by their schema (models.*_STANDARD_FACETS), and clients generate their
types from it. A producer may still send a facet that breaks its schema (the corpus's
`facet_invalid`); the fold ignores it where it uses it, and an answer leaves it out the
same way, so every answer matches the document, and counts it
(metastore_api_malformed_parts_total, part `facet`). The log keeps it as sent: a run's
events and the export feed still show it. api/parts.py does the same for the parts of a
facet served on their own (schema fields, transformations).
"""

from __future__ import annotations

import msgspec

from metastore.api import models
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


DATASET = _decoders(models.DATASET_STANDARD_FACETS)
JOB = _decoders(models.JOB_STANDARD_FACETS)
RUN = _decoders(models.RUN_STANDARD_FACETS)


def served(text: str, standard: dict[str, msgspec.json.Decoder[object]]) -> msgspec.Raw:
    """The merged facets `text` (a JSON object) less each facet that breaks its schema."""
    facets = _FACETS.decode(text)
    malformed = [name for name, raw in facets.items() if not _conforms(raw, standard.get(name))]
    if not malformed:
        return msgspec.Raw(text)  # the stored bytes, untouched
    for name in malformed:
        del facets[name]
    MALFORMED_PARTS.labels("facet").inc(len(malformed))
    return msgspec.Raw(msgspec.json.encode(facets))


def _conforms(raw: msgspec.Raw, decoder: msgspec.json.Decoder[object] | None) -> bool:
    try:
        _ANY_FACET.decode(raw)
        if decoder is not None:
            decoder.decode(raw)
    except msgspec.ValidationError:
        return False
    return True
