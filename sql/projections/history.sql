-- projection: history. What "as of" and run-level questions need beyond the current
-- state: each schema a dataset name was seen with, per event (the column lineage each
-- run reported is column_lineage's column_lineage_runs). Keyed by names, like the
-- lineage tables, so a later merge of two datasets (re-pointing dataset_names) carries
-- their history along.

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
