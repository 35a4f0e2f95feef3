-- depends: 0004.name-search
-- The log's order without the server's transaction counter surviving a move.
--
-- A row's `tx` was its writer's transaction id, and readers read below the oldest running
-- one. A dump restored into a new server (a major upgrade by dump and restore, logical
-- replication to a new cluster, a managed-PostgreSQL migration) starts that counter far
-- behind the restored `tx` values: new rows sorted before the restored cursors and were
-- never read. Now `tx` is the transaction id plus the store's `xid_offset`, kept in the
-- database (so a dump carries it), and `event_log_catch_up()` raises the offset whenever
-- the server's counter is behind the log, so new rows always sort after restored ones.
-- Existing rows keep their values (offset 0 until a move).
--
-- No skip across a raise: an appender reads the offset under an ACCESS SHARE lock of
-- `event_log_clock` held until it commits, and a raise takes ACCESS EXCLUSIVE, so every row
-- keyed by the old offset has committed before any reader can see the new one. The api's
-- and the projector's roles read the table (metastore/privileges.py grants it).

CREATE TABLE event_log_clock (
    single     boolean     PRIMARY KEY DEFAULT true CHECK (single),
    xid_offset bigint      NOT NULL DEFAULT 0 CHECK (xid_offset >= 0),
    raised_at  timestamptz
);
INSERT INTO event_log_clock DEFAULT VALUES;

-- The `tx` of a row this transaction appends, for inserts that do not name it (the
-- service's append reads the offset in its own statement, metastore/eventlog.py NEXT_TX, as
-- readers do for their horizon, HORIZON). VOLATILE: its query takes the lock and then a
-- snapshot of its own, so it sees a raise that committed while the statement waited.
CREATE FUNCTION event_log_next_tx() RETURNS xid8
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
    SELECT (pg_current_xact_id()::text::bigint + xid_offset)::text::xid8 FROM event_log_clock
$$;

ALTER TABLE event_log ALTER COLUMN tx SET DEFAULT event_log_next_tx();

-- Raises the offset when the server's next transaction id would key a row at or before
-- the log's last position or a projection's cursor (a restore into a new server); returns
-- by how much (0 almost always: then it took no lock). Called by migrate, and by the api,
-- the projector and replay before they read or append. Any role may call it: it only ever
-- moves the order forward, where it has to.
CREATE FUNCTION event_log_catch_up() RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    last_tx bigint;
    old_offset bigint;
    oldest_running bigint;
BEGIN
    FOR attempt IN 1..2 LOOP
        SELECT greatest(
                   (SELECT tx::text::bigint FROM event_log ORDER BY tx DESC LIMIT 1),
                   (SELECT max(cursor_tx::text::bigint) FROM projection_state)),
               c.xid_offset
        INTO last_tx, old_offset
        FROM event_log_clock c;
        -- Every transaction id in use here is below the snapshot's xmax, so keys at or
        -- past xmax + offset can only have come from another server.
        IF last_tx IS NULL
           OR last_tx < pg_snapshot_xmax(pg_current_snapshot())::text::bigint + old_offset THEN
            RETURN 0;
        END IF;
        IF attempt = 1 THEN
            -- Waits for appenders keyed by the old offset; the next pass sees their rows.
            LOCK TABLE event_log_clock IN ACCESS EXCLUSIVE MODE;
        END IF;
    END LOOP;
    -- Every transaction running now or later has an id at or past this snapshot's xmin.
    oldest_running := pg_snapshot_xmin(pg_current_snapshot())::text::bigint;
    UPDATE event_log_clock
    SET xid_offset = greatest(xid_offset, last_tx + 1 - oldest_running), raised_at = now();
    RAISE NOTICE 'event log order moved past position %: this server''s transaction counter was behind the log (a restore or a move to a new server)', last_tx;
    RETURN last_tx + 1 - oldest_running - old_offset;
END;
$$;

-- The service's own role reads the offset in its appends and reads (see 0001).
CREATE OR REPLACE FUNCTION event_log_grant_writer(role_name text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('REVOKE ALL ON event_log, event_digests FROM %I', role_name);
    EXECUTE format('GRANT SELECT, INSERT ON event_log, event_digests TO %I', role_name);
    EXECUTE format('GRANT SELECT ON event_log_clock TO %I', role_name);
    EXECUTE format('GRANT EXECUTE ON FUNCTION event_log_ensure_partitions(integer) TO %I',
                   role_name);
END;
$$;
