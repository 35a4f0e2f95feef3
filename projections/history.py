"""Projection `history`: what questions "as of" a moment need beyond the current state.

`schema_observations`: each event that carried a dataset's `schema` facet (an output's
only when the event wrote it, as for dataset versions), with the hash
of its fields (the fields themselves are in dataset_versions), so the schema at any moment
is the latest observation at or before it. `run_column_lineage`: the column lineage each
run reported for each of its outputs (the nil run id for a JobEvent's static lineage),
its latest report, so a job's field edges at any moment are those of its latest run then.
Both fold order-independently: inserts, and upserts by min/max, never a read.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

import psycopg

from projections.common import ColumnEdge, FoldEvent, columns_of, row_param, rows_select
from projections.decode import edge_chunks

NAME = "history"
# 2: run_column_edges keyed by edge_key; 3: run_column_lineage, a row per output;
# 4: run_column_lineage_latest (an output's reports newest first); 5: edges of fields over
# 512 bytes left out, a field that cannot be decoded loses only its edges;
# 6: no schema observation of an output a run only attempted
VERSION = 6
TABLES = ("schema_observations", "run_column_lineage")
STATIC_RUN = uuid.UUID(int=0)  # the run id of a JobEvent's column lineage

OBSERVATION_TYPES = ("text", "text", "bigint", "text", "timestamptz", "bytea", "uuid")
INSERT_OBSERVATIONS = f"""
INSERT INTO schema_observations (namespace, name, seq, role, event_time, fields_hash, run_id)
{rows_select(OBSERVATION_TYPES)}
ON CONFLICT DO NOTHING
"""
REPORT_TYPES = ("text", "text", "uuid", "uuid", "jsonb", "timestamptz", "timestamptz", "bigint")
UPSERT_RUN_COLUMN_LINEAGE = f"""
INSERT INTO run_column_lineage AS t (out_namespace, out_name, job_id, run_id, edges,
    first_seen, last_seen, last_seq)
{rows_select(REPORT_TYPES)}
ON CONFLICT (out_namespace, out_name, job_id, run_id)
DO UPDATE SET
    first_seen = least(t.first_seen, excluded.first_seen),
    last_seen = greatest(t.last_seen, excluded.last_seen),
    last_seq = CASE WHEN (excluded.last_seen, excluded.last_seq) > (t.last_seen, t.last_seq)
        THEN excluded.last_seq ELSE t.last_seq END,
    edges = CASE WHEN (excluded.last_seen, excluded.last_seq) > (t.last_seen, t.last_seq)
        THEN excluded.edges ELSE t.edges END
"""

ReportKey = tuple[Any, ...]  # (out namespace, out name, job, run)


def fold(cur: psycopg.Cursor[Any], events: list[FoldEvent]) -> None:
    observations: dict[tuple[str, str, int, str], list[Any]] = {}
    reports: dict[ReportKey, list[Any]] = {}  # -> [edges, first_seen, last_seen, last_seq]
    for event in events:
        for ref in event.refs:
            if ref.schema_hash is not None and event.observes(ref):
                key = (ref.namespace, ref.name, event.seq, ref.role)
                observations[key] = [event.event_time, ref.schema_hash, event.run_id]
            if ref.role != "output" or event.job_id is None:
                continue
            if not (ref.column_edges or ref.deferred_lineage):
                continue
            run = event.run_id if event.kind == "run" and event.run_id else STATIC_RUN
            when = event.event_time
            report = (ref.namespace, ref.name, event.job_id, run)
            seen = reports.get(report)
            if seen is None:
                reports[report] = [ref, when, when, event.seq]
                continue
            seen[1] = min(seen[1], when)
            if (when, event.seq) > (seen[2], seen[3]):
                seen[0], seen[2], seen[3] = ref, when, event.seq
    if observations:
        cur.execute(INSERT_OBSERVATIONS, row_param(OBSERVATION_TYPES, columns_of(observations)))
    for report, seen in list(reports.items()):
        # (column_lineage counted the malformed parts of a facet it made in chunks)
        seen[0] = edges_object(edge_chunks(seen[0], count=False))
        if seen[0] == "{}":  # a large facet with no edge well formed, as a small one
            del reports[report]
    if reports:
        cur.execute(UPSERT_RUN_COLUMN_LINEAGE, row_param(REPORT_TYPES, columns_of(reports)))


def edges_object(chunks: Iterable[list[ColumnEdge]]) -> str:
    """A report's pairs as a JSON object, edge_key -> transformations (JSON text already).

    The keys are hex digits and need no escaping. An empty report (every part of a large
    facet malformed) is an empty object.
    """
    pairs = [f'"{key}":{transformations}' for edges in chunks for *_, transformations, key in edges]
    return "{" + ",".join(pairs) + "}"
