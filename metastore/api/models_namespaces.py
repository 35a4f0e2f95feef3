"""The response bodies of /namespaces.

The shapes they share (references, freshness, times, totals) and the glossary: models.py.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from metastore.api.models import (
    Cursor,
    NamespaceText,
    Struct,
    Time,
)


class Namespace(Struct):
    name: NamespaceText
    has_jobs: bool
    has_datasets: bool
    job_count: Annotated[int, Meta(ge=0, description="Jobs in this namespace.")]
    dataset_count: Annotated[
        int,
        Meta(
            ge=0,
            description="Datasets with a name in this namespace (an emitted, symlink or "
            "catalog name), each once: what /datasets?namespace= and /search?namespace= list. "
            "A dataset with names in several namespaces counts in each (a Spark table with "
            "its Hive symlink in both), so the counts of all namespaces can add up to more "
            "than the datasets.",
        ),
    ]
    first_seen: Time
    last_seen: Time


class NamespacePage(Struct):
    items: list[Namespace]
    next_cursor: Cursor
    total: Annotated[int, Meta(ge=0, description="Namespaces in all pages.")]
    total_is_exact: Annotated[bool, Meta(description="Always true: namespaces are few.")]
