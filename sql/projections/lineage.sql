-- projection: lineage. Edges between jobs and dataset names (resolved to dataset ids
-- through readmodel.dataset_names at query time).
--
-- run_edges: what one run read and wrote (the per-run edges, with their times, which
-- also answer "as of" queries). job_edges: the union over a job's runs and its static
-- lineage (JobEvents), with first and last seen.
-- A write is a successful one (projections/lineage.py): a run writes its outputs when it
-- COMPLETEs (a STREAMING job also at each RUNNING event naming them), unless it ends FAIL
-- or ABORT (its latest terminal event): then it only attempted them, even after a
-- COMPLETE: its edges stay, and no write time.
CREATE TABLE run_edges (
    run_id          uuid        NOT NULL,
    job_id          uuid        NOT NULL,
    direction       text        NOT NULL,  -- 'input' (dataset -> job) | 'output' (job -> dataset)
    namespace       text        NOT NULL,
    name            text        NOT NULL,
    first_seen      timestamptz NOT NULL,
    last_seen       timestamptz NOT NULL,
    -- the latest `lifecycleStateChange` (CREATE, OVERWRITE, DROP, ...) its events reported
    lifecycle_state text,
    lifecycle_time  timestamptz,
    -- an output this run wrote: its first and last write (NULL: only attempted, or not yet)
    first_write_at  timestamptz,
    last_write_at   timestamptz,
    -- the first and last event of the run that would write it (a COMPLETE or STREAMING
    -- RUNNING naming it) whatever the run's end: the write times above come from these
    -- and the run's completions unless it ended FAIL or ABORT
    first_writing   timestamptz,
    last_writing    timestamptz,
    PRIMARY KEY (run_id, direction, namespace, name)
);
CREATE INDEX run_edges_dataset ON run_edges (namespace, name, direction);
CREATE INDEX run_edges_job ON run_edges (job_id, direction);

-- fillfactor: each run of the job updates its edges (last_seen, writes); room left on each
-- page keeps those updates HOT, no new index entries. 60, not 80: a job's edges share pages
-- with the other jobs its batch inserted, which run again together (80 kept 40 % HOT, 60
-- 82 %: docs/PERFORMANCE.md "Less server work an event")
CREATE TABLE job_edges (
    job_id          uuid        NOT NULL,
    direction       text        NOT NULL,
    namespace       text        NOT NULL,
    name            text        NOT NULL,
    source          text        NOT NULL,  -- 'run' | 'static' (JobEvent)
    first_seen      timestamptz NOT NULL,
    last_seen       timestamptz NOT NULL,
    lifecycle_state text,                  -- as in run_edges, over the job's events
    lifecycle_time  timestamptz,
    -- an output: the latest write of its runs (ties: the greater run id), and the latest
    -- failed attempt (a run that named it and FAILed or ABORTed: when, which, which state)
    last_write_at   timestamptz,
    last_write_run  uuid,
    attempt_at      timestamptz,
    attempt_run     uuid,
    attempt_state   text,
    -- held now: static lineage, or an edge of the job's latest run (by started_at, then
    -- run id: asof.LATEST_RUN at asof.NOW), kept by the fold for every job a batch touches
    -- (projections/lineage.py SETTLE_HELD), so a read "as of now" filters on it instead of
    -- looking up each job's latest run (20,000 lookups for a table 20,000 jobs wrote)
    held_now        boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (job_id, direction, namespace, name, source)
) WITH (fillfactor = 60);
CREATE INDEX job_edges_dataset ON job_edges (namespace, name, direction);
-- the edges a job holds from its runs now: what the fold un-holds when its latest run
-- changes, without reading the job's edges of every run it ever had
CREATE INDEX job_edges_held ON job_edges (job_id) WHERE held_now AND source = 'run';

-- The start time of each run as lineage sees it (for "latest run at or before T").
CREATE TABLE lineage_runs (
    run_id          uuid        PRIMARY KEY,
    job_id          uuid        NOT NULL,
    started_at      timestamptz NOT NULL,  -- START eventTime, else its earliest eventTime
    ended_at        timestamptz,           -- its latest terminal eventTime
    has_start       boolean     NOT NULL DEFAULT false,  -- started_at came from a START
    first_complete  timestamptz,           -- its first and last COMPLETE eventTime: it
    last_complete   timestamptz,           -- wrote its outputs then
    failed_at       timestamptz,           -- its latest FAIL or ABORT eventTime, and which
    failed_state    text,
    -- its latest terminal event (by eventTime, then seq, as runs.state): its state and seq
    -- (the time is ended_at); FAIL or ABORT: the run wrote nothing
    ended_state     text,
    ended_seq       bigint
);
-- (run_id too: "the latest run at or before T" breaks ties by it, so a probe is the index's
-- first entry, not a sort of the job's runs: a report of 20,000 jobs probes each)
CREATE INDEX lineage_runs_job ON lineage_runs (job_id, started_at DESC, run_id DESC);
