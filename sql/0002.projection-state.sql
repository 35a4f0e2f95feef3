-- depends: 0001.event-log
-- Where each projection stands in the log, and the events it could not fold.
--
-- The read-model tables themselves live in the `readmodel` schema and are created by the
-- projector from sql/projections/*.sql (each projection has a version in code, and replays
-- rebuild them), so migrations only hold the log and this bookkeeping.

CREATE SCHEMA readmodel;

CREATE TABLE projection_state (
    name           text        PRIMARY KEY,
    version        integer     NOT NULL,
    cursor_tx      xid8        NOT NULL DEFAULT '0',
    cursor_seq     bigint      NOT NULL DEFAULT 0,
    events_folded  bigint      NOT NULL DEFAULT 0,
    last_event_received_at timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE dead_letters (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    projection  text        NOT NULL,
    seq         bigint      NOT NULL,
    tx          xid8        NOT NULL,
    error       text        NOT NULL,
    failed_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dead_letters_projection ON dead_letters (projection, id);
