-- depends: 0002.projection-state
-- The rules a projection's stored tables were derived with, besides its code: for
-- `datasets`, the fingerprint of the catalog map (METASTORE_CATALOGS_FILE; '' for none).
-- A projector started with other rules rebuilds the projection, as for another version.

ALTER TABLE projection_state ADD COLUMN rules text NOT NULL DEFAULT '';
