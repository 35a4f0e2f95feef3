"""Projection `column_lineage`: output field <- input field, from the `columnLineage` facet.

Each (output field, input field) pair is one row with its first and last eventTime; the
transformations, run and job are those of the latest report (by eventTime, then seq).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg

from projections.common import FoldEvent, row_param, rows_select

NAME = "column_lineage"
VERSION = 1
TABLES = ("column_lineage",)

TYPES = ("text",) * 6 + ("jsonb", "uuid", "uuid", "timestamptz", "timestamptz", "bigint")
UPSERT = f"""
INSERT INTO column_lineage AS t (out_namespace, out_name, out_field, in_namespace, in_name,
    in_field, transformations, job_id, run_id, first_seen, last_seen, last_seq)
{rows_select(TYPES)}
ON CONFLICT (out_namespace, out_name, out_field, in_namespace, in_name, in_field)
DO UPDATE SET
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

Key = tuple[str, str, str, str, str, str]


def fold(cur: psycopg.Cursor[Any], events: list[FoldEvent]) -> None:
    # key -> [transformations, job, run, first_seen, last_seen, last_seq]
    rows: dict[Key, list[Any]] = {}
    for event in events:
        jid = event.job_id
        when = event.event_time
        for ref in event.refs:  # column_edges: of outputs and DatasetEvents only
            for out_field, in_ns, in_name, in_field, transformations in ref.column_edges:
                key = (ref.namespace, ref.name, out_field, in_ns, in_name, in_field)
                add(rows, key, [transformations, jid, event.run_id, when, when, event.seq])
    if not rows:
        return
    keys = list(rows)
    cur.execute(
        UPSERT,
        row_param(
            TYPES,
            [
                *[[k[i] for k in keys] for i in range(6)],
                [rows[k][0] for k in keys],  # JSON text already
                *[[rows[k][i] for k in keys] for i in range(1, 6)],
            ],
        ),
    )


def add(rows: dict[Key, list[Any]], key: Key, new: list[Any]) -> None:
    row = rows.get(key)
    if row is None:
        rows[key] = new
        return
    first: dt.datetime = min(row[3], new[3])
    if (new[4], new[5]) > (row[4], row[5]):
        row[:] = new
    row[3] = first
