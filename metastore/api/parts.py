"""Parts of facets the read API serves on their own, made to match the document.

A dataset's `fields` (and each version's) come from its `schema` facet and an edge's
`transformations` from a `columnLineage` facet, as the producer sent them. The fold keeps
any list there, so a member can break the OpenAPI document's schema for it (`SchemaField`,
`Transformation`): `[1, null, "x", {"name": 5}]` once came back as `fields`. Here a member
that is not an object, or a field without a string `name`, is left out; a property of the
wrong type (`type`, `description`, `subtype`, `masking`, a nested `fields` that is not a
list) is nulled, and nested fields are checked the same way. Each part left out or nulled
is counted (metastore_api_malformed_parts_total), as whole facets are (api/facets.py).
The log, a run's events and the export feed keep them as sent.

What conforms (nearly everything) is checked by one typed decode and passed on as the
stored bytes; only the rest is rebuilt.
"""

from __future__ import annotations

import decimal
from typing import Any

import msgspec

from metastore.api import models
from metastore.metrics import MALFORMED_PARTS

FIELDS = "schema.fields"
TRANSFORMATIONS = "columnLineage.transformations"
# Nested fields deeper than this are nulled: no table nests so deep, and the check
# recurses.
MAX_NESTING = 64

_fields = msgspec.json.Decoder(list[models.SchemaField])
_transformations = msgspec.json.Decoder(list[models.Transformation])
# Numbers as sent (1e400 is JSON too), as the fold reads them (projections/decode.py).
_any = msgspec.json.Decoder(float_hook=decimal.Decimal)
_encode = msgspec.json.Encoder(decimal_format="number").encode

_FIELD_TEXTS = ("type", "description")
_TRANSFORMATION_TEXTS = ("type", "subtype", "description")


def fields(text: str) -> msgspec.Raw:
    """The `fields` JSON `text` as served; what it leaves out or nulls is counted."""
    try:
        _fields.decode(text)
        return msgspec.Raw(text)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        pass
    bad = [0]
    value = _decode(text)
    cleaned = _clean_fields(value, bad, 0) if isinstance(value, list) else []
    if not isinstance(value, list):
        bad[0] += 1
    MALFORMED_PARTS.labels(FIELDS).inc(bad[0])
    return msgspec.Raw(_encode(cleaned))


def transformations(text: str) -> msgspec.Raw:
    """An edge's transformations JSON `text` as served; what it leaves out or nulls is
    counted."""
    try:
        _transformations.decode(text)
        return msgspec.Raw(text)
    except (msgspec.ValidationError, msgspec.DecodeError):
        pass
    value = _decode(text)
    bad = 0
    cleaned = []
    for item in value if isinstance(value, list) else []:
        if not isinstance(item, dict):
            bad += 1
            continue
        item = dict(item)
        for key in _TRANSFORMATION_TEXTS:
            if item.get(key) is not None and not isinstance(item[key], str):
                item[key] = None
                bad += 1
        if item.get("masking") is not None and not isinstance(item["masking"], bool):
            item["masking"] = None
            bad += 1
        cleaned.append(item)
    if not isinstance(value, list):
        bad += 1
    MALFORMED_PARTS.labels(TRANSFORMATIONS).inc(bad)
    return msgspec.Raw(_encode(cleaned))


def _decode(text: str) -> Any:
    try:
        return _any.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return None


def _clean_fields(items: list[Any], bad: list[int], depth: int) -> list[Any]:
    out = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            bad[0] += 1
            continue
        item = dict(item)
        for key in _FIELD_TEXTS:
            if item.get(key) is not None and not isinstance(item[key], str):
                item[key] = None
                bad[0] += 1
        nested = item.get("fields")
        if nested is not None:
            if isinstance(nested, list) and depth < MAX_NESTING:
                item["fields"] = _clean_fields(nested, bad, depth + 1)
            else:
                item["fields"] = None
                bad[0] += 1
        out.append(item)
    return out
