-- The event log: every accepted OpenLineage event, as received, append-only.
--
-- Partitioned by month of `received_at` (the append time, so inserts always hit the newest
-- partition); `event_log_ensure_partitions` creates months ahead, and the DEFAULT partition
-- catches anything else so no insert can fail for lack of a partition.
--
-- `event` is json, not jsonb: the text exactly as received (validated, not converted), which
-- PostgreSQL stores faster, reads back as text several times faster and keeps in less space
-- (docs/PERFORMANCE.md, `python -m bench.log_column`). Nothing queries inside it: the
-- projector and the export feed read the text.
--
-- Readers never page by `seq` alone: concurrent appends commit out of `seq` order. Each row
-- carries the id of the transaction that wrote it (`tx`), and readers only read rows whose
-- transaction is older than the oldest one still running (see metastore/eventlog.py).

CREATE TABLE event_log (
    seq            bigint      GENERATED ALWAYS AS IDENTITY,
    tx             xid8        NOT NULL DEFAULT pg_current_xact_id(),
    received_at    timestamptz NOT NULL DEFAULT now(),
    event_time     timestamptz NOT NULL,
    kind           text        NOT NULL CHECK (kind IN ('run', 'job', 'dataset')),
    event_type     text,
    run_id         uuid,
    job_namespace  text,
    job_name       text,
    producer       text        NOT NULL,
    digest         bytea       NOT NULL,
    size_bytes     integer     NOT NULL,
    event          json        NOT NULL,
    PRIMARY KEY (seq, received_at)
) PARTITION BY RANGE (received_at);

CREATE INDEX event_log_position ON event_log (tx, seq);
CREATE INDEX event_log_run ON event_log (run_id, tx, seq) WHERE run_id IS NOT NULL;
CREATE INDEX event_log_job ON event_log (job_namespace, job_name, tx, seq);

CREATE TABLE event_log_default PARTITION OF event_log DEFAULT;

-- Idempotency: one row per distinct event (sha256 of its canonical JSON). Not partitioned,
-- because uniqueness on a partitioned table would have to include the partition key.
CREATE TABLE event_digests (
    digest bytea PRIMARY KEY
);

CREATE FUNCTION event_log_reject_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the event log is append-only: % on % is not allowed', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER event_log_immutable BEFORE UPDATE OR DELETE ON event_log
    FOR EACH ROW EXECUTE FUNCTION event_log_reject_change();
CREATE TRIGGER event_log_no_truncate BEFORE TRUNCATE ON event_log
    FOR EACH STATEMENT EXECUTE FUNCTION event_log_reject_change();
CREATE TRIGGER event_log_no_truncate BEFORE TRUNCATE ON event_log_default
    FOR EACH STATEMENT EXECUTE FUNCTION event_log_reject_change();
CREATE TRIGGER event_digests_immutable BEFORE UPDATE OR DELETE ON event_digests
    FOR EACH ROW EXECUTE FUNCTION event_log_reject_change();
CREATE TRIGGER event_digests_no_truncate BEFORE TRUNCATE ON event_digests
    FOR EACH STATEMENT EXECUTE FUNCTION event_log_reject_change();

-- Creates the monthly partitions from this month to `months_ahead` months ahead (idempotent).
-- Row triggers are inherited by new partitions; TRUNCATE triggers are not, so add them.
-- A month whose rows already sit in the DEFAULT partition (maintenance lapsed) is skipped:
-- creating it would fail, and the rows cannot move (the log is immutable); they stay valid.
-- SECURITY DEFINER: the service's own role (INSERT and SELECT only, see below) calls this
-- at start and daily, and creating a partition needs the owner's rights.
CREATE FUNCTION event_log_ensure_partitions(months_ahead integer DEFAULT 3) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    month_start date;
    part_name text;
    created integer := 0;
BEGIN
    IF months_ahead IS NULL OR months_ahead < 0 OR months_ahead > 120 THEN
        RAISE EXCEPTION 'months_ahead must be between 0 and 120, not %', months_ahead;
    END IF;
    -- Two API processes starting together would race to create the same partition.
    PERFORM pg_advisory_xact_lock(hashtext('event_log_ensure_partitions'));
    FOR i IN 0..months_ahead LOOP
        month_start := (date_trunc('month', now() AT TIME ZONE 'UTC') + make_interval(months => i))::date;
        part_name := format('event_log_%s', to_char(month_start, 'YYYY_MM'));
        IF to_regclass(part_name) IS NULL THEN
            IF EXISTS (SELECT 1 FROM event_log_default
                       WHERE received_at >= month_start::timestamp AT TIME ZONE 'UTC'
                         AND received_at < (month_start + interval '1 month')::timestamp AT TIME ZONE 'UTC') THEN
                RAISE WARNING 'event_log: % not created, the default partition holds its rows', part_name;
                CONTINUE;
            END IF;
            EXECUTE format(
                'CREATE TABLE %I PARTITION OF event_log FOR VALUES FROM (%L) TO (%L)',
                part_name,
                month_start::timestamp AT TIME ZONE 'UTC',
                (month_start + interval '1 month')::timestamp AT TIME ZONE 'UTC');
            EXECUTE format(
                'CREATE TRIGGER event_log_no_truncate BEFORE TRUNCATE ON %I '
                'FOR EACH STATEMENT EXECUTE FUNCTION event_log_reject_change()', part_name);
            created := created + 1;
        END IF;
    END LOOP;
    RETURN created;
END;
$$;
REVOKE ALL ON FUNCTION event_log_ensure_partitions(integer) FROM PUBLIC;

DO $$ BEGIN PERFORM event_log_ensure_partitions(3); END $$;

-- Grants the service's own role (when a deployment has one) only what it needs: the log
-- is INSERT and SELECT, never UPDATE or DELETE.
CREATE FUNCTION event_log_grant_writer(role_name text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('REVOKE ALL ON event_log, event_digests FROM %I', role_name);
    EXECUTE format('GRANT SELECT, INSERT ON event_log, event_digests TO %I', role_name);
    EXECUTE format('GRANT EXECUTE ON FUNCTION event_log_ensure_partitions(integer) TO %I',
                   role_name);
END;
$$;
