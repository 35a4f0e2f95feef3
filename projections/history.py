"""Projection `history`: what questions "as of" a moment need beyond the current state.

`schema_observations`: each event that carried a dataset's `schema` facet as a version (an
output's only when the event wrote it, never a reader's: FoldEvent.versions), with the hash
of its fields (the fields themselves are in dataset_versions), so the schema at any moment
is the latest observation at or before it. `reader_schemas`: the schemas readers reported,
each distinct one per name with the latest run that reported it. (The column lineage of each run is
column_lineage's `column_lineage_runs`.) It folds order-independently: inserts, never a
read.
"""

from __future__ import annotations

from typing import Any

import psycopg

from projections.common import (
    DatasetRef,
    FoldEvent,
    columns_of,
    of_another_job,
    row_param,
    rows_select,
    run_facts,
)

NAME = "history"
# 2: run_column_edges keyed by edge_key; 3: run_column_lineage, a row per output;
# 4: run_column_lineage_latest (an output's reports newest first); 5: edges of fields over
# 512 bytes left out, a field that cannot be decoded loses only its edges;
# 6: no schema observation of an output a run only attempted; 7: the runs' column lineage
# moved to column_lineage (by report); 8: a reader's schema is an observation
# (reader_schemas), not a schema_observations row; 9: another job's events reusing a
# runId are left out
VERSION = 9
TABLES = ("schema_observations", "reader_schemas")

OBSERVATION_TYPES = ("text", "text", "bigint", "text", "timestamptz", "bytea", "uuid")
INSERT_OBSERVATIONS = f"""
INSERT INTO schema_observations (namespace, name, seq, role, event_time, fields_hash, run_id)
{rows_select(OBSERVATION_TYPES)}
ON CONFLICT DO NOTHING
"""


READER_TYPES = (
    "text", "text", "bytea", "json", "timestamptz", "timestamptz", "bigint", "uuid", "uuid",
)  # fmt: skip
_LATEST = "(excluded.last_seen, excluded.last_seq) > (t.last_seen, t.last_seq)"
UPSERT_READER_SCHEMAS = f"""
INSERT INTO reader_schemas AS t (namespace, name, fields_hash, fields, first_seen, last_seen,
    last_seq, job_id, run_id)
{rows_select(READER_TYPES)}
ON CONFLICT (namespace, name, fields_hash) DO UPDATE SET
    first_seen = least(t.first_seen, excluded.first_seen),
{
    ",".join(
        f"    {c} = CASE WHEN {_LATEST} THEN excluded.{c} ELSE t.{c} END"
        for c in ("fields", "last_seen", "last_seq", "job_id", "run_id")
    )
}
"""


def fold(cur: psycopg.Cursor[Any], events: list[FoldEvent]) -> None:
    observations: dict[tuple[str, str, int, str], list[Any]] = {}
    # (namespace, name, hash) -> [fields, first_seen, last_seen, last_seq, job, run]
    readers: dict[tuple[str, str, bytes], list[Any]] = {}
    facts = run_facts(cur, events)
    for event in events:
        if of_another_job(event, facts):
            continue  # not that run's (common.FIRST_JOB_OF_RUNS)
        for ref in event.refs:
            if ref.schema_hash is None:
                continue
            if event.versions(ref):
                key = (ref.namespace, ref.name, event.seq, ref.role)
                observations[key] = [event.event_time, ref.schema_hash, event.run_id]
            elif ref.role == "input":
                reader_schema(readers, event, ref)
    if observations:
        cur.execute(INSERT_OBSERVATIONS, row_param(OBSERVATION_TYPES, columns_of(observations)))
    if readers:
        cur.execute(UPSERT_READER_SCHEMAS, row_param(READER_TYPES, columns_of(readers)))


def reader_schema(
    readers: dict[tuple[str, str, bytes], list[Any]], event: FoldEvent, ref: DatasetRef
) -> None:
    """Folds a reader's schema into `readers`: the latest event's fields, job and run."""
    assert ref.schema_hash is not None
    when, seq = event.event_time, event.seq
    row = readers.get((ref.namespace, ref.name, ref.schema_hash))
    if row is None:
        readers[(ref.namespace, ref.name, ref.schema_hash)] = [
            ref.schema_fields,
            when,
            when,
            seq,
            event.job_id,
            event.run_id,
        ]
        return
    row[1] = min(row[1], when)
    if (when, seq) > (row[2], row[3]):
        row[0], row[2], row[3] = ref.schema_fields, when, seq
        row[4], row[5] = event.job_id, event.run_id
