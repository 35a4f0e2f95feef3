"""Putting events into the log directly (what ingest does), for projector tests."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import uuid
from collections.abc import Iterable
from typing import Any

import psycopg

from metastore.eventlog import LogRecord, append_events


def event_kind(event: dict[str, Any]) -> str:
    if "run" in event:
        return "run"
    return "job" if "job" in event else "dataset"


def event_time(event: dict[str, Any]) -> dt.datetime:
    when = dt.datetime.fromisoformat(event["eventTime"])
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def log_record(event: dict[str, Any]) -> LogRecord:
    canonical = json.dumps(event, sort_keys=True, separators=(",", ":")).encode()
    job = event.get("job") or {}
    run = event.get("run") or {}
    return LogRecord(
        event_time=event_time(event),
        kind=event_kind(event),
        event_type=event.get("eventType"),
        run_id=uuid.UUID(run["runId"]) if run.get("runId") else None,
        job_namespace=job.get("namespace"),
        job_name=job.get("name"),
        producer=event.get("producer", "tests"),
        digest=hashlib.sha256(canonical).digest(),
        event_json=json.dumps(event).encode(),
    )


def append(conn: psycopg.Connection[Any], events: Iterable[dict[str, Any]]) -> int:
    """Appends the events in one transaction (committed); returns how many were new."""
    records = [log_record(e) for e in events]
    with conn.transaction():
        return append_events(conn, records)


def _run_ids(events: Iterable[dict[str, Any]]) -> set[str]:
    ids = set()
    for event in events:
        run = event.get("run") or {}
        if run.get("runId"):
            ids.add(run["runId"])
        parent = ((run.get("facets") or {}).get("parent") or {}).get("run") or {}
        if isinstance(parent, dict) and isinstance(parent.get("runId"), str):
            ids.add(parent["runId"])
    return ids


def copies(events: list[dict[str, Any]], count: int, salt: str = "") -> list[dict[str, Any]]:
    """`count` copies of the events, each copy with its own runIds (parents remapped too):
    more runs of the same jobs on the same datasets, a realistic log to fold."""
    originals = sorted(_run_ids(events))
    texts = [json.dumps(e) for e in events]
    result = []
    for i in range(count):
        mapping = {
            old: str(uuid.uuid5(uuid.NAMESPACE_OID, f"{salt}{i}:{old}")) for old in originals
        }
        for text in texts:
            for old, new in mapping.items():
                if old in text:
                    text = text.replace(old, new)
            result.append(json.loads(text))
    return result


# Every read-model table, with the columns to order a canonical dump by (all of them).
READMODEL_TABLES = (
    "namespaces",
    "jobs",
    "runs",
    "datasets",
    "dataset_names",
    "dataset_versions",
    "run_edges",
    "job_edges",
    "lineage_runs",
    "column_lineage",
)


def dump_readmodel(
    conn: psycopg.Connection[Any],
    schema: str = "readmodel",
    tables: Iterable[str] = READMODEL_TABLES,
) -> dict[str, Any]:
    """Every row of `tables` (the main read-model tables), in a canonical order (for
    equality checks), and the dead letters."""
    dump: dict[str, Any] = {}
    for table in tables:
        rows = conn.execute(f"SELECT * FROM {schema}.{table}").fetchall()
        dump[table] = sorted(rows, key=lambda r: json.dumps(r, default=str, sort_keys=True))
    dump["dead_letters"] = sorted(
        conn.execute("SELECT projection, seq, tx::text, error FROM dead_letters").fetchall()
    )
    return dump
