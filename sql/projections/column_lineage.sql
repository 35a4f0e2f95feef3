-- projection: column_lineage. From the `columnLineage` output-dataset facet:
-- output field <- input field, with the transformation when present.
CREATE TABLE column_lineage (
    out_namespace   text        NOT NULL,
    out_name        text        NOT NULL,
    out_field       text        NOT NULL,
    in_namespace    text        NOT NULL,
    in_name         text        NOT NULL,
    in_field        text        NOT NULL,
    transformations jsonb       NOT NULL DEFAULT '[]',  -- [{type, subtype, description, masking}]
    job_id          uuid,
    run_id          uuid,                               -- the latest run that reported it
    job_ids         uuid[]      NOT NULL DEFAULT '{}',  -- every job that reported it
    first_seen      timestamptz NOT NULL,
    last_seen       timestamptz NOT NULL,
    last_seq        bigint      NOT NULL,   -- seq of the latest report (ties in last_seen)
    -- a hash of the six names (projections.common.edge_key), also the keys of
    -- run_column_lineage.edges; the key: the six names (up to 1,024 bytes each for the
    -- names, 512 for the fields: projections.decode) do not fit one index entry
    edge_key        uuid        PRIMARY KEY
);
CREATE INDEX column_lineage_output ON column_lineage (out_namespace, out_name, out_field);
CREATE INDEX column_lineage_input ON column_lineage (in_namespace, in_name, in_field);
