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
VERSION = 2  # 2: edge_key
TABLES = ("column_lineage",)

TYPES = ("text",) * 6 + ("jsonb", "uuid", "uuid", "timestamptz", "timestamptz", "bigint", "uuid")
UPSERT = f"""
INSERT INTO column_lineage AS t (out_namespace, out_name, out_field, in_namespace, in_name,
    in_field, transformations, job_id, run_id, first_seen, last_seen, last_seq, edge_key)
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


def fold(cur: psycopg.Cursor[Any], events: list[FoldEvent]) -> None:
    # edge_key -> [out ns, out name, out field, in ns, in name, in field,
    #              transformations, job, run, first_seen, last_seen, last_seq]
    rows: dict[str, list[Any]] = {}
    for event in events:
        jid = event.job_id
        when = event.event_time
        for ref in event.refs:  # column_edges: of outputs and DatasetEvents only
            for out_field, in_ns, in_name, in_field, transformations, key in ref.column_edges:
                row: list[Any] = [ref.namespace, ref.name, out_field, in_ns, in_name, in_field]
                row += (transformations, jid, event.run_id, when, when, event.seq)
                add(rows, key, row)
    if not rows:
        return
    # transformations: JSON text already
    cur.execute(UPSERT, row_param(TYPES, [*zip(*rows.values(), strict=True), list(rows)]))


def add(rows: dict[str, list[Any]], key: str, new: list[Any]) -> None:
    row = rows.get(key)
    if row is None:
        rows[key] = new
        return
    first: dt.datetime = min(row[9], new[9])
    if (new[10], new[11]) > (row[10], row[11]):
        row[:] = new
    row[9] = first
