-- depends: 0006.log-indexes
-- The log's index of a run's events by eventTime (issue 46).
--
-- The state of a run at T when it was running then (a job's latest run on its page as of T,
-- each job of a lineage graph as of T, metastore/api/asof.py RUN_AT_LOG) is its latest event
-- by T: by the run index (by position) that read every event of the run up to T, a heap row
-- each, so a streaming run (Flink reports RUNNING every minute) cost each as-of read of its
-- job one row more per minute it had run, half a million in a year. By this index it is
-- one probe a monthly partition. Not partial on the event type: a run's latest event of any
-- type is the question. Built a partition at a time by `metastore migrate`, as 0006's.

CREATE INDEX event_log_run_time ON ONLY event_log (run_id, event_time, seq)
    WHERE run_id IS NOT NULL;
