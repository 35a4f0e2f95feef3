"""Schema migrations (yoyo, forward-only) and the check that the schema is current."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import psycopg
from yoyo import get_backend, read_migrations

log = logging.getLogger(__name__)

MIGRATION_TABLE = "_yoyo_migration"
LOCK_TIMEOUT_S = 300


class SchemaBehind(RuntimeError):
    """The database lacks migrations this code needs."""


def sql_dir() -> Path:
    """The folder of the migrations: `sql/` in a checkout, `metastore/sql` in a wheel."""
    checkout = Path(__file__).resolve().parent.parent / "sql"
    if (checkout / "0001.event-log.sql").exists():
        return checkout
    # In a wheel, sql/ is installed as metastore/sql (see pyproject's package-dir).
    return Path(__file__).resolve().parent / "sql"


def migration_ids() -> list[str]:
    """The ids of all migrations this code knows, in order."""
    return sorted(p.stem for p in sql_dir().glob("*.sql") if not p.stem.endswith(".rollback"))


def _yoyo_url(database_url: str) -> str:
    # yoyo picks its driver from the scheme; we use psycopg 3 everywhere.
    for prefix in ("postgresql://", "postgres://"):
        if database_url.startswith(prefix):
            return "postgresql+psycopg://" + database_url[len(prefix) :]
    return database_url


def apply_migrations(database_url: str) -> list[str]:
    """Applies the pending migrations under yoyo's lock; returns the ids applied.

    Safe to run twice and from two pods at once: the second waits for the lock, then finds
    nothing to do.
    """
    backend = get_backend(_yoyo_url(database_url), migration_table=MIGRATION_TABLE)
    migrations = read_migrations(str(sql_dir()))
    with backend.lock(timeout=LOCK_TIMEOUT_S):
        pending = backend.to_apply(migrations)
        ids = [m.id for m in pending]
        for mid in ids:
            log.info("applying migration", extra={"migration": mid})
        backend.apply_migrations(pending)
    return ids


def missing_migrations(conn: psycopg.Connection[Any]) -> list[str]:
    """The migrations this code knows that the database has not applied."""
    known = migration_ids()
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (MIGRATION_TABLE,)).fetchone()
    if not exists or not exists[0]:
        return known
    applied = {row[0] for row in conn.execute(f"SELECT migration_id FROM {MIGRATION_TABLE}")}
    return [mid for mid in known if mid not in applied]


def require_current_schema(database_url: str) -> None:
    """Raises SchemaBehind, saying to run `metastore migrate`, when migrations are missing."""
    with psycopg.connect(database_url, connect_timeout=10) as conn:
        missing = missing_migrations(conn)
    if missing:
        raise SchemaBehind(
            f"the database schema is behind this version ({len(missing)} migration(s) "
            f"missing, first {missing[0]}); run `metastore migrate`"
        )
