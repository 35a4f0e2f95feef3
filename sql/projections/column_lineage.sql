-- projection: column_lineage. From the `columnLineage` output-dataset facet: output
-- field <- input field, with the transformations when present. Stored by report, not by
-- pair: a job sends the same facet with every run (tens of pairs, each naming two
-- datasets), so each distinct facet is stored once and the outputs and runs that sent it
-- refer to it (one row per pair, keyed by its six names, took more than a third of the
-- read models: docs/PERFORMANCE.md "Scale").

-- Each distinct report: its key is a 128-bit BLAKE2b of the facet's bytes as sent.
CREATE TABLE column_reports (
    report bytea PRIMARY KEY,
    pairs  json  NOT NULL   -- [[out_field, in_namespace, in_name, in_field, transformations]]
);

-- Each report an output was sent, by any job: the pairs an output ever had are those of
-- its reports. job_id, run_id: of the latest event that sent it (by eventTime, then
-- seq); job_ids: every job that did.
-- fillfactor: each run sending a report updates its row (last_seen, run); room left on each
-- page keeps those updates HOT, no new index entries (60: rows inserted together are
-- updated together, as job_edges')
CREATE TABLE column_lineage (
    out_namespace text        NOT NULL,
    out_name      text        NOT NULL,
    report        bytea       NOT NULL,
    job_id        uuid,
    run_id        uuid,
    job_ids       uuid[]      NOT NULL DEFAULT '{}',
    first_seen    timestamptz NOT NULL,
    last_seen     timestamptz NOT NULL,
    last_seq      bigint      NOT NULL,  -- seq of the latest event (ties in last_seen)
    PRIMARY KEY (out_namespace, out_name, report)
) WITH (fillfactor = 60);
CREATE INDEX column_lineage_report ON column_lineage (report);

-- The input names of each report, for walks downstream (written with the report).
CREATE TABLE column_inputs (
    in_namespace text  NOT NULL,
    in_name      text  NOT NULL,
    report       bytea NOT NULL,
    PRIMARY KEY (in_namespace, in_name, report)
);

-- The report of each run (or JobEvent) per output dataset name, its latest (by
-- eventTime, then seq), for "as of": a job's field edges at a moment are those of its
-- latest run then. run_id is the nil uuid for a job's static lineage (JobEvents), which
-- counts from its first eventTime.
CREATE TABLE column_lineage_runs (
    out_namespace text        NOT NULL,
    out_name      text        NOT NULL,
    job_id        uuid        NOT NULL,
    run_id        uuid        NOT NULL,
    report        bytea       NOT NULL,
    first_seen    timestamptz NOT NULL,
    last_seen     timestamptz NOT NULL,  -- eventTime of `report`
    last_seq      bigint      NOT NULL,  -- its seq (ties in last_seen)
    PRIMARY KEY (out_namespace, out_name, job_id, run_id)
);
-- "the latest report of an output that counts at T" (as-of column lineage,
-- metastore/api/column_lineage.py): its reports newest first, read until one counts.
CREATE INDEX column_lineage_runs_latest
    ON column_lineage_runs (out_namespace, out_name, last_seen DESC, last_seq DESC);
