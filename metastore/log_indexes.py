"""The log's indexes that are built a partition at a time, so appends never wait for them.

A migration creates such an index ON ONLY the partitioned log (sql/0006.log-indexes.sql):
instant, and invalid until every partition has its own. `build`, which `metastore migrate`
runs after the migrations, creates each missing partition index CONCURRENTLY (appends go on
while it reads the partition) and attaches it; once all are attached PostgreSQL marks the
log's index valid. A CREATE INDEX of the partitioned log itself would hold every partition's
SHARE lock for the whole build, and ingest would wait for minutes on a large log.

Each partition's index is made from the log's own (its columns, method and predicate as
PostgreSQL prints them), so a migration's definition is the only one: ATTACH refuses a
partition index that differs. A partition created later (event_log_ensure_partitions) gets
the indexes with the table. `build` is idempotent: after an interrupted build it drops the
half-built index it left (CONCURRENTLY leaves an invalid one behind) and builds it again.
Until it finishes, a read still answers: the planner uses each partition's own index where
it has one.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from psycopg import sql

log = logging.getLogger("metastore.log_indexes")

# Each index of the log that a partition lacks, with that partition: the log's index as
# PostgreSQL names it (qualified where needed), whether unique, what follows ON in its
# definition (`USING btree (...) [WHERE ...]`), the partition's schema and name, and the
# name its own index gets (`<partition>_<the log's index without its event_log_ prefix>`).
MISSING = """
SELECT x.indexrelid::regclass::text, x.indisunique,
       substring(pg_get_indexdef(x.indexrelid) FROM ' USING .*$'),
       n.nspname, c.relname,
       c.relname || '_' || regexp_replace(ic.relname, '^event_log_', '')
FROM pg_index x
JOIN pg_class ic ON ic.oid = x.indexrelid
JOIN pg_inherits p ON p.inhparent = x.indrelid
JOIN pg_class c ON c.oid = p.inhrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE x.indrelid = 'event_log'::regclass
  AND NOT EXISTS (
      SELECT 1 FROM pg_inherits i JOIN pg_index xi ON xi.indexrelid = i.inhrelid
      WHERE i.inhparent = x.indexrelid AND xi.indrelid = p.inhrelid)
ORDER BY ic.relname, c.relname
"""
INVALID = """
SELECT NOT x.indisvalid FROM pg_index x
WHERE x.indexrelid = to_regclass(format('%%I.%%I', %s::text, %s::text))
"""


def build(conn: psycopg.Connection[Any]) -> list[str]:
    """Builds and attaches every partition index the log's indexes lack; returns their
    names. `conn` must be in autocommit (CONCURRENTLY runs outside a transaction) and its
    role own the log."""
    assert conn.autocommit, "CREATE INDEX CONCURRENTLY runs outside a transaction"
    built: list[str] = []
    for parent, unique, using, schema, partition, name in conn.execute(MISSING).fetchall():
        index = sql.Identifier(schema, name)
        if conn.execute(INVALID, (schema, name)).fetchone() == (True,):
            log.info("dropping a log index an interrupted build left", extra={"index": name})
            conn.execute(sql.SQL("DROP INDEX CONCURRENTLY {}").format(index))
        log.info("building a log index", extra={"index": name, "partition": partition})
        conn.execute(
            sql.SQL("CREATE {}INDEX CONCURRENTLY IF NOT EXISTS {} ON {} {}").format(
                sql.SQL("UNIQUE " if unique else ""),
                sql.Identifier(name),
                sql.Identifier(schema, partition),
                sql.SQL(using),  # (PostgreSQL's own text of the log's index)
            )
        )
        conn.execute(
            # (the log's index as PostgreSQL prints it: quoted and qualified where needed)
            sql.SQL("ALTER INDEX {} ATTACH PARTITION {}").format(sql.SQL(parent), index)
        )
        built.append(name)
    return built
