-- projection: history. What "as of" and run-level questions need beyond the current
-- state: each schema a dataset name was seen with, per event, and the column lineage each
-- run (or JobEvent) reported. Keyed by names, like the lineage tables, so a later merge of
-- two datasets (re-pointing dataset_names) carries their history along.

-- One row per event and dataset name whose `schema` facet had fields: the fields live once
-- in dataset_versions (by dataset and hash); here is when each event saw which of them.
CREATE TABLE schema_observations (
    namespace   text        NOT NULL,
    name        text        NOT NULL,
    seq         bigint      NOT NULL,  -- the event's log seq
    role        text        NOT NULL,  -- 'input' | 'output' | 'dataset' (a DatasetEvent)
    event_time  timestamptz NOT NULL,
    fields_hash bytea       NOT NULL,
    run_id      uuid
);
-- "the latest schema at or before T": one index probe per name. Also the table's key: an
-- event has one eventTime, so this is as unique as (namespace, name, seq, role), the
-- primary key it had, an index the fold paid for and no reader used.
CREATE UNIQUE INDEX schema_observations_time
    ON schema_observations (namespace, name, event_time DESC, seq DESC, role);
CREATE INDEX schema_observations_run ON schema_observations (run_id) WHERE run_id IS NOT NULL;

-- The column lineage of each run (or JobEvent) per output dataset name: the `edges` of its
-- latest columnLineage report (by eventTime, then seq) as one object, the pair's
-- `edge_key` (column_lineage.edge_key, as 32 hex digits) -> its transformations. run_id is
-- the nil uuid for a job's static lineage (JobEvents), which counts from its first
-- eventTime. column_lineage holds every pair ever reported; readers find pairs there by
-- name and the reports that hold them here by output name and key. One row per field pair
-- and run was the fold's costliest table (with column_lineage several rows an event); one
-- per output and run is about a sixth as many rows on the benchmark's workload.
CREATE TABLE run_column_lineage (
    out_namespace text        NOT NULL,
    out_name      text        NOT NULL,
    job_id        uuid        NOT NULL,
    run_id        uuid        NOT NULL,
    edges         jsonb       NOT NULL,
    first_seen    timestamptz NOT NULL,
    last_seen     timestamptz NOT NULL,  -- eventTime of the report in `edges`
    last_seq      bigint      NOT NULL,  -- its seq (ties in last_seen)
    PRIMARY KEY (out_namespace, out_name, job_id, run_id)
);
-- "the latest report of an output that counts at T" (as-of column lineage,
-- metastore/api/column_lineage.py): its reports newest first, read until one counts.
CREATE INDEX run_column_lineage_latest
    ON run_column_lineage (out_namespace, out_name, last_seen DESC, last_seq DESC);
