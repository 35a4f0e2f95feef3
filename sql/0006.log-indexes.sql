-- depends: 0005.log-clock
-- Two indexes of the log for reads whose cost grew with a job's or a run's events:
--
-- event_log_job_time: a job's events by eventTime. "The job's last event at or before T" (a
-- job's page as of T, metastore/api/jobs.py JOB_SEEN_AT) is one probe a partition, where
-- the job index (by position) read every event of the job up to T, a heap row each: a run
-- a minute for a year is 1.5 million rows, past the read timeout.
--
-- event_log_run_ends: a run's terminal events alone. The fold asks the log each batch
-- whether each of its runs ended FAIL or ABORT (projections/common.py RUN_FACTS); by the run
-- index that read every event of the run, so a streaming run (Flink reports RUNNING every
-- minute) cost each batch that saw it one heap row more per event it ever had. Partial: an
-- index entry for a run's end only.
--
-- Both are created ON ONLY the partitioned log: instant, and invalid until every partition
-- has its own, which `metastore migrate` builds right after from these definitions,
-- CONCURRENTLY, one partition at a time (metastore/log_indexes.py): a CREATE INDEX of the
-- whole log would hold every partition's SHARE lock while a year of events is indexed, and
-- ingest would wait for it. A partition created later gets them with the table.

CREATE INDEX event_log_job_time ON ONLY event_log (job_namespace, job_name, event_time);
CREATE INDEX event_log_run_ends ON ONLY event_log (run_id, event_time, seq)
    WHERE event_type IN ('COMPLETE', 'FAIL', 'ABORT');
