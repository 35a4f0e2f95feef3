"""The log's indexes that are built a partition at a time, so appends never wait for them.

A migration creates such an index ON ONLY the partitioned log (sql/0006.log-indexes.sql):
instant, and invalid until every partition has its own. `build`, which `metastore migrate`
runs after the migrations, creates each missing partition index CONCURRENTLY (appends go on
while it reads the partition) and attaches it; once all are attached PostgreSQL marks the
log's index valid. A CREATE INDEX of the partitioned log itself would hold every partition's
SHARE lock for the whole build, and ingest would wait for minutes on a large log.

A partition created later (event_log_ensure_partitions) gets the index with the table.
`build` is idempotent: after an interrupted build it drops the half-built index it left
(CONCURRENTLY leaves an invalid one behind) and builds it again. Until it finishes, a read
still answers: the planner uses each partition's own index where it has one.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from psycopg import sql

log = logging.getLogger("metastore.log_indexes")

# The log's indexes built partition by partition: name -> what each partition's indexes (as
# its migration defines it: ATTACH refuses a partition index that differs).
BY_PARTITION = {
    "event_log_job_time": "(job_namespace, job_name, event_time)",
    "event_log_run_ends": (
        "(run_id, event_time, seq) WHERE event_type IN ('COMPLETE', 'FAIL', 'ABORT')"
    ),
}

# The log's partitions without an index attached to the partitioned index %s, and the name
# their own index gets (`<partition>_<index without its event_log_ prefix>`).
MISSING = """
SELECT n.nspname, c.relname
FROM pg_inherits p
JOIN pg_class c ON c.oid = p.inhrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE p.inhparent = 'event_log'::regclass
  AND NOT EXISTS (
      SELECT 1 FROM pg_inherits i JOIN pg_index x ON x.indexrelid = i.inhrelid
      WHERE i.inhparent = %s::regclass AND x.indrelid = p.inhrelid)
ORDER BY c.relname
"""
INVALID = """
SELECT NOT x.indisvalid FROM pg_index x
WHERE x.indexrelid = to_regclass(format('%%I.%%I', %s::text, %s::text))
"""


def build(conn: psycopg.Connection[Any]) -> list[str]:
    """Builds and attaches every partition index BY_PARTITION's indexes lack; returns their
    names. `conn` must be in autocommit (CONCURRENTLY runs outside a transaction) and its
    role own the log."""
    assert conn.autocommit, "CREATE INDEX CONCURRENTLY runs outside a transaction"
    built: list[str] = []
    for parent, definition in BY_PARTITION.items():
        (qualified,) = conn.execute("SELECT to_regclass(%s)::text", (parent,)).fetchone() or (None,)
        if qualified is None:
            continue  # (its migration not applied: `metastore migrate` applies it first)
        for schema, partition in conn.execute(MISSING, (parent,)).fetchall():
            name = f"{partition}_{parent.removeprefix('event_log_')}"
            index = sql.Identifier(schema, name)
            if conn.execute(INVALID, (schema, name)).fetchone() == (True,):
                log.info("dropping a log index an interrupted build left", extra={"index": name})
                conn.execute(sql.SQL("DROP INDEX CONCURRENTLY {}").format(index))
            log.info("building a log index", extra={"index": name, "partition": partition})
            conn.execute(
                sql.SQL("CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON {} {}").format(
                    sql.Identifier(name), sql.Identifier(schema, partition), sql.SQL(definition)
                )
            )
            conn.execute(
                # (the name as PostgreSQL prints it: quoted and qualified where needed)
                sql.SQL("ALTER INDEX {} ATTACH PARTITION {}").format(sql.SQL(qualified), index)
            )
            built.append(name)
    return built
