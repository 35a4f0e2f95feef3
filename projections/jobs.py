"""Projection `jobs`: one row per (namespace, name), with facets merged the spec's way."""

from __future__ import annotations

import re
import uuid
from typing import Any

import psycopg

from metastore.pgarray import uuid_array
from projections.common import (
    FACETS_CHANGED,
    FACETS_DECODER,
    FoldEvent,
    facet,
    job_id,
    json_text,
    loading_cursor,
    merge_facets,
    row_param,
    rows_select,
    run_facts,
    run_owners,
    text,
)

NAME = "jobs"
# 2: facets json; 3: producer, integration from the producer URL; 4: trigram index; 5: a
# run reusing another job's runId is not its latest run (common.run_owners); 6: index
# jobs_namespace_first_seen (a namespace's jobs as of T counted from the index)
VERSION = 6
TABLES = ("jobs",)

COLUMNS = (
    "id",
    "namespace",
    "name",
    "facets",
    "facet_times",
    "job_type",
    "processing_type",
    "integration",
    "parent_job_id",
    "parent_order",
    "first_seen",
    "last_seen",
    "latest_run_id",
    "latest_run_time",
    "latest_run_order",
    "producer",
    "producer_order",
)
TYPES = (
    "uuid",
    "text",
    "text",
    "json",
    "jsonb",
    "text",
    "text",
    "text",
    "uuid",
    "jsonb",
    "timestamptz",
    "timestamptz",
    "uuid",
    "timestamptz",
    "jsonb",
    "text",
    "jsonb",
)
JSON_COLUMNS = frozenset(
    {"facets", "facet_times", "parent_order", "latest_run_order", "producer_order"}
)

# facets as text: decoded to name -> raw JSON, never to Python objects (see common.Facets)
SELECT_JOBS = (
    f"SELECT {', '.join('facets::text AS facets' if c == 'facets' else c for c in COLUMNS)} "
    "FROM jobs WHERE id = ANY(%b::uuid[])"
)
UPSERT = f"""
INSERT INTO jobs ({", ".join(COLUMNS)})
{rows_select(TYPES)}
ON CONFLICT (id) DO UPDATE SET
{", ".join(f"{c} = excluded.{c}" for c in COLUMNS[1:])}
"""


Rows = dict[uuid.UUID, dict[str, Any]]
# The stored rows of the batch's jobs, and the job each of its runs belongs to.
Loaded = tuple[Rows, dict[uuid.UUID, uuid.UUID]]


def load(cur: psycopg.Cursor[Any], events: list[FoldEvent]) -> Loaded:
    """The stored rows of the jobs the batch names, and the job of each of its runs: of its
    first event in the log (see fold.fold_pipelined)."""
    ids = {e.job_id for e in events if e.job_id is not None}
    if not ids:
        return {}, {}
    with loading_cursor(cur) as dcur:
        dcur.execute(SELECT_JOBS, (uuid_array(ids),))
        rows: Rows = {r["id"]: r for r in dcur.fetchall()}
        # (asked of the log once a batch for every fold: common.run_facts)
        stored = {
            run: fact.job_id
            for run, fact in run_facts(cur, events).items()
            if fact.job_id is not None
        }
    for loaded in rows.values():
        loaded["facets"] = FACETS_DECODER.decode(loaded["facets"])
    return rows, stored


def apply(cur: psycopg.Cursor[Any], events: list[FoldEvent], state: Loaded) -> None:
    """Folds the batch into the loaded rows and writes the changed ones back."""
    rows, stored = state
    owners = run_owners(stored, events)
    changed: set[uuid.UUID] = set()
    for event in events:
        jid = event.job_id
        if jid is None:
            continue
        row = rows.get(jid)
        if row is None:
            row = rows[jid] = new_job(jid, event)
        owned = event.run_id is None or owners.get(event.run_id) == jid
        fold_job_event(row, event, owned)
        changed.add(jid)
    write(cur, [rows[j] for j in changed])


def fold(cur: psycopg.Cursor[Any], events: list[FoldEvent]) -> None:
    apply(cur, events, load(cur, events))


def new_job(jid: uuid.UUID, event: FoldEvent) -> dict[str, Any]:
    return {
        "id": jid,
        "namespace": event.job_namespace,
        "name": event.job_name,
        "facets": {},
        "facet_times": {},
        "job_type": None,
        "processing_type": None,
        "integration": None,
        "parent_job_id": None,
        "parent_order": None,
        "first_seen": event.event_time,
        "last_seen": event.event_time,
        "latest_run_id": None,
        "latest_run_time": None,
        "latest_run_order": None,
        "producer": None,
        "producer_order": None,
    }


def fold_job_event(row: dict[str, Any], event: FoldEvent, owned: bool) -> None:
    """`owned`: the event's run is this job's (common.run_owners); else the job's own facets
    count, not its run."""
    order = event.order
    row["first_seen"] = min(row["first_seen"], event.event_time)
    row["last_seen"] = max(row["last_seen"], event.event_time)
    producer_changed = False
    if event.producer and (row["producer_order"] is None or order > row["producer_order"]):
        producer_changed = row["producer"] != event.producer
        row["producer"] = event.producer
        row["producer_order"] = order
    facets_changed = merge_facets(row["facets"], row["facet_times"], event.job_facets, order)
    if facets_changed & FACETS_CHANGED or producer_changed:
        job_type = facet(row["facets"], "jobType") or {}
        row["job_type"] = text(job_type.get("jobType"))
        row["processing_type"] = text(job_type.get("processingType"))
        row["integration"] = text(job_type.get("integration")) or integration_of(row["producer"])
    if event.kind != "run" or event.run_id is None or not owned:
        return
    parent = event.parent
    if (
        parent
        and parent.job_namespace
        and parent.job_name
        and (row["parent_order"] is None or order > row["parent_order"])
    ):
        row["parent_job_id"] = job_id(parent.job_namespace, parent.job_name)
        row["parent_order"] = order
    # The latest run: the latest START by eventTime; runs never seen starting count by
    # any of their events, below every START (a max over a set: arrival order is moot).
    run_order = [1 if event.event_type == "START" else 0, *order]
    if row["latest_run_order"] is None or run_order > row["latest_run_order"]:
        row["latest_run_id"] = event.run_id
        row["latest_run_time"] = event.event_time
        row["latest_run_order"] = run_order


# `.../integration/spark` (the OpenLineage repository's integrations), else a product the
# URL names (Airflow's provider: `github.com/apache/airflow/tree/providers-openlineage/...`).
_INTEGRATION_PATH = re.compile(r"/integration/([A-Za-z0-9_-]+)")
_PRODUCTS = ("airflow", "spark", "trino", "flink", "dbt", "hive", "dagster", "great_expectations")


def integration_of(producer: str | None) -> str | None:
    """The integration a producer URL names, upper-case as the jobType facet writes it."""
    if not producer:
        return None
    match = _INTEGRATION_PATH.search(producer)
    if match:
        return match.group(1).upper()
    lowered = producer.lower()
    for product in _PRODUCTS:
        if product in lowered:
            return product.upper()
    return None


def write(cur: psycopg.Cursor[Any], rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    columns = [
        [json_text(r[c]) if r[c] is not None else None for r in rows]
        if c in JSON_COLUMNS
        else [r[c] for r in rows]
        for c in COLUMNS
    ]
    cur.execute(UPSERT, row_param(TYPES, columns))
