-- projection: namespaces. Every namespace seen, for jobs and for datasets.
CREATE TABLE namespaces (
    name        text        PRIMARY KEY,
    has_jobs    boolean     NOT NULL DEFAULT false,
    has_datasets boolean    NOT NULL DEFAULT false,
    first_seen  timestamptz NOT NULL,   -- by eventTime
    last_seen   timestamptz NOT NULL
);
