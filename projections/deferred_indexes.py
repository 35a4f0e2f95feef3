"""The indexes a rebuild creates after its fold instead of maintaining them row by row.

A rebuild creates its tables from the projections' DDL (sql/projections/), drops the
indexes only readers use while the tables are still empty, and creates them again from
their definitions once the fold is done: one sorted pass each instead of an insertion per
row and update (the trigram indexes most of all). The indexes the fold's loads, upserts
and settling statements read stay, as do unique ones (ON CONFLICT needs them). Every
deferred btree's text is a name ingest bounds (MAX_NAME_BYTES), so no row the fold takes
can fail an index build after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

# Checked against the fold's statements (projections/*.py) and pg_stat_user_indexes after
# the fold of make bench's 1,000,000 events (none scanned; dataset_versions_order,
# job_edges_dataset and run_edges_job were, so they stay): a name here the fold did read
# would only make a rebuild slower, never its tables different.
READ_ONLY_INDEXES = frozenset(
    {
        # datasets
        "datasets_live",
        "datasets_display",
        "dataset_names_namespace_dataset",
        "dataset_names_name",
        "dataset_names_name_trigrams",
        # (not dataset_fields' name btrees: a field name is not bounded in length, and one
        # too long for a btree entry must fail its event in the fold, as it does live,
        # not the index build after it)
        "dataset_fields_name_trgm",
        "dataset_fields_description_trgm",
        # jobs
        "jobs_parent",
        "jobs_name",
        "jobs_namespace_first_seen",
        "jobs_name_trigrams",
        # runs
        "runs_job",
        "runs_namespace",
        "runs_parent",
        "runs_state",
        "runs_state_time",
        "runs_first_seen",
        "runs_started",
        "runs_namespace_failed",
        "runs_failed_started",
        "job_cadence_late",
        "job_cadence_late_at",
        "failing_spans_span",
        # lineage (not lineage_runs_job: SETTLE_HELD finds each job's latest run by it)
        # column_lineage
        "column_lineage_report",
        "column_lineage_runs_latest",
        # history
        "schema_observations_run",
    }
)

# Index builds sort in memory up to this (the default, 64 MB, spilled the larger ones to
# disk); one index at a time, so it bounds the rebuild's server memory too.
MAINTENANCE_WORK_MEM = "256MB"

DEFINITIONS = """
SELECT c.relname, pg_get_indexdef(c.oid)
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relname = ANY(%s) AND NOT i.indisunique AND NOT i.indisprimary
ORDER BY c.relname
"""


def defer(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    """Drops `schema`'s READ_ONLY_INDEXES (in the caller's transaction, tables still empty);
    returns their definitions, schema-qualified, for `create`."""
    rows = conn.execute(DEFINITIONS, (schema, sorted(READ_ONLY_INDEXES))).fetchall()
    for name, _ in rows:
        conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(schema, name)))
    return [definition for _, definition in rows]


def create(conn: psycopg.Connection[Any], definitions: Sequence[str]) -> None:
    """Creates the deferred indexes (in the caller's transaction)."""
    conn.execute(f"SET LOCAL maintenance_work_mem = '{MAINTENANCE_WORK_MEM}'")
    for definition in definitions:
        conn.execute(definition)
