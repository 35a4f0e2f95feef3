"""Projection `history`: what questions "as of" a moment need beyond the current state.

`schema_observations`: each event that carried a dataset's `schema` facet, with the hash
of its fields (the fields themselves are in dataset_versions), so the schema at any moment
is the latest observation at or before it. `run_column_edges`: the column lineage each run
reported (the nil run id for a JobEvent's static lineage), so a job's field edges at any
moment are those of its latest run then. Both are sets of facts about single events, so
folding them is order-independent: inserts and min/max upserts, never a read.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg

from projections.common import FoldEvent, columns_of, row_param, rows_select

NAME = "history"
VERSION = 2  # 2: run_column_edges keyed by edge_key
TABLES = ("schema_observations", "run_column_edges")
STATIC_RUN = uuid.UUID(int=0)  # the run id of a JobEvent's column lineage

OBSERVATION_TYPES = ("text", "text", "bigint", "text", "timestamptz", "bytea", "uuid")
INSERT_OBSERVATIONS = f"""
INSERT INTO schema_observations (namespace, name, seq, role, event_time, fields_hash, run_id)
{rows_select(OBSERVATION_TYPES)}
ON CONFLICT DO NOTHING
"""
EDGE_TYPES = ("uuid", "uuid", "uuid", "jsonb", "timestamptz", "timestamptz", "bigint")
UPSERT_RUN_COLUMN_EDGES = f"""
INSERT INTO run_column_edges AS t (edge_key, run_id, job_id, transformations, first_seen,
    last_seen, last_seq)
{rows_select(EDGE_TYPES)}
ON CONFLICT (edge_key, run_id, job_id)
DO UPDATE SET
    first_seen = least(t.first_seen, excluded.first_seen),
    last_seen = greatest(t.last_seen, excluded.last_seen),
    last_seq = CASE WHEN (excluded.last_seen, excluded.last_seq) > (t.last_seen, t.last_seq)
        THEN excluded.last_seq ELSE t.last_seq END,
    transformations = CASE WHEN (excluded.last_seen, excluded.last_seq) > (t.last_seen, t.last_seq)
        THEN excluded.transformations ELSE t.transformations END
"""

EdgeKey = tuple[Any, ...]  # (edge_key, run, job)


def fold(cur: psycopg.Cursor[Any], events: list[FoldEvent]) -> None:
    observations: dict[tuple[str, str, int, str], list[Any]] = {}
    edges: dict[EdgeKey, list[Any]] = {}
    for event in events:
        for ref in event.refs:
            if ref.schema_hash is not None:
                key = (ref.namespace, ref.name, event.seq, ref.role)
                observations[key] = [event.event_time, ref.schema_hash, event.run_id]
            if ref.role != "output" or event.job_id is None or not ref.column_edges:
                continue
            run = event.run_id if event.kind == "run" and event.run_id else STATIC_RUN
            when = event.event_time
            for _, _, _, _, transformations, pair in ref.column_edges:
                edge = (pair, run, event.job_id)
                seen = edges.get(edge)
                if seen is None:
                    edges[edge] = [transformations, when, when, event.seq]
                    continue
                seen[1] = min(seen[1], when)
                if (when, event.seq) > (seen[2], seen[3]):
                    seen[0], seen[2], seen[3] = transformations, when, event.seq
    if observations:
        cur.execute(INSERT_OBSERVATIONS, row_param(OBSERVATION_TYPES, columns_of(observations)))
    if edges:  # transformations: JSON text already
        cur.execute(UPSERT_RUN_COLUMN_EDGES, row_param(EDGE_TYPES, columns_of(edges)))
