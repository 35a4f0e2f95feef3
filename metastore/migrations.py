"""Schema migrations (yoyo, forward-only) and the check that the schema is current.

`metastore migrate` says why when it cannot work: it checks its role's privileges before
anything else (metastore/privileges.py), serialises migrators on a session advisory lock
(released by PostgreSQL when a migrator dies, unlike yoyo's lock table, which keeps a
killed migrator's row) and logs every LOCK_LOG_EVERY_S who holds it, and names the
migration that failed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
from yoyo import get_backend, read_migrations

from metastore import log_indexes, login
from metastore.eventlog import catch_up_order
from metastore.exit import Exit, one_line
from metastore.privileges import check_migrator, grant_process_roles

log = logging.getLogger(__name__)
startup_log = logging.getLogger("metastore.startup")

MIGRATION_TABLE = "_yoyo_migration"
# Beside projections/schema.py's advisory lock keys (0x6D730001-4).
MIGRATION_LOCK = 0x6D730005
LOCK_TIMEOUT_S = 300.0
LOCK_LOG_EVERY_S = 10.0
LOCK_POLL_S = 0.5
CONNECT_TIMEOUT_S = 10
# Who holds MIGRATION_LOCK (a bigint key is classid 0 and objid the key, objsubid 1).
LOCK_HOLDER = """
SELECT a.pid, a.usename, a.application_name, host(a.client_addr), a.backend_start, a.state
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0 AND l.objid = %s::oid
  AND l.objsubid = 1
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""
# The start-up wait of `api` and `projector` for a database that cannot be reached yet.
WAIT_RETRY_S = 1.0
WAIT_LOG_EVERY_S = 5.0
WAIT_CONNECT_TIMEOUT_S = 3


class SchemaBehind(RuntimeError):
    """The database lacks migrations this code needs."""


class MigrationFailed(Exit):
    """A migration or the wait for the migration lock failed (one line says which)."""


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


def apply_migrations(
    database_url: str, *, api_role: str | None = None, projector_role: str | None = None
) -> list[str]:
    """Applies the pending migrations under MIGRATION_LOCK; returns the ids applied.

    Raises MissingPrivilege (or RoleMistake) first when the role cannot migrate. Safe to run
    twice and from two pods at once: the second waits for the lock, then finds nothing to
    do. Then builds the log's partition indexes its migrations left to build
    (metastore/log_indexes.py), grants `api_role` and `projector_role` (when given) what
    their processes need, and hands the read models to `projector_role` (a store made
    before it was set).
    """
    with (
        psycopg.connect(
            database_url,
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT_S,
            fallback_application_name="metastore migrate",
        ) as conn,
    ):
        check_migrator(conn, MIGRATION_TABLE, api_role=api_role, projector_role=projector_role)
        with migration_lock(conn):
            backend = get_backend(_yoyo_url(database_url), migration_table=MIGRATION_TABLE)
            try:
                pending = backend.to_apply(read_migrations(str(sql_dir())))
                for migration in pending:
                    log.info("applying migration", extra={"migration": migration.id})
                    try:
                        backend.apply_one(migration)
                    except psycopg.Error as exc:
                        raise MigrationFailed(
                            f"migration {migration.id} failed and was rolled back: {one_line(exc)}"
                        ) from None
            finally:
                backend.connection.close()
            catch_up_order(conn)  # a restored store: new events sort after the restored ones
            # (after the migrations, outside their transactions: appends go on meanwhile)
            for index in log_indexes.build(conn):
                log.info("built a log index", extra={"index": index})
            for statement in grant_process_roles(
                conn, MIGRATION_TABLE, api_role=api_role, projector_role=projector_role
            ):
                log.info("granted", extra={"statement": statement})
    return [m.id for m in pending]


@contextlib.contextmanager
def migration_lock(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """Holds MIGRATION_LOCK on `conn`; while another migrator holds it, logs who every
    LOCK_LOG_EVERY_S, and gives up (MigrationFailed) after LOCK_TIMEOUT_S."""
    waiting = Waiting(log)
    while conn.execute("SELECT pg_try_advisory_lock(%s)", (MIGRATION_LOCK,)).fetchone() != (True,):
        if waiting.seconds() > LOCK_TIMEOUT_S:
            raise MigrationFailed(
                f"gave up after {LOCK_TIMEOUT_S:.0f} s waiting for the migration lock, held by "
                f"{_lock_holder(conn)}; if that migrator hangs, end its session "
                "(SELECT pg_terminate_backend(<pid>)) and run `metastore migrate` again"
            )
        waiting.say(
            lambda: f"waiting for the migration lock, held by {_lock_holder(conn)}",
            LOCK_LOG_EVERY_S,
        )
        time.sleep(LOCK_POLL_S)
    try:
        yield
    finally:
        with contextlib.suppress(psycopg.Error):  # a lost connection has released it
            conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))


def _lock_holder(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute(LOCK_HOLDER, (MIGRATION_LOCK,)).fetchone()
    if row is None:
        return "a session that has just ended"
    pid, user, application, client, connected, state = row
    since = connected.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if connected else "?"
    return (
        f"PostgreSQL backend {pid} (application {application or '-'!r}, user {user}, "
        f"client {client or 'local'}, connected {since}, {state or 'state hidden'})"
    )


def missing_migrations(conn: psycopg.Connection[Any]) -> list[str]:
    """The migrations this code knows that the database has not applied."""
    known = migration_ids()
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (MIGRATION_TABLE,)).fetchone()
    if not exists or not exists[0]:
        return known
    applied = {row[0] for row in conn.execute(f"SELECT migration_id FROM {MIGRATION_TABLE}")}
    return [mid for mid in known if mid not in applied]


def require_current_schema(database_url: str, connect_timeout: int = CONNECT_TIMEOUT_S) -> None:
    """Raises SchemaBehind, saying to run `metastore migrate`, when migrations are missing."""
    with login.connect(database_url, connect_timeout=connect_timeout) as conn:
        missing = missing_migrations(conn)
    if missing:
        raise SchemaBehind(
            f"the database schema is behind this version ({len(missing)} migration(s) "
            f"missing, first {missing[0]}); run `metastore migrate`"
        )


def wait_for_current_schema(database_url: str, stop: threading.Event) -> bool:
    """Blocks until the database answers with a current schema (True) or `stop` is set
    (False). While the database cannot be reached (down, refusing, not yet created) it
    logs one line every WAIT_LOG_EVERY_S and tries again every WAIT_RETRY_S, so that a
    pod started before its database stays up instead of crash-looping; a schema behind
    the code raises SchemaBehind, as require_current_schema does."""
    waiting = Waiting(startup_log)
    while not stop.is_set():
        try:
            require_current_schema(database_url, WAIT_CONNECT_TIMEOUT_S)
        except psycopg.OperationalError as exc:
            if login.gate(database_url).reason is None:  # (logged at each refused login)
                waiting.say(f"waiting for the database: {one_line(exc)}", WAIT_LOG_EVERY_S)
            stop.wait(WAIT_RETRY_S)
            continue
        if waiting.said:
            startup_log.info(
                "the database is reachable", extra={"waited_s": round(waiting.seconds())}
            )
        return True
    return False


class Waiting:
    """A wait's warning: at once, then every so many seconds, with the seconds waited."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self.started = time.monotonic()
        self.said_at: float | None = None

    @property
    def said(self) -> bool:
        return self.said_at is not None

    def seconds(self) -> float:
        return time.monotonic() - self.started

    def say(self, message: str | Callable[[], str], every: float) -> None:
        """Logs `message` (a callable is called only then) if it is time to."""
        now = time.monotonic()
        if self.said_at is None or now - self.said_at >= every:
            self.said_at = now
            text = message if isinstance(message, str) else message()
            self.logger.warning(text, extra={"waited_s": round(now - self.started)})
