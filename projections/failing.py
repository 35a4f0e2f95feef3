"""When each job was failing (the runs projection's `failing_spans`).

A job is failing at T when its latest run started by T had failed or aborted by T: from
that run's FAIL or ABORT until the job's next run (by start, then id) started. A run's span
depends on it and the run after it, so a batch refolds, per job it touched, the spans of
its runs from the earliest start the batch gave or took from one (a late START moves a
start earlier), and of the run before that: usually the job's last two runs. Refolded from
the stored runs after they are written, so the order of events never matters.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import psycopg

from projections.common import INDEX_PROBES_ONLY, planner_without, row_param, rows_select

SINCE_TYPES = ("uuid", "timestamptz")
_START = "coalesce(r.started_at, r.first_seen)"
REFOLD = f"""
WITH touched(job_id, since) AS ({rows_select(SINCE_TYPES)}),
redone AS (
    SELECT t.job_id, coalesce((
        SELECT {_START} FROM runs r
        WHERE r.job_id = t.job_id AND {_START} < t.since
        ORDER BY {_START} DESC, r.id DESC LIMIT 1), t.since) AS since
    FROM touched t
),
ordered AS (
    SELECT r.id, r.job_id, r.job_namespace, r.state, r.state_time, {_START} AS started,
           lead({_START}) OVER (PARTITION BY r.job_id ORDER BY {_START}, r.id) AS next_start
    FROM redone d JOIN runs r ON r.job_id = d.job_id AND {_START} >= d.since
),
gone AS (
    DELETE FROM failing_spans f USING (
        SELECT s.span_row FROM redone d CROSS JOIN LATERAL (
            SELECT s.ctid AS span_row FROM failing_spans s
            WHERE s.job_id = d.job_id AND s.started >= d.since OFFSET 0) s) s
    WHERE f.ctid = s.span_row
)
INSERT INTO failing_spans (run_id, job_id, job_namespace, started, span)
SELECT o.id, o.job_id, o.job_namespace, o.started, tstzrange(o.state_time, o.next_start, '[)')
FROM ordered o
WHERE o.state IN ('FAIL', 'ABORT') AND (o.next_start IS NULL OR o.state_time < o.next_start)
"""


def refold(cur: psycopg.Cursor[Any], since: dict[uuid.UUID, dt.datetime]) -> None:
    """Refolds the failing spans of each job's runs started from `since[job]` (and of the
    run before), after the runs are written."""
    if since:
        # (each job's runs and spans by index, a job at a time (OFFSET 0): with a fresh
        # store's statistics the planner hashed every run and every span, or walked all of
        # failing_spans_job, a scan a batch growing with the store)
        with planner_without(cur, *INDEX_PROBES_ONLY, plan_once=True):
            cur.execute(REFOLD, row_param(SINCE_TYPES, [list(since), list(since.values())]))
