"""Which schemas successful writes made: each run's sightings of a schema, and the
dataset versions settled from them (part of the `datasets` projection).

A version is what a successful write produced (README "Which run writes"): a run that
ends FAIL or ABORT made none, even with a COMPLETE that carried the schema. A run's
events can come in any batches and order, so its end may be known only after its COMPLETE
was folded: `version_sightings` keeps, per name, schema and run (NO_RUN for a DatasetEvent
or JobEvent), the first and last sighting and whether the run ended failed; when a run's
end changes, the versions its sightings touch are settled from the sightings that count
(SETTLE): the first and last sighting again, or no version. So the table is the
same whatever the batches.
"""

from __future__ import annotations

from typing import Any

import psycopg

from metastore import pgarray
from metastore.pgarray import uuid_array
from projections.common import INDEX_PROBES_ONLY, NO_RUN, planner_without, row_param, rows_select

SIGHTING_TYPES = (
    "text", "text", "bytea", "uuid", "uuid",
    "timestamptz", "bigint", "timestamptz", "bigint", "boolean",
)  # fmt: skip
# A new sighting comes with its run's end as the log says; a stored one keeps its own until
# SETTLE changes it (so SETTLE finds the runs whose end changed).
UPSERT_SIGHTINGS = f"""
INSERT INTO version_sightings AS t (namespace, name, fields_hash, run_id, job_id, first_time,
    first_seq, last_time, last_seq, failed)
{rows_select(SIGHTING_TYPES)}
ON CONFLICT (namespace, name, fields_hash, run_id) DO UPDATE SET
    first_seq = CASE WHEN (excluded.first_time, excluded.first_seq) < (t.first_time, t.first_seq)
        THEN excluded.first_seq ELSE t.first_seq END,
    first_time = least(t.first_time, excluded.first_time),
    last_seq = CASE WHEN (excluded.last_time, excluded.last_seq) > (t.last_time, t.last_seq)
        THEN excluded.last_seq ELSE t.last_seq END,
    last_time = greatest(t.last_time, excluded.last_time)
"""
# The batch's runs' ends (failed or not) onto their stored sightings, and the versions of
# the (dataset, schema) pairs whose sightings changed, from the sightings that count: the
# first and the last again (the fields stay those first stored: one schema, maybe spelled
# as another engine does), or none left: no version. One statement, nothing fetched, so
# the fold's pipeline does not wait (its parts read the table as it was before it: a
# sighting counts by its run's end in `ends` where the batch has one).
SETTLE = f"""
WITH ends AS (
    SELECT * FROM unnest(%b::uuid[], %b::boolean[]) AS e(run_id, failed)
),
changed AS (
    UPDATE version_sightings s SET failed = e.failed
    FROM ends e
    WHERE s.run_id = e.run_id AND s.failed <> e.failed
    RETURNING s.namespace, s.name, s.fields_hash
),
touched AS (
    SELECT DISTINCT n.dataset_id, c.fields_hash AS hash
    FROM changed c JOIN dataset_names n ON n.namespace = c.namespace AND n.name = c.name
),
counted AS (
    SELECT t.dataset_id, t.hash, s.first_time, s.first_seq, s.run_id, s.job_id, s.last_time,
           s.last_seq
    FROM touched t
    JOIN dataset_names n ON n.dataset_id = t.dataset_id
    JOIN version_sightings s
      ON s.namespace = n.namespace AND s.name = n.name AND s.fields_hash = t.hash
    LEFT JOIN ends e ON e.run_id = s.run_id
    WHERE NOT coalesce(e.failed, s.failed)
),
span AS (
    SELECT t.dataset_id, t.hash, f.first_time, f.first_seq, f.run_id, f.job_id,
           l.last_time, l.last_seq
    FROM touched t
    LEFT JOIN LATERAL (
        SELECT c.first_time, c.first_seq, c.run_id, c.job_id FROM counted c
        WHERE c.dataset_id = t.dataset_id AND c.hash = t.hash
        ORDER BY c.first_time, c.first_seq LIMIT 1) f ON true
    LEFT JOIN LATERAL (
        SELECT c.last_time, c.last_seq FROM counted c
        WHERE c.dataset_id = t.dataset_id AND c.hash = t.hash
        ORDER BY c.last_time DESC, c.last_seq DESC LIMIT 1) l ON true
),
gone AS (
    DELETE FROM dataset_versions v USING span
    WHERE v.dataset_id = span.dataset_id AND v.fields_hash = span.hash
      AND span.first_time IS NULL
)
UPDATE dataset_versions v SET event_time = span.first_time, seq = span.first_seq,
    run_id = nullif(span.run_id, '{NO_RUN}'::uuid), job_id = span.job_id,
    last_event_time = span.last_time, last_seq = span.last_seq
FROM span
WHERE v.dataset_id = span.dataset_id AND v.fields_hash = span.hash
  AND span.first_time IS NOT NULL
  AND (v.event_time, v.seq, v.last_event_time, v.last_seq)
      IS DISTINCT FROM (span.first_time, span.first_seq, span.last_time, span.last_seq)
"""

# (namespace, name, schema hash, run) -> [job, first time, first seq, last time, last seq,
# failed]
Sightings = dict[tuple[str, str, bytes, Any], list[Any]]


def write(cur: psycopg.Cursor[Any], sightings: Sightings, ends: dict[Any, bool]) -> None:
    """Stores the batch's sightings, then settles the versions of the runs whose end (`ends`:
    run -> ended failed, per the log) changed a sighting stored before. In the fold's
    transaction, after the versions and names are written."""
    pgarray.register(cur)
    if sightings:
        rows = [[*key, *value] for key, value in sightings.items()]
        cur.execute(UPSERT_SIGHTINGS, row_param(SIGHTING_TYPES, [*zip(*rows, strict=True)]))
    if ends:
        runs = list(ends)
        # (index probes by run, whatever the statistics: see INDEX_PROBES_ONLY)
        with planner_without(cur, *INDEX_PROBES_ONLY, plan_once=True):
            cur.execute(
                SETTLE, (uuid_array(runs), pgarray.column_array("boolean", [ends[r] for r in runs]))
            )
