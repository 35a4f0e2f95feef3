"""Settling read models after a big write: VACUUM (ANALYZE) of their tables.

A list's total is an index-only scan, which reads the heap page of every row until VACUUM
has set the page all-visible; after a replay or a long catch-up most pages are not, and
until autovacuum comes by (its insert threshold is a fifth of a large table) a total read
thousands of heap pages (the second bench run's list jobs p50 was 3x the first's). So a
replay vacuums its build tables before the swap, and the projector its live tables once
after a long catch-up, on a thread of its own, off the fold's path.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import Any

import psycopg
from psycopg import sql

from metastore import login
from metastore.exit import one_line
from projections.schema import LIVE_SCHEMA, PROJECTIONS

log = logging.getLogger("metastore.projector")

# A catch-up that folded at least this many events is settled once it has caught up: about
# a minute of folding, the rows of which would otherwise wait for autovacuum (a batch of
# 2,000 on a store of millions of rows stays far below its thresholds).
SETTLE_AFTER_EVENTS = 100_000


def tables_of(projections: Iterable[ModuleType]) -> list[str]:
    return [table for projection in projections for table in projection.TABLES]


def vacuum(
    conn: psycopg.Connection[Any], schema: str, tables: Sequence[str], analyze: bool = True
) -> None:
    """VACUUM (ANALYZE when `analyze`) each of `schema`'s `tables`, one statement each.

    VACUUM cannot run in a transaction: the connection goes to autocommit for it (it must
    be idle) and back. A table at a time, so no lock is held on all of them at once.
    """
    # INDEX_CLEANUP ON: by default VACUUM leaves a few dead items when under 2 % of the
    # pages have them, and those pages stay not all-visible (469 of runs' 63,050 at
    # 1,000,000 events: 88-136 heap fetches a total).
    options = "ANALYZE, INDEX_CLEANUP ON" if analyze else "INDEX_CLEANUP ON"
    statement = sql.SQL(f"VACUUM ({options}) {{}}")
    was = conn.autocommit
    conn.autocommit = True
    try:
        wait_for_flush(conn)
        for table in tables:
            conn.execute(statement.format(sql.Identifier(schema, table)))
    finally:
        conn.autocommit = was


def vacuum_read_models(conn: psycopg.Connection[Any]) -> None:
    """VACUUM ANALYZE every live read-model table: what the projector does after a long
    catch-up."""
    vacuum(conn, LIVE_SCHEMA, tables_of(PROJECTIONS))


# The fold commits asynchronously (synchronous_commit off), and VACUUM sets a page
# all-visible only once its rows' commits are flushed (their hint bits): the WAL writer
# flushes them within 3 x wal_writer_delay (200 ms by default).
FLUSHED = "SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn"
FLUSH_WAIT_S = 5.0


def wait_for_flush(conn: psycopg.Connection[Any]) -> None:
    """Waits (at most FLUSH_WAIT_S) until the WAL written so far is flushed."""
    row = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    until = time.monotonic() + FLUSH_WAIT_S
    while row is not None and time.monotonic() < until:
        flushed = conn.execute(FLUSHED, (row[0],)).fetchone()
        if flushed is None or flushed[0]:
            return
        time.sleep(0.02)


class Settler:
    """Vacuums the live read models once after a catch-up of SETTLE_AFTER_EVENTS or more,
    on a thread with its own connection: the fold goes on meanwhile (VACUUM takes a lock
    that conflicts with neither the fold's writes nor reads)."""

    def __init__(self, database_url: str, after: int = SETTLE_AFTER_EVENTS) -> None:
        self.database_url = database_url
        self.after = after
        self.folded = 0  # since the last settle began
        self.thread: threading.Thread | None = None

    def batch(self, read: int, full: bool) -> None:
        """Counts a folded batch; caught up (`full` false) after enough: settles."""
        self.folded += read
        if full or self.folded < self.after or self.running:
            return
        self.folded = 0
        self.thread = threading.Thread(target=self._run, name="settle", daemon=True)
        self.thread.start()

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def _run(self) -> None:
        started = time.monotonic()
        try:
            with login.connect(self.database_url, autocommit=True, connect_timeout=10) as conn:
                vacuum_read_models(conn)
        except psycopg.Error as exc:  # autovacuum settles them later; nothing is wrong
            log.warning("read models not vacuumed", extra={"error": one_line(exc)})
            return
        log.info(
            "read models vacuumed after a long catch-up",
            extra={"seconds": round(time.monotonic() - started, 1)},
        )

    def close(self, timeout: float = 10.0) -> None:
        if self.thread is not None:
            self.thread.join(timeout)
