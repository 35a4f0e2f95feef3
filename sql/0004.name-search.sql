-- depends: 0003.projection-rules
-- pg_trgm, where the server has it (a contrib module; trusted, so the database's owner may
-- create it): the read models then index their names by trigrams, which finds a rare
-- substring in /search without reading every name. Without it search answers the same,
-- only slower on large stores, so its absence or a refusal is a notice, not a failure.

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
        CREATE EXTENSION IF NOT EXISTS pg_trgm;
    ELSE
        RAISE NOTICE 'pg_trgm is not available: /search reads every name on large stores';
    END IF;
EXCEPTION WHEN insufficient_privilege OR feature_not_supported OR undefined_file THEN
    RAISE NOTICE 'pg_trgm not created (%): /search reads every name on large stores', SQLERRM;
END
$$;
