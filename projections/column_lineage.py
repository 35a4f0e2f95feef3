"""Projection `column_lineage`: output field <- input field, from the `columnLineage` facet.

Each (output field, input field) pair is one row with its first and last eventTime; the
transformations, run and job are those of the latest report (by eventTime, then seq), and
`job_ids` every job that ever reported it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg

from projections.common import FoldEvent, json_text, row_param, rows_select
from projections.decode import EDGE_CHUNK, edge_chunks

NAME = "column_lineage"
VERSION = 4  # 2: edge_key; 3: job_ids; 4: keyed by edge_key, fields of at most 512 bytes
TABLES = ("column_lineage",)

TYPES = ("text",) * 6 + ("jsonb", "uuid", "uuid", "timestamptz", "timestamptz", "bigint", "uuid")
# (job_ids travel as a JSON array, the last column, and become a uuid[] here)
COLUMNS = """out_namespace, out_name, out_field, in_namespace, in_name, in_field,
    transformations, job_id, run_id, first_seen, last_seen, last_seq, edge_key"""
UPSERT = f"""
INSERT INTO column_lineage AS t ({COLUMNS}, job_ids)
SELECT {COLUMNS}, ARRAY(SELECT jsonb_array_elements_text(r.jobs)::uuid)
FROM ({rows_select((*TYPES, "jsonb"))}) AS r({COLUMNS}, jobs)
ON CONFLICT (edge_key) DO UPDATE SET
    -- (a set: a job already listed is the common case, and leaves the array as it is)
    job_ids = CASE WHEN excluded.job_ids <@ t.job_ids THEN t.job_ids
        ELSE t.job_ids || excluded.job_ids END,
    first_seen = least(t.first_seen, excluded.first_seen),
    last_seen = greatest(t.last_seen, excluded.last_seen),
    last_seq = CASE WHEN (excluded.last_seen, excluded.last_seq) > (t.last_seen, t.last_seq)
        THEN excluded.last_seq ELSE t.last_seq END,
    transformations = CASE WHEN (excluded.last_seen, excluded.last_seq) > (t.last_seen, t.last_seq)
        THEN excluded.transformations ELSE t.transformations END,
    job_id = CASE WHEN (excluded.last_seen, excluded.last_seq) > (t.last_seen, t.last_seq)
        THEN excluded.job_id ELSE t.job_id END,
    run_id = CASE WHEN (excluded.last_seen, excluded.last_seq) > (t.last_seen, t.last_seq)
        THEN excluded.run_id ELSE t.run_id END
"""


def fold(cur: psycopg.Cursor[Any], events: list[FoldEvent]) -> None:
    # edge_key -> [out ns, out name, out field, in ns, in name, in field,
    #              transformations, job, run, first_seen, last_seen, last_seq]
    rows: dict[str, list[Any]] = {}
    jobs: dict[str, set[str]] = {}  # edge_key -> every job that reported it
    for event in events:
        jid = event.job_id
        job = str(jid)
        when = event.event_time
        for ref in event.refs:  # column edges: of outputs and DatasetEvents only
            for chunk in edge_chunks(ref):
                for out_field, in_ns, in_name, in_field, transformations, key in chunk:
                    row: list[Any] = [ref.namespace, ref.name, out_field, in_ns, in_name, in_field]
                    row += (transformations, jid, event.run_id, when, when, event.seq)
                    add(rows, key, row)
                    if jid is not None:
                        jobs.setdefault(key, set()).add(job)
                if len(rows) >= EDGE_CHUNK:  # written as they come: memory stays a chunk's
                    write(cur, rows, jobs)
                    rows, jobs = {}, {}
    if rows:
        write(cur, rows, jobs)


def write(cur: psycopg.Cursor[Any], rows: dict[str, list[Any]], jobs: dict[str, set[str]]) -> None:
    job_lists = [json_text(sorted(jobs.get(key, ()))) for key in rows]
    # transformations: JSON text already
    cur.execute(
        UPSERT,
        row_param((*TYPES, "jsonb"), [*zip(*rows.values(), strict=True), list(rows), job_lists]),
    )


def add(rows: dict[str, list[Any]], key: str, new: list[Any]) -> None:
    row = rows.get(key)
    if row is None:
        rows[key] = new
        return
    first: dt.datetime = min(row[9], new[9])
    if (new[10], new[11]) > (row[10], row[11]):
        row[:] = new
    row[9] = first
