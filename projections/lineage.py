"""Projection `lineage`: job <-> dataset edges, per run and per job, with first/last seen.

Run events give run edges (and the job edges behind them, source 'run'); JobEvents give
static lineage (job edges with source 'static'). Everything here is a min/max over the
events, so the tables are upserts that never need to read first.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import psycopg

from projections.common import TERMINAL_STATES, FoldEvent, columns_of, row_param, rows_select

NAME = "lineage"
VERSION = 2  # 2: lifecycle_state of each edge
TABLES = ("run_edges", "job_edges", "lineage_runs")

# The lifecycle state of an edge: the latest `lifecycleStateChange` its events reported
# (by eventTime; a later report wins, one without the facet changes nothing).
_LIFECYCLE = """
    lifecycle_state = CASE WHEN excluded.lifecycle_time >= t.lifecycle_time
        OR t.lifecycle_time IS NULL THEN coalesce(excluded.lifecycle_state, t.lifecycle_state)
        ELSE t.lifecycle_state END,
    lifecycle_time = CASE WHEN excluded.lifecycle_time >= t.lifecycle_time
        OR t.lifecycle_time IS NULL THEN coalesce(excluded.lifecycle_time, t.lifecycle_time)
        ELSE t.lifecycle_time END"""
EDGE_TIMES = ("timestamptz", "timestamptz", "text", "timestamptz")
RUN_EDGE_TYPES = ("uuid", "uuid", "text", "text", "text", *EDGE_TIMES)
UPSERT_RUN_EDGES = f"""
INSERT INTO run_edges AS t (run_id, job_id, direction, namespace, name, first_seen, last_seen,
    lifecycle_state, lifecycle_time)
{rows_select(RUN_EDGE_TYPES)}
ON CONFLICT (run_id, direction, namespace, name) DO UPDATE SET
    first_seen = least(t.first_seen, excluded.first_seen),
    last_seen = greatest(t.last_seen, excluded.last_seen),{_LIFECYCLE}
"""
JOB_EDGE_TYPES = ("uuid", "text", "text", "text", "text", *EDGE_TIMES)
UPSERT_JOB_EDGES = f"""
INSERT INTO job_edges AS t (job_id, direction, namespace, name, source, first_seen, last_seen,
    lifecycle_state, lifecycle_time)
{rows_select(JOB_EDGE_TYPES)}
ON CONFLICT (job_id, direction, namespace, name, source) DO UPDATE SET
    first_seen = least(t.first_seen, excluded.first_seen),
    last_seen = greatest(t.last_seen, excluded.last_seen),{_LIFECYCLE}
"""
# started_at: the earliest START, else the earliest event of the run.
LINEAGE_RUN_TYPES = ("uuid", "uuid", "timestamptz", "timestamptz", "boolean")
UPSERT_LINEAGE_RUNS = f"""
INSERT INTO lineage_runs AS t (run_id, job_id, started_at, ended_at, has_start)
{rows_select(LINEAGE_RUN_TYPES)}
ON CONFLICT (run_id) DO UPDATE SET
    started_at = CASE
        WHEN t.has_start = excluded.has_start THEN least(t.started_at, excluded.started_at)
        WHEN excluded.has_start THEN excluded.started_at
        ELSE t.started_at END,
    has_start = t.has_start OR excluded.has_start,
    ended_at = greatest(t.ended_at, excluded.ended_at)
"""

DIRECTIONS = {"input": "input", "output": "output"}


def _span(spans: dict[Any, list[Any]], key: Any, when: dt.datetime, lifecycle: str | None) -> None:
    """[first_seen, last_seen, lifecycle_state, lifecycle_time] of an edge."""
    span = spans.get(key)
    if span is None:
        spans[key] = [when, when, lifecycle, when if lifecycle else None]
        return
    span[0], span[1] = min(span[0], when), max(span[1], when)
    if lifecycle and (span[3] is None or when >= span[3]):
        span[2], span[3] = lifecycle, when


def fold(cur: psycopg.Cursor[Any], events: list[FoldEvent]) -> None:
    # Keyed as the table is: a runId that two jobs report (producers do reuse them) is one
    # run's edges, with the job of its first event, as the stored row keeps it.
    run_edges: dict[tuple[uuid.UUID, str, str, str], list[Any]] = {}
    run_jobs: dict[tuple[uuid.UUID, str, str, str], uuid.UUID] = {}
    job_edges: dict[tuple[uuid.UUID, str, str, str, str], list[Any]] = {}
    # run -> [job, started_at, ended_at, has_start]
    runs: dict[uuid.UUID, list[Any]] = {}
    for event in events:
        jid = event.job_id
        if event.kind == "dataset" or jid is None:
            continue
        when = event.event_time
        is_run = event.kind == "run" and event.run_id is not None
        source = "run" if is_run else "static"
        for ref in event.refs:
            direction = DIRECTIONS[ref.role]
            job_key = (jid, direction, ref.namespace, ref.name, source)
            _span(job_edges, job_key, when, ref.lifecycle)
            if is_run:
                assert event.run_id is not None
                run_key = (event.run_id, direction, ref.namespace, ref.name)
                run_jobs.setdefault(run_key, jid)
                _span(run_edges, run_key, when, ref.lifecycle)
        if is_run:
            assert event.run_id is not None
            fold_lineage_run(runs, event.run_id, jid, event)
    if run_edges:
        run_ids, directions, namespaces, names, *spans = columns_of(run_edges)
        columns = [run_ids, list(run_jobs.values()), directions, namespaces, names, *spans]
        cur.execute(UPSERT_RUN_EDGES, row_param(RUN_EDGE_TYPES, columns))
    if job_edges:
        cur.execute(UPSERT_JOB_EDGES, row_param(JOB_EDGE_TYPES, columns_of(job_edges)))
    if runs:
        cur.execute(
            UPSERT_LINEAGE_RUNS,
            row_param(LINEAGE_RUN_TYPES, [list(runs), *zip(*runs.values(), strict=True)]),
        )


def fold_lineage_run(
    runs: dict[uuid.UUID, list[Any]], run_id: uuid.UUID, jid: uuid.UUID, event: FoldEvent
) -> None:
    when = event.event_time
    is_start = event.event_type == "START"
    ended = when if event.event_type in TERMINAL_STATES else None
    row = runs.get(run_id)
    if row is None:
        runs[run_id] = [jid, when, ended, is_start]
        return
    if row[3] == is_start:
        row[1] = min(row[1], when)
    elif is_start:
        row[1], row[3] = when, True
    if ended is not None:
        row[2] = ended if row[2] is None else max(row[2], ended)
