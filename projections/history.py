"""Projection `history`: what questions "as of" a moment need beyond the current state.

`schema_observations`: each event that carried a dataset's `schema` facet (an output's
only when the event wrote it, as for dataset versions), with the hash
of its fields (the fields themselves are in dataset_versions), so the schema at any moment
is the latest observation at or before it. (The column lineage of each run is
column_lineage's `column_lineage_runs`.) It folds order-independently: inserts, never a
read.
"""

from __future__ import annotations

from typing import Any

import psycopg

from projections.common import FoldEvent, columns_of, row_param, rows_select

NAME = "history"
# 2: run_column_edges keyed by edge_key; 3: run_column_lineage, a row per output;
# 4: run_column_lineage_latest (an output's reports newest first); 5: edges of fields over
# 512 bytes left out, a field that cannot be decoded loses only its edges;
# 6: no schema observation of an output a run only attempted; 7: the runs' column lineage
# moved to column_lineage (by report)
VERSION = 7
TABLES = ("schema_observations",)

OBSERVATION_TYPES = ("text", "text", "bigint", "text", "timestamptz", "bytea", "uuid")
INSERT_OBSERVATIONS = f"""
INSERT INTO schema_observations (namespace, name, seq, role, event_time, fields_hash, run_id)
{rows_select(OBSERVATION_TYPES)}
ON CONFLICT DO NOTHING
"""


def fold(cur: psycopg.Cursor[Any], events: list[FoldEvent]) -> None:
    observations: dict[tuple[str, str, int, str], list[Any]] = {}
    for event in events:
        for ref in event.refs:
            if ref.schema_hash is not None and event.observes(ref):
                key = (ref.namespace, ref.name, event.seq, ref.role)
                observations[key] = [event.event_time, ref.schema_hash, event.run_id]
    if observations:
        cur.execute(INSERT_OBSERVATIONS, row_param(OBSERVATION_TYPES, columns_of(observations)))
