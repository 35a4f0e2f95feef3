-- projection: runs. One row per runId, whatever order its events arrive in.
CREATE TABLE runs (
    id              uuid        PRIMARY KEY,            -- the OpenLineage runId
    job_id          uuid        NOT NULL,
    job_namespace   text        NOT NULL,
    job_name        text        NOT NULL,
    state           text        NOT NULL,  -- START | RUNNING | COMPLETE | FAIL | ABORT | OTHER
    state_time      timestamptz NOT NULL,  -- eventTime of the event that set the state
    started_at      timestamptz,           -- eventTime of START
    ended_at        timestamptz,           -- eventTime of the terminal event
    nominal_start   timestamptz,
    nominal_end     timestamptz,
    error_message   text,
    parent_run_id   uuid,
    parent_job_namespace text,
    parent_job_name text,
    root_run_id     uuid,                  -- the top of the parent chain (itself when none)
    -- the runs above it, nearest first, up to the root: the parent facets' runs (or the root
    -- one names), at most 100 (projections.runs.MAX_PARENT_DEPTH; NULL: none)
    root_path       uuid[],
    facets          json        NOT NULL DEFAULT '{}',  -- json: see datasets
    facet_times     jsonb       NOT NULL DEFAULT '{}',
    first_seen      timestamptz NOT NULL,  -- earliest eventTime of its events
    last_seen       timestamptz NOT NULL,
    first_seq       bigint      NOT NULL,  -- log seq of the first event folded (tie-breaks)
    -- projector bookkeeping: the state's rank (2 terminal, 1 START/RUNNING/OTHER, 0 no
    -- eventType) and the seq of the event that set it
    state_rank      smallint    NOT NULL,
    state_seq       bigint      NOT NULL
);
CREATE INDEX runs_job ON runs (job_id, first_seen DESC, id);
-- /runs?namespace= (a namespace's runs, newest first)
CREATE INDEX runs_namespace ON runs (job_namespace, first_seen DESC, id);
CREATE INDEX runs_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;
CREATE INDEX runs_root ON runs (root_run_id);
CREATE INDEX runs_state ON runs (state, first_seen DESC);
-- /runs?state=FAIL&since=: the runs that reached a state in a span of time
CREATE INDEX runs_state_time ON runs (state, state_time DESC);
CREATE INDEX runs_first_seen ON runs (first_seen DESC, id);
-- `sort=started` of /runs: its start (START's eventTime, else the earliest), newest first
CREATE INDEX runs_started ON runs ((coalesce(started_at, first_seen)) DESC, id);
