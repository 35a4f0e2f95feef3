-- projection: jobs. One row per (namespace, name); id = uuid5 of the name, so stable
-- across replays.
-- fillfactor: each run updates its job (latest run, last_seen); room left on each page keeps
-- those updates HOT: no new entries in its six indexes, the trigram one above all
CREATE TABLE jobs (
    id              uuid        PRIMARY KEY,
    namespace       text        NOT NULL,
    name            text        NOT NULL,
    facets          json        NOT NULL DEFAULT '{}',  -- merged the spec's way (json: see datasets)
    facet_times     jsonb       NOT NULL DEFAULT '{}',  -- facet name -> [eventTime, seq] it came from
    job_type        text,       -- jobType facet: jobType
    processing_type text,       -- jobType facet: processingType (BATCH | STREAMING)
    integration     text,       -- jobType facet: integration, else from the producer URL
    parent_job_id   uuid,       -- from the parent facet of its runs
    first_seen      timestamptz NOT NULL,
    last_seen       timestamptz NOT NULL,
    latest_run_id   uuid,       -- the run with the latest start (or first event) time
    latest_run_time timestamptz,
    -- projector bookkeeping: the order keys ([eventTime µs, seq]) the values above came from
    parent_order    jsonb,
    latest_run_order jsonb,     -- [1 if START else 0, eventTime µs, seq]
    producer        text,       -- the `producer` URL of its latest event (integration's fallback)
    producer_order  jsonb,
    UNIQUE (namespace, name)
) WITH (fillfactor = 80);
CREATE INDEX jobs_parent ON jobs (parent_job_id) WHERE parent_job_id IS NOT NULL;
CREATE INDEX jobs_name ON jobs (lower(name) text_pattern_ops);
-- /namespace-stats as of T: a namespace's jobs first seen by then, counted from the index
-- alone (without it, a scan of every job: 60-90 ms at 50,000 jobs)
CREATE INDEX jobs_namespace_first_seen ON jobs (namespace, first_seen);
-- substrings of names (/search): by trigram where pg_trgm is installed (migration 0004)
DO $$
DECLARE trgm_schema name := (SELECT n.nspname FROM pg_extension e
                             JOIN pg_namespace n ON n.oid = e.extnamespace
                             WHERE e.extname = 'pg_trgm');
BEGIN
    IF trgm_schema IS NOT NULL THEN
        EXECUTE format('CREATE INDEX jobs_name_trigrams ON jobs USING gin (lower(name) %I.gin_trgm_ops)',
                       trgm_schema);
    END IF;
END
$$;
