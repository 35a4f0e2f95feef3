"""Projection `column_lineage`: output field <- input field, from the `columnLineage` facet.

Stored by report (sql/projections/column_lineage.sql): each distinct facet once in
`column_reports`; per output, every report it was sent with the times of the first and
latest event that sent it, the job and run of the latest, and every job that sent it
(`column_lineage`); its input names (`column_inputs`); per output and run (or JobEvent),
its latest report (`column_lineage_runs`, for "as of"). A pair's transformations, job and
run are those of the latest report that has it; its jobs, those of every report that has
it. All of it folds order-independently: inserts, and upserts by min/max.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg

from projections.common import (
    FoldEvent,
    columns_of,
    json_text,
    of_another_job,
    row_param,
    rows_select,
    run_facts,
)
from projections.decode import report_of

NAME = "column_lineage"
# 2: edge_key; 3: job_ids; 4: keyed by edge_key, fields of at most 512 bytes; 5: by
# report, not by pair, with history's run_column_lineage as column_lineage_runs; 6: another
# job's events reusing a runId are left out
VERSION = 6
TABLES = ("column_reports", "column_lineage", "column_inputs", "column_lineage_runs")
STATIC_RUN = uuid.UUID(int=0)  # the run id of a JobEvent's column lineage

# The pairs of the reports, one row per pair and (output, report): for tools and tests.
PAIRS = """
SELECT c.out_namespace, c.out_name, p->>0 AS out_field, p->>1 AS in_namespace,
       p->>2 AS in_name, p->>3 AS in_field, (p->4)::jsonb AS transformations, c.job_id,
       c.run_id, c.job_ids, c.first_seen, c.last_seen
FROM readmodel.column_lineage c
JOIN readmodel.column_reports r ON r.report = c.report
CROSS JOIN LATERAL json_array_elements(r.pairs) p
"""

# A report new to the store brings its input names (they are a function of the report).
INSERT_REPORTS = f"""
WITH new AS (
    INSERT INTO column_reports (report, pairs)
    {rows_select(("bytea", "json"))}
    ON CONFLICT DO NOTHING
    RETURNING report
)
INSERT INTO column_inputs (in_namespace, in_name, report)
SELECT i.* FROM ({rows_select(("text", "text", "bytea"))}) AS i(in_namespace, in_name, report)
JOIN new ON new.report = i.report
ON CONFLICT DO NOTHING
"""
LATEST = """CASE WHEN (excluded.last_seen, excluded.last_seq) > (t.last_seen, t.last_seq)
        THEN excluded.{0} ELSE t.{0} END"""
OUTPUT_TYPES = (
    "text", "text", "bytea", "uuid", "uuid", "timestamptz", "timestamptz", "bigint", "jsonb"
)  # fmt: skip
# (job_ids travel as a JSON array, the last column, and become a uuid[] here)
OUTPUT_COLUMNS = "out_namespace, out_name, report, job_id, run_id, first_seen, last_seen, last_seq"
UPSERT_OUTPUTS = f"""
INSERT INTO column_lineage AS t ({OUTPUT_COLUMNS}, job_ids)
SELECT {OUTPUT_COLUMNS}, ARRAY(SELECT jsonb_array_elements_text(r.jobs)::uuid)
FROM ({rows_select(OUTPUT_TYPES)}) AS r({OUTPUT_COLUMNS}, jobs)
ON CONFLICT (out_namespace, out_name, report) DO UPDATE SET
    -- (a set: a job already listed is the common case, and leaves the array as it is)
    job_ids = CASE WHEN excluded.job_ids <@ t.job_ids THEN t.job_ids
        ELSE t.job_ids || excluded.job_ids END,
    first_seen = least(t.first_seen, excluded.first_seen),
    last_seen = greatest(t.last_seen, excluded.last_seen),
    last_seq = {LATEST.format("last_seq")},
    job_id = {LATEST.format("job_id")},
    run_id = {LATEST.format("run_id")}
"""
RUN_TYPES = ("text", "text", "uuid", "uuid", "bytea", "timestamptz", "timestamptz", "bigint")
UPSERT_RUNS = f"""
INSERT INTO column_lineage_runs AS t (out_namespace, out_name, job_id, run_id, report,
    first_seen, last_seen, last_seq)
{rows_select(RUN_TYPES)}
ON CONFLICT (out_namespace, out_name, job_id, run_id) DO UPDATE SET
    first_seen = least(t.first_seen, excluded.first_seen),
    last_seen = greatest(t.last_seen, excluded.last_seen),
    last_seq = {LATEST.format("last_seq")},
    report = {LATEST.format("report")}
"""


def fold(cur: psycopg.Cursor[Any], events: list[FoldEvent]) -> None:
    reports: dict[bytes, str] = {}  # report -> pairs
    inputs: dict[tuple[str, str, bytes], None] = {}
    # (out namespace, out name, report) -> [job, run, first_seen, last_seen, last_seq]
    outputs: dict[tuple[str, str, bytes], list[Any]] = {}
    jobs: dict[tuple[str, str, bytes], set[str]] = {}  # -> every job that sent it
    # (out namespace, out name, job, run) -> [report, first_seen, last_seen, last_seq]
    runs: dict[tuple[Any, ...], list[Any]] = {}
    facts = run_facts(cur, events)
    for event in events:
        if of_another_job(event, facts):
            continue  # not that run's (common.FIRST_JOB_OF_RUNS)
        when, seq, job = event.event_time, event.seq, event.job_id
        for ref in event.refs:  # of outputs and DatasetEvents only
            report = report_of(ref)
            if report is None:
                continue
            key = report.key
            if key not in reports:
                reports[key] = report.pairs
                for namespace, name in report.inputs:
                    inputs[(namespace, name, key)] = None
            out = (ref.namespace, ref.name, key)
            latest(outputs, out, [job, event.run_id, when, when, seq], 2)
            if job is not None:
                jobs.setdefault(out, set()).add(str(job))
            if ref.role == "output" and job is not None:
                run = event.run_id if event.kind == "run" and event.run_id else STATIC_RUN
                latest(runs, (ref.namespace, ref.name, job, run), [key, when, when, seq], 1)
    if not reports:
        return
    cur.execute(
        INSERT_REPORTS,
        (
            *row_param(("bytea", "json"), [list(reports), list(reports.values())]),
            *row_param(("text", "text", "bytea"), [*zip(*inputs, strict=True)]),
        ),
    )
    job_lists = [json_text(sorted(jobs.get(out, ()))) for out in outputs]
    cur.execute(UPSERT_OUTPUTS, row_param(OUTPUT_TYPES, [*columns_of(outputs), job_lists]))
    if runs:
        cur.execute(UPSERT_RUNS, row_param(RUN_TYPES, columns_of(runs)))


def latest(rows: dict[Any, list[Any]], key: Any, new: list[Any], first: int) -> None:
    """Folds `new` into `rows[key]`: the least first_seen (at `first`), and the rest from
    the later of the two by (last_seen, last_seq) (the two columns after `first`)."""
    row = rows.get(key)
    if row is None:
        rows[key] = new
        return
    least = min(row[first], new[first])
    if (new[first + 1], new[first + 2]) > (row[first + 1], row[first + 2]):
        row[:] = new
    row[first] = least
