"""Narrower read models, measured on a loaded store before anyone builds them.

    python -m bench.run --scale --max-events 1000000 --keep   # leaves the store running
    python -m bench.scale_alternatives postgresql://...       # then this, against it

Each alternative is built from the live tables with CREATE TABLE AS (and its indexes) in
a scratch schema, sized with pg_total_relation_size after VACUUM, set against the tables
it would replace, then dropped. They hold the same information the readers use (what is
dropped is said beside each, and where it is found instead), so the difference is what a
design change would save at this size; docs in /work/coord/reports/i39-proposal.md.
Written against the read models of before its changes (column_lineage by pair, history's
run_column_lineage): on a store built since, the column alternatives fail and are said
so (they are what column_lineage is now).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import psycopg

# A dataset name as a 16-byte key: what `projections.common.dataset_id` (uuid5 of the
# name) gives; md5 has the same size, which is all this measures.
KEY = "md5({ns} || chr(1) || {name})::uuid"


def key(ns: str, name: str) -> str:
    return KEY.format(ns=ns, name=name)


# name: (tables it replaces, statements building it in schema scratch, what it drops)
ALTERNATIVES: dict[str, tuple[tuple[str, ...], str, str]] = {
    "name keys in run_edges": (
        ("run_edges",),
        f"""
CREATE TABLE scratch.run_edges AS
SELECT run_id, job_id, direction = 'output' AS output, {key("namespace", "name")} AS name_key,
       first_seen, last_seen, lifecycle_state, lifecycle_time FROM readmodel.run_edges;
ALTER TABLE scratch.run_edges ADD PRIMARY KEY (run_id, output, name_key);
CREATE INDEX ON scratch.run_edges (name_key, output);
CREATE INDEX ON scratch.run_edges (job_id, output);
""",
        "(namespace, name) as a 16-byte key (dataset_names gains the key, unique)",
    ),
    "run_edges without times (lineage_runs has them)": (
        ("run_edges",),
        f"""
CREATE TABLE scratch.run_edges AS
SELECT run_id, job_id, direction = 'output' AS output, {key("namespace", "name")} AS name_key,
       lifecycle_state FROM readmodel.run_edges;
ALTER TABLE scratch.run_edges ADD PRIMARY KEY (run_id, output, name_key);
CREATE INDEX ON scratch.run_edges (name_key, output);
CREATE INDEX ON scratch.run_edges (job_id, output);
""",
        "each edge's first/last seen (a run's edges span its events: lineage_runs' "
        "started_at/ended_at), lifecycle_time",
    ),
    "name keys in job_edges": (
        ("job_edges",),
        f"""
CREATE TABLE scratch.job_edges AS
SELECT job_id, direction = 'output' AS output, {key("namespace", "name")} AS name_key,
       source = 'static' AS static, first_seen, last_seen, lifecycle_state, lifecycle_time
FROM readmodel.job_edges;
ALTER TABLE scratch.job_edges ADD PRIMARY KEY (job_id, output, name_key, static);
CREATE INDEX ON scratch.job_edges (name_key, output);
""",
        "(namespace, name) as a key",
    ),
    "column_lineage by name keys, transformations interned": (
        ("column_lineage",),
        f"""
CREATE TABLE scratch.transformations AS
SELECT row_number() OVER ()::int AS id, t AS transformations
FROM (SELECT DISTINCT transformations AS t FROM readmodel.column_lineage) d;
CREATE TABLE scratch.column_lineage AS
SELECT {key("c.out_namespace", "c.out_name")} AS out_key, c.out_field,
       {key("c.in_namespace", "c.in_name")} AS in_key, c.in_field, t.id AS transformations,
       c.job_id, c.run_id, c.first_seen, c.last_seen, c.last_seq
FROM readmodel.column_lineage c
JOIN scratch.transformations t ON t.transformations = c.transformations;
ALTER TABLE scratch.column_lineage ADD PRIMARY KEY (out_key, out_field, in_key, in_field);
CREATE INDEX ON scratch.column_lineage (in_key, in_field);
""",
        "edge_key (a hash of the pair, computed when needed), job_ids (every job that "
        "reported the pair: run_column_lineage by output and job)",
    ),
    "column_lineage as one row per output and job": (
        ("column_lineage",),
        f"""
CREATE TABLE scratch.column_lineage AS
SELECT {key("out_namespace", "out_name")} AS out_key, job_id,
       jsonb_object_agg(out_field || chr(1) || in_namespace || chr(1) || in_name || chr(1)
                        || in_field, transformations) AS pairs,
       min(first_seen) AS first_seen, max(last_seen) AS last_seen
FROM readmodel.column_lineage GROUP BY 1, 2;
ALTER TABLE scratch.column_lineage ADD PRIMARY KEY (out_key, job_id);
CREATE TABLE scratch.column_inputs AS
SELECT DISTINCT {key("in_namespace", "in_name")} AS in_key,
       {key("out_namespace", "out_name")} AS out_key FROM readmodel.column_lineage;
CREATE INDEX ON scratch.column_inputs (in_key);
""",
        "per-pair times and latest run (the pairs of an output and job move together: one "
        "report writes them all); a reader walks pairs out of the object",
    ),
    "run_column_lineage by reference to distinct reports": (
        ("run_column_lineage",),
        f"""
CREATE TABLE scratch.reports AS
SELECT DISTINCT ON (h) h AS report, edges FROM (
    SELECT decode(md5(edges::text), 'hex') AS h, edges FROM readmodel.run_column_lineage) r;
ALTER TABLE scratch.reports ADD PRIMARY KEY (report);
CREATE TABLE scratch.run_column_lineage AS
SELECT {key("out_namespace", "out_name")} AS out_key, job_id, run_id,
       decode(md5(edges::text), 'hex') AS report, first_seen, last_seen, last_seq
FROM readmodel.run_column_lineage;
ALTER TABLE scratch.run_column_lineage ADD PRIMARY KEY (out_key, job_id, run_id);
""",
        "nothing: each run points at its report, stored once however many runs sent it",
    ),
    "schema_observations by name key": (
        ("schema_observations",),
        f"""
CREATE TABLE scratch.schema_observations AS
SELECT {key("namespace", "name")} AS name_key, seq, role, event_time, fields_hash, run_id
FROM readmodel.schema_observations;
CREATE UNIQUE INDEX ON scratch.schema_observations (name_key, event_time DESC, seq DESC, role);
CREATE INDEX ON scratch.schema_observations (run_id) WHERE run_id IS NOT NULL;
""",
        "(namespace, name) as a key",
    ),
    "schema_observations: only where the schema changed": (
        ("schema_observations",),
        f"""
CREATE TABLE scratch.schema_observations AS
SELECT {key("namespace", "name")} AS name_key, seq, event_time, fields_hash FROM (
    SELECT *, lag(fields_hash) OVER (PARTITION BY namespace, name ORDER BY event_time, seq)
        AS before FROM readmodel.schema_observations) o
WHERE before IS DISTINCT FROM fields_hash;
CREATE UNIQUE INDEX ON scratch.schema_observations (name_key, event_time DESC, seq DESC);
""",
        "observations that repeat the schema before them (the schema at T is the same), "
        "each observation's run and role (the run's events in the log say them)",
    ),
    "runs: facets over 8 KB left in the log": (
        ("runs",),
        """
CREATE TABLE scratch.runs AS SELECT * FROM readmodel.runs;
UPDATE scratch.runs SET facets = (
    SELECT coalesce(json_object_agg(key, CASE WHEN length(value::text) > 8192
        THEN json_build_object('_in_log', true) ELSE value END), '{}')
    FROM json_each(facets));
VACUUM FULL scratch.runs;
CREATE INDEX ON scratch.runs (job_id, first_seen DESC, id);
CREATE INDEX ON scratch.runs (parent_run_id) WHERE parent_run_id IS NOT NULL;
CREATE INDEX ON scratch.runs (root_run_id);
CREATE INDEX ON scratch.runs (state, first_seen DESC);
CREATE INDEX ON scratch.runs (first_seen DESC, id);
CREATE INDEX ON scratch.runs ((coalesce(started_at, first_seen)) DESC, id);
ALTER TABLE scratch.runs ADD PRIMARY KEY (id);
""",
        "a run facet over 8 KB (Spark's logical plan) is a marker; the API reads it from "
        "the run's events in the log (event_log_run index) when asked for",
    ),
    "datasets: no columnLineage and schema in facets, no current_fields": (
        ("datasets",),
        """
CREATE TABLE scratch.datasets AS SELECT * FROM readmodel.datasets;
UPDATE scratch.datasets SET facets = (facets::jsonb - 'columnLineage' - 'schema')::json,
    current_fields = NULL;
VACUUM FULL scratch.datasets;
ALTER TABLE scratch.datasets ADD PRIMARY KEY (id);
CREATE INDEX ON scratch.datasets (merged_into) WHERE merged_into IS NOT NULL;
""",
        "columnLineage (column_lineage holds it), schema and current_fields "
        "(dataset_versions holds each schema once)",
    ),
    "dataset_names: joined_by interned": (
        ("dataset_names",),
        """
CREATE TABLE scratch.rules AS
SELECT row_number() OVER ()::int AS id, r AS rule
FROM (SELECT DISTINCT (joined_by::jsonb - 'via') AS r FROM readmodel.dataset_names
      WHERE joined_by IS NOT NULL) d;
CREATE TABLE scratch.dataset_names AS
SELECT n.namespace, n.name, n.dataset_id, n.kind, n.symlink_type, n.first_seen, r.id AS rule
FROM readmodel.dataset_names n LEFT JOIN scratch.rules r ON r.rule = n.joined_by::jsonb - 'via';
ALTER TABLE scratch.dataset_names ADD PRIMARY KEY (namespace, name);
CREATE INDEX ON scratch.dataset_names (dataset_id);
CREATE INDEX ON scratch.dataset_names (lower(name) text_pattern_ops);
""",
        "joined_by's `via` (the other name of the same dataset: dataset_names by "
        "dataset_id) and the rule's text, once per rule",
    ),
}

SIZE = (
    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'"
    " AND (%s::text[] IS NULL OR c.relname = ANY(%s))"
)


def _size(conn: psycopg.Connection[Any], schema: str, tables: list[str] | None) -> int:
    row = conn.execute(SIZE, (schema, tables, tables)).fetchone()
    return int(row[0]) if row else 0


def measure(url: str, only: list[str] | None = None) -> list[tuple[str, int, int, float, str]]:
    """(alternative, bytes now, bytes after, seconds to build, what it drops) each."""
    out = []
    with psycopg.connect(url, autocommit=True) as conn:
        events = conn.execute("SELECT count(*) FROM event_log").fetchone()
        for name, (tables, build, drops) in ALTERNATIVES.items():
            if only and not any(o in name for o in only):
                continue
            conn.execute("DROP SCHEMA IF EXISTS scratch CASCADE")
            conn.execute("CREATE SCHEMA scratch")
            t0 = time.perf_counter()
            conn.execute("SET maintenance_work_mem = '256MB'")
            try:
                for statement in build.split(";\n"):  # (one at a time: VACUUM FULL among them)
                    if statement.strip():
                        conn.execute(statement)
            except (psycopg.errors.UndefinedColumn, psycopg.errors.UndefinedTable) as error:
                print(f"{name:62} not this store's shape: {error}".splitlines()[0], flush=True)
                continue
            conn.execute("VACUUM ANALYZE")
            seconds = time.perf_counter() - t0
            now = _size(conn, "readmodel", list(tables))
            after = _size(conn, "scratch", None)
            out.append((name, now, after, seconds, drops))
            n = events[0] if events else 1
            print(
                f"{name:62} {now / 2**20:9,.1f} MiB -> {after / 2**20:9,.1f} MiB "
                f"({now / n:7,.0f} -> {after / n:7,.0f} bytes/event) "
                f"saves {(now - after) / 2**20:9,.1f} MiB; built in {seconds:.0f} s",
                flush=True,
            )
        conn.execute("DROP SCHEMA IF EXISTS scratch CASCADE")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("url")
    parser.add_argument("--only", nargs="*", help="alternatives whose name contains these")
    args = parser.parse_args(argv)
    measure(args.url, args.only)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
