"""The read-model tables: which projections exist, their DDL, and where each one stands.

Each projection owns its tables (DDL in sql/projections/<NAME>.sql, created in schema
`readmodel`) and a VERSION in code; `projection_state` records the version the stored
tables were built with. Rebuilds create the same DDL in a scratch schema (see replay.py).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
from psycopg import sql

from metastore.catalogs import NO_CATALOGS, CatalogMap
from metastore.migrations import sql_dir
from projections import column_lineage, datasets, history, jobs, lineage, namespaces, runs

LIVE_SCHEMA = "readmodel"
# Every projection, in the order a batch is folded into them.
PROJECTIONS: tuple[ModuleType, ...] = (
    namespaces,
    jobs,
    runs,
    datasets,
    lineage,
    column_lineage,
    history,
)
BY_NAME = {p.NAME: p for p in PROJECTIONS}
# Folded on a second connection, in a transaction of their own that commits just after the
# others' (so a reader never sees an edge before the job, run or dataset it names). They
# write without reading their tables first, and their tables take the larger part of the
# server's work: on their own connection it runs on the other core while this process
# folds the rest.
SIDE_PROJECTIONS = frozenset({lineage.NAME, column_lineage.NAME, history.NAME})
# Derived with the catalog map too (which names are one dataset's): a projector given
# another map rebuilds them, as for another version (projection_state.rules).
CATALOG_PROJECTIONS = frozenset({datasets.NAME})
# Tables an earlier version of a projection had and the current one has not: dropped when
# the projection's tables are created afresh or a rebuild of it is swapped in.
RETIRED_TABLES: dict[str, tuple[str, ...]] = {
    history.NAME: ("run_column_edges", "run_column_lineage")
}

REGISTER = """
INSERT INTO projection_state (name, version) VALUES (%s, %s)
ON CONFLICT (name) DO NOTHING
"""
RESET_STATE = """
UPDATE projection_state
SET version = %s, rules = %s, cursor_tx = '0', cursor_seq = 0, events_folded = 0,
    last_event_received_at = NULL, updated_at = now()
WHERE name = %s
"""
# Tables with nothing folded into them yet hold nothing any rules derived: they take the
# given ones without a rebuild.
ADOPT_RULES = """
UPDATE projection_state SET rules = %s, updated_at = now()
WHERE name = %s AND rules <> %s AND cursor_tx = '0' AND cursor_seq = 0
"""
EXISTING_TABLES = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relkind IN ('r', 'p')
"""


def rules_of(projection: ModuleType, catalogs: CatalogMap) -> str:
    """What `projection`'s tables are derived with besides its code ('' for nothing)."""
    return catalogs.fingerprint if projection.NAME in CATALOG_PROJECTIONS else ""


def adopt_rules(conn: psycopg.Connection[Any], catalogs: CatalogMap) -> None:
    """The projections with nothing folded yet take `catalogs` as what they are derived
    with (they hold nothing derived otherwise): no rebuild. In the caller's transaction."""
    for projection in PROJECTIONS:
        rules = rules_of(projection, catalogs)
        conn.execute(ADOPT_RULES, (rules, projection.NAME, rules))


def stored_tables(projection: ModuleType) -> tuple[str, ...]:
    """The tables of `projection` that may stand in a schema: its own and its retired ones."""
    return (*projection.TABLES, *RETIRED_TABLES.get(projection.NAME, ()))


def ddl_path(projection: ModuleType) -> Path:
    return sql_dir() / "projections" / f"{projection.NAME}.sql"


def create_tables(conn: psycopg.Connection[Any], projection: ModuleType, schema: str) -> None:
    """Runs the projection's DDL with `schema` first on the search path (caller commits)."""
    conn.execute(sql.SQL("SET LOCAL search_path TO {}, public").format(sql.Identifier(schema)))
    conn.execute(ddl_path(projection).read_text(encoding="utf-8"))
    conn.execute("SET LOCAL search_path TO DEFAULT")


def existing_tables(conn: psycopg.Connection[Any], schema: str) -> set[str]:
    return {row[0] for row in conn.execute(EXISTING_TABLES, (schema,))}


def create_readmodel_tables(
    conn: psycopg.Connection[Any], catalogs: CatalogMap = NO_CATALOGS
) -> list[str]:
    """Creates every projection's tables in `readmodel` when missing, and registers each.

    A projection whose tables are missing gets them fresh, with its cursor at the start of
    the log (and derived with `catalogs`). Tables that exist are left alone (an outdated
    version is rebuilt by the projector or `metastore replay`), but those with nothing
    folded yet take `catalogs`. Commits. Returns the names of the projections created.
    """
    created = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        have = existing_tables(conn, LIVE_SCHEMA)
        for projection in PROJECTIONS:
            if set(projection.TABLES) <= have:
                conn.execute(REGISTER, (projection.NAME, 0))  # tables of unknown version
                continue
            for table in stored_tables(projection):
                if table in have:
                    conn.execute(
                        sql.SQL("DROP TABLE {}.{}").format(
                            sql.Identifier(LIVE_SCHEMA), sql.Identifier(table)
                        )
                    )
            create_tables(conn, projection, LIVE_SCHEMA)
            conn.execute(REGISTER, (projection.NAME, projection.VERSION))
            conn.execute(
                RESET_STATE, (projection.VERSION, rules_of(projection, catalogs), projection.NAME)
            )
            created.append(projection.NAME)
        adopt_rules(conn, catalogs)
    return created


def stored_versions(conn: psycopg.Connection[Any]) -> dict[str, tuple[int, str]]:
    """Each projection's stored (version, rules)."""
    rows = conn.execute("SELECT name, version, rules FROM projection_state").fetchall()
    return {name: (version, rules) for name, version, rules in rows}


def outdated_projections(
    conn: psycopg.Connection[Any], catalogs: CatalogMap = NO_CATALOGS
) -> list[str]:
    """The projections whose stored tables were built by another version of their code,
    or derived with other rules than `catalogs` gives them."""
    stored = stored_versions(conn)
    return [p.NAME for p in PROJECTIONS if stored.get(p.NAME) != (p.VERSION, rules_of(p, catalogs))]


def rules_key(catalogs: CatalogMap) -> int:
    """The catalog map as 32 bits (of its fingerprint; 0 for none), the second key of the
    RULES_LOCK the active projector holds: `metastore replay` compares it with its own."""
    unsigned = int(catalogs.fingerprint[:8] or "0", 16)
    return unsigned - (1 << 32) if unsigned >= 1 << 31 else unsigned


def active_projector_rules(conn: psycopg.Connection[Any]) -> int | None:
    """The rules_key of the active projector's map (None: no projector active)."""
    row = conn.execute(ACTIVE_RULES, (RULES_LOCK,)).fetchone()
    if row is None:
        return None
    unsigned = int(row[0])
    return unsigned - (1 << 32) if unsigned >= 1 << 31 else unsigned


# Advisory locks show in pg_locks to every role; a two-key one as (classid, objid).
ACTIVE_RULES = """
SELECT objid::bigint FROM pg_locks
WHERE locktype = 'advisory' AND classid = %s::bigint::oid AND objsubid = 2 AND granted
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
LIMIT 1
"""

# Advisory lock keys (arbitrary constants, one per purpose).
SCHEMA_LOCK = 0x6D730001  # creating the read-model tables
# LEADER_LOCK = 0x6D730002 is metastore.store_health's: every pod reads who holds it.
FOLD_LOCK = 0x6D730003  # held by every transaction that folds into the live tables
REPLAY_LOCK = 0x6D730004  # one rebuild at a time
# With the catalog map's rules_key, held by the active projector (two-key form).
RULES_LOCK = 0x6D730005
