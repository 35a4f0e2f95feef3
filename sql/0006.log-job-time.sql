-- depends: 0005.log-clock
-- A job's events by eventTime: "the job's last event at or before T" (a job's page as of T,
-- metastore/api/jobs.py JOB_SEEN_AT) is one index probe a log partition, where the job index
-- (by position) read every event of the job up to T, a heap row each: a run a minute for a
-- year is 1.5 million rows, past the read timeout.
--
-- Created ON ONLY the partitioned log: instant, and invalid until every partition has its
-- own index, which `metastore migrate` builds right after, CONCURRENTLY, one partition at a
-- time (metastore/log_indexes.py): a CREATE INDEX of the whole log would hold every
-- partition's SHARE lock while a year of events is indexed, and ingest would wait for it.
-- A partition created later gets its index with the table.

CREATE INDEX event_log_job_time ON ONLY event_log (job_namespace, job_name, event_time);
