-- projection: datasets. A dataset has its own stable id; names point at it.
--
-- (namespace, name) is a lookup key, never the identity: the name an event uses, each
-- identifier of its `symlinks` facet and its metastore's name by a catalog rule (the
-- catalog map, or the dataset's `catalog` facet) are names of one dataset. Merging two
-- datasets (the Trino and the Spark name of one table) is `UPDATE dataset_names SET
-- dataset_id` plus `merged_into` on the absorbed row; lineage and column-lineage tables
-- are keyed by names, so they follow without a rewrite.
-- fillfactor: each batch that names a dataset updates it (last_seen); room left on each page
-- keeps those updates HOT, no new index entries (dataset_versions too: last_event_time)
CREATE TABLE datasets (
    id              uuid        PRIMARY KEY,   -- uuid5 of the first name it was seen under
    namespace       text        NOT NULL,      -- its display name: its most table-like
    name            text        NOT NULL,      -- name (least display_key)
    -- json, not jsonb: kept as the fold wrote it (each facet as sent), so a facet sent
    -- again compares equal byte for byte after a load, and PostgreSQL only checks it is
    -- JSON instead of parsing it into jsonb (projections.common, "writing rows")
    facets          json        NOT NULL DEFAULT '{}',
    facet_times     jsonb       NOT NULL DEFAULT '{}',
    first_seen      timestamptz NOT NULL,
    last_seen       timestamptz NOT NULL,
    merged_into     uuid,                      -- set when this id was absorbed by another
    -- log position (tx, seq) of the first event that named it: on a merge, the dataset
    -- first seen in the log survives (so a replay picks the same id)
    first_tx        bigint      NOT NULL,
    first_seq       bigint      NOT NULL,
    -- the display name's [rank, first_seen µs, namespace, name]; rank 0: a symlink of type
    -- TABLE or a metastore's name a catalog rule derived, 1: a name an event used, 2:
    -- another (projections.datasets.display_key)
    display_key     jsonb,
    -- its home: its least display_key among the names an event used (kind emitted or
    -- symlink); no reader uses it since a dataset counts in each namespace it has a name in
    home_namespace  text,
    home_name       text,
    home_key        jsonb
) WITH (fillfactor = 80);
CREATE INDEX datasets_merged_into ON datasets (merged_into) WHERE merged_into IS NOT NULL;
-- the live datasets (/datasets' total): counted by an index-only scan, not from the wide rows
CREATE INDEX datasets_live ON datasets (id) WHERE merged_into IS NULL;
-- the live datasets by display name: /datasets' pages, unfiltered
CREATE INDEX datasets_display ON datasets (namespace, name) WHERE merged_into IS NULL;

CREATE TABLE dataset_names (
    namespace       text        NOT NULL,
    name            text        NOT NULL,
    dataset_id      uuid        NOT NULL,
    -- 'emitted' (an event used it) | 'symlink' (a symlinks facet named it) | 'catalog'
    -- (neither: a catalog rule derived it): see datasets.KIND_RANK
    kind            text        NOT NULL,
    symlink_type    text,                      -- the symlinks facet's `type` (TABLE, ...)
    first_seen      timestamptz NOT NULL,
    -- the catalog rule that joined it (of any kind), a JSON object {rule: map|facet, entry
    -- (the map entry's index), engine, catalog, metastore, role: engine|metastore, via: the
    -- other name {namespace, name}}; json: compared as the fold wrote it
    joined_by       json,
    PRIMARY KEY (namespace, name)
);
CREATE INDEX dataset_names_dataset ON dataset_names (dataset_id);
-- a namespace's datasets, each once (/namespaces' counts, /datasets?namespace= totals):
-- distinct in index order, no sort, no heap
CREATE INDEX dataset_names_namespace_dataset ON dataset_names (namespace, dataset_id);
CREATE INDEX dataset_names_name ON dataset_names (lower(name) text_pattern_ops);

-- The fields of each dataset's current schema (its version last seen), top level, one row
-- a field name (the first of a name given twice): /search matches `q` on their names and
-- descriptions through these indexes instead of reading schemas' JSON. Rewritten for the
-- datasets a batch's versions touch.
CREATE TABLE dataset_fields (
    dataset_id      uuid        NOT NULL,
    name            text        NOT NULL,
    description     text
);
CREATE INDEX dataset_fields_dataset ON dataset_fields (dataset_id);
-- (a field named or starting with `q` is a range of it, read in /search's order)
CREATE INDEX dataset_fields_name ON dataset_fields (lower(name) text_pattern_ops, dataset_id);
-- (the fields with a description in that order: a word in descriptions alone is probed for
-- among them, not among every field whose name sorts before its first hit)
CREATE INDEX dataset_fields_described ON dataset_fields (lower(name) text_pattern_ops, dataset_id)
    WHERE description IS NOT NULL;

-- substrings of names and fields (/search): by trigram where pg_trgm is installed
-- (migration 0004)
DO $$
DECLARE trgm_schema name := (SELECT n.nspname FROM pg_extension e
                             JOIN pg_namespace n ON n.oid = e.extnamespace
                             WHERE e.extname = 'pg_trgm');
BEGIN
    IF trgm_schema IS NOT NULL THEN
        EXECUTE format('CREATE INDEX dataset_names_name_trigrams ON dataset_names USING gin (lower(name) %I.gin_trgm_ops)',
                       trgm_schema);
        EXECUTE format('CREATE INDEX dataset_fields_name_trgm ON dataset_fields USING gin (lower(name) %I.gin_trgm_ops)',
                       trgm_schema);
        -- (the described fields alone: a GIN index holds a NULL too, and most fields have no
        -- description, so each of their inserts cost the fold an entry no search reads)
        EXECUTE format('CREATE INDEX dataset_fields_description_trgm ON dataset_fields USING gin (lower(description) %I.gin_trgm_ops) WHERE description IS NOT NULL',
                       trgm_schema);
    END IF;
END
$$;

-- One row per distinct schema (by hash of its fields) a dataset had, at the first
-- (eventTime, seq) it was seen with it, and the last. Version numbers are the order by
-- (event_time, seq); the current schema is the one last seen. Keeping first and last per
-- distinct schema (not every change) makes the history independent of arrival order: a
-- schema that comes back after a change keeps its first row and moves its last_seen.
CREATE TABLE dataset_versions (
    dataset_id      uuid        NOT NULL,
    event_time      timestamptz NOT NULL,
    seq             bigint      NOT NULL,
    fields_hash     bytea       NOT NULL,
    fields          jsonb       NOT NULL,
    run_id          uuid,                      -- the run whose event carried it first
    job_id          uuid,
    last_event_time timestamptz NOT NULL,
    last_seq        bigint      NOT NULL,
    PRIMARY KEY (dataset_id, fields_hash)
) WITH (fillfactor = 70);
CREATE INDEX dataset_versions_order ON dataset_versions (dataset_id, event_time, seq);

-- Each run's sightings of a schema as a version, per name (projections/dataset_writes.py):
-- the first and last event of the run (run_id 0: a DatasetEvent or JobEvent) that carried
-- it, and whether the run ended FAIL or ABORT (then they make no version). A run's end
-- known late (its FAIL folded after its COMPLETE) settles dataset_versions from these.
CREATE TABLE version_sightings (
    namespace   text        NOT NULL,
    name        text        NOT NULL,
    fields_hash bytea       NOT NULL,
    run_id      uuid        NOT NULL,
    job_id      uuid,
    first_time  timestamptz NOT NULL,
    first_seq   bigint      NOT NULL,
    last_time   timestamptz NOT NULL,
    last_seq    bigint      NOT NULL,
    failed      boolean     NOT NULL,
    PRIMARY KEY (namespace, name, fields_hash, run_id)
);
CREATE INDEX version_sightings_run ON version_sightings (run_id);
