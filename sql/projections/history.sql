-- projection: history. What "as of" and run-level questions need beyond the current
-- state: each schema a dataset name was seen with, per event (the column lineage each
-- run reported is column_lineage's column_lineage_runs). Keyed by names, like the
-- lineage tables, so a later merge of two datasets (re-pointing dataset_names) carries
-- their history along.

-- One row per event and dataset name whose `schema` facet had fields and was a version (an
-- output the event wrote, a DatasetEvent's or JobEvent's dataset; a reader's schema is in
-- reader_schemas): the fields live once in dataset_versions (by dataset and hash); here is
-- when each event saw which of them.
CREATE TABLE schema_observations (
    namespace   text        NOT NULL,
    name        text        NOT NULL,
    seq         bigint      NOT NULL,  -- the event's log seq
    role        text        NOT NULL,  -- 'output' | 'dataset' (a DatasetEvent)
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

-- The schemas readers reported (an input's `schema` facet: Trino reads Spark's `long` as
-- `bigint`): observations of the data, never versions. One row per name and distinct
-- schema (by the engine-neutral hash of its fields, as dataset_versions), with the fields,
-- job and run of the latest event that reported it (by eventTime, then seq).
-- fillfactor: each read updates the schema's row (last_seen, run); room left on each page
-- keeps those updates HOT, no new index entries (60: rows inserted together are updated
-- together, as job_edges')
CREATE TABLE reader_schemas (
    namespace   text        NOT NULL,
    name        text        NOT NULL,
    fields_hash bytea       NOT NULL,
    fields      json        NOT NULL,
    first_seen  timestamptz NOT NULL,
    last_seen   timestamptz NOT NULL,
    last_seq    bigint      NOT NULL,
    job_id      uuid,
    run_id      uuid,
    PRIMARY KEY (namespace, name, fields_hash)
) WITH (fillfactor = 60);
