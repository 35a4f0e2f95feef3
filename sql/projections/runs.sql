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
-- a job's runs by start (a job's run statistics over a window, its cadence's latest runs)
CREATE INDEX runs_job_started ON runs (job_id, (coalesce(started_at, first_seen)) DESC, id DESC);
-- `sort=failed_first` of /runs and /jobs: the failed and aborted runs by start, walked
-- without passing the others (a page of 51 read 1,566 runs along runs_started, and the
-- page past the last failure every run)
CREATE INDEX runs_failed_started ON runs ((coalesce(started_at, first_seen)) DESC, id)
    WHERE state IN ('FAIL', 'ABORT');
-- a namespace's runs that failed or aborted, by when (its failures of the last 24 h)
CREATE INDEX runs_namespace_failed ON runs (job_namespace, state_time DESC)
    WHERE state IN ('FAIL', 'ABORT');

-- Each job's cadence, learned from its latest runs (projections/cadence.py): refolded from
-- the stored runs of the jobs a batch touched, so it depends on them only, not on order.
-- A job appears once it has 4 scheduled times (by nominalTime, else start).
CREATE TABLE job_cadence (
    job_id          uuid        PRIMARY KEY,
    namespace       text        NOT NULL,  -- the job's
    basis           text        NOT NULL,  -- nominal | start: what its times are
    cadence         text        NOT NULL,  -- hourly | daily | weekly | regular | irregular
    period_seconds  double precision NOT NULL,  -- the median gap between scheduled times
    delay_seconds   double precision NOT NULL,  -- median start after the nominal time (0: start)
    tolerance_seconds double precision NOT NULL,  -- learned from its own jitter
    duration_seconds double precision,      -- median duration of its completed runs
    slots           integer     NOT NULL,   -- the scheduled times it was learned from
    last_expected   timestamptz NOT NULL,   -- the latest scheduled time seen
    next_expected   timestamptz NOT NULL,   -- when the next run should start
    late_at         timestamptz NOT NULL,   -- next_expected + tolerance
    missed_at       timestamptz NOT NULL    -- late_at + period: the slot after passed too
);
-- /jobs?late=true and a namespace's late jobs: those whose next run is past its tolerance
CREATE INDEX job_cadence_late ON job_cadence (namespace, late_at) INCLUDE (missed_at);
-- /jobs?late=true over every namespace: the late cadences, a range however few they are
CREATE INDEX job_cadence_late_at ON job_cadence (late_at);

-- When each job was failing (projections/failing.py): from a run's FAIL or ABORT until the
-- job's next run (by start) started, unbounded while there is none; a run overtaken by the
-- next before it failed has no span. "The jobs failing at T" are the spans holding T: the
-- few failing then, found by the range index, not a probe per job of the namespace.
CREATE TABLE failing_spans (
    run_id          uuid        NOT NULL,
    job_id          uuid        NOT NULL,
    job_namespace   text        NOT NULL,
    started         timestamptz NOT NULL,  -- the run's start (START, else its first event)
    span            tstzrange   NOT NULL
);
CREATE INDEX failing_spans_job ON failing_spans (job_id, started);
CREATE INDEX failing_spans_span ON failing_spans USING gist (span);
