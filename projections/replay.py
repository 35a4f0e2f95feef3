"""`metastore replay`: rebuild projections from the whole log, then swap them in at once.

The rebuild folds the log into the same DDL in a scratch schema (`readmodel_build`),
batch by batch, each committed, while the API keeps reading `readmodel` and the projector
keeps folding into it; the indexes only readers use are created after the fold, and the
tables vacuumed and analyzed (projections.deferred_indexes, projections.settle). Once the
build has caught up, one transaction takes the fold lock
(so the projector stands still), folds the last events, moves the old tables out and the
new ones in (ALTER TABLE ... SET SCHEMA), and sets each projection's version and cursor.
Readers see the old tables or the new ones, never a half-built one. The same log folded
in the same order gives the same ids, so ids handed out stay valid.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Sequence
from types import ModuleType
from typing import Any, TextIO

import psycopg
from psycopg import errors, sql

from metastore import __version__
from metastore.catalogs import NO_CATALOGS, CatalogMap
from metastore.config import Settings
from metastore.eventlog import HORIZON, START, Position, catch_up_order
from metastore.exit import Exit
from projections import deferred_indexes, settle
from projections.fold import (
    BATCH_SIZE,
    BatchResult,
    DeadLetter,
    Prefetcher,
    batch_transaction,
    collector_for_batches,
    fold_batch,
    set_search_path,
    tune_session,
)
from projections.schema import (
    BY_NAME,
    CATALOG_PROJECTIONS,
    FOLD_LOCK,
    LIVE_SCHEMA,
    PROJECTIONS,
    REPLAY_LOCK,
    active_projector_rules,
    create_readmodel_tables,
    create_tables,
    outdated_projections,
    rules_key,
    rules_of,
    stored_tables,
)

log = logging.getLogger("metastore.replay")

BUILD_SCHEMA = "readmodel_build"
OLD_SCHEMA = "readmodel_old"
SWAP_ATTEMPTS = 5

COUNT_EVENTS = f"SELECT count(*) FROM event_log WHERE tx < {HORIZON}"
SWAPPED_STATE = """
UPDATE projection_state
SET version = %(version)s, rules = %(rules)s, cursor_tx = %(tx)s::text::xid8, cursor_seq = %(seq)s,
    events_folded = %(n)s, last_event_received_at = %(received)s, updated_at = now()
WHERE name = %(name)s
"""
DELETE_DEAD_LETTERS = "DELETE FROM dead_letters WHERE projection = ANY(%s)"
# What the live tables account for, read under the fold lock (the projector stands still).
LIVE_FOLDED = "SELECT name, events_folded FROM projection_state WHERE name = ANY(%s)"
# The dead letters of a rebuild wait in the build schema, not in memory (a log of many
# poison events would otherwise grow the replay with the log), and go to `dead_letters`
# at the swap. They are written in the batch's transaction, so a batch or swap rolled back
# takes its letters with it.
BUILD_DEAD_LETTERS = "replay_dead_letters"
# The layout of `dead_letters` (sql/0002.projection-state.sql), with its own identity.
CREATE_BUILD_DEAD_LETTERS = (
    "CREATE TABLE {} (LIKE public.dead_letters INCLUDING DEFAULTS INCLUDING IDENTITY)"
)
INSERT_BUILD_DEAD_LETTER = """
INSERT INTO {} (projection, seq, tx, error) VALUES (%s, %s, %s::text::xid8, %s)
"""
MOVE_DEAD_LETTERS = """
INSERT INTO public.dead_letters (projection, seq, tx, error, failed_at)
SELECT projection, seq, tx, error, failed_at FROM {} ORDER BY id
"""


class RebuildStopped(Exception):
    """The rebuild was asked to stop (the projector is stopping); nothing was swapped in."""


class FewerEventsRebuilt(Exit):
    """The rebuilt tables account for fewer events than the live ones: the log reads back
    less than was folded, and swapping them in would drop the difference from every answer."""


def refuse_fewer_events(conn: psycopg.Connection[Any], folded: dict[str, int]) -> None:
    """Raises FewerEventsRebuilt (nothing is swapped) when a rebuilt projection accounts for
    fewer events than its live tables, in the swap's transaction."""
    live = dict(conn.execute(LIVE_FOLDED, (list(folded),)).fetchall())
    short = {name: (n, live[name]) for name, n in folded.items() if n < live.get(name, 0)}
    if not short:
        return
    name, (rebuilt, had) = next(iter(sorted(short.items())))
    raise FewerEventsRebuilt(
        f"replay refused: the rebuilt {name} accounts for {rebuilt:,} events, the live tables "
        f"for {had:,} ({len(short)} projection(s) short); the event log reads back fewer "
        "events than were folded (events removed from it, e.g. a detached partition, or a "
        "restore this server cannot read in order); nothing was swapped, the live tables "
        "stay (README, Backup and restore)"
    )


class Progress:
    """A progress bar on a terminal; a log line every few seconds otherwise."""

    def __init__(self, total: int, show: bool, stream: TextIO = sys.stderr) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.started = self.last_line = time.monotonic()
        self.stream = stream
        self.bar = show and stream.isatty()
        self.show = show

    def advance(self, count: int) -> None:
        self.done += count
        now = time.monotonic()
        rate = self.done / max(now - self.started, 1e-6)
        if self.bar:
            width = 30
            filled = min(width, int(width * self.done / self.total))
            left = max(self.total - self.done, 0) / rate if rate else 0
            self.stream.write(
                f"\rreplay [{'#' * filled}{'.' * (width - filled)}] "
                f"{self.done:,}/{self.total:,} events {rate:,.0f}/s ETA {left:,.0f}s "
            )
            self.stream.flush()
        elif now - self.last_line >= 5:
            self.last_line = now
            log.info(
                "replay progress",
                extra={"events": self.done, "of": self.total, "events_per_s": round(rate)},
            )

    def finish(self) -> None:
        if self.bar:
            self.stream.write("\n")
            self.stream.flush()


def rebuild(
    database_url: str,
    names: Sequence[str],
    progress: bool = False,
    limit: int = BATCH_SIZE,
    catalogs: CatalogMap = NO_CATALOGS,
    stop: threading.Event | None = None,
) -> int:
    """Rebuilds the named projections from the whole log and swaps them in; returns events.

    With the catalog map `catalogs` (the datasets' names are joined by it). One rebuild at
    a time (REPLAY_LOCK, waited for). Safe while the API serves and the projector folds.
    `stop` set: RebuildStopped at the next batch (the build schema is dropped by the next).
    """
    projections = [BY_NAME[n] for n in names]
    with psycopg.connect(database_url) as conn, psycopg.connect(database_url) as side:
        tune_session(conn)
        tune_session(side)
        catch_up_order(conn)  # a restored store: the rebuild reads every restored event
        conn.execute("SELECT pg_advisory_lock(%s)", (REPLAY_LOCK,))
        conn.commit()
        try:
            with Prefetcher(database_url, catalogs) as prefetcher, collector_for_batches():
                return _rebuild(
                    conn, side, projections, progress, limit, prefetcher, catalogs, stop
                )
        finally:
            conn.rollback()
            conn.execute("SELECT pg_advisory_unlock(%s)", (REPLAY_LOCK,))
            conn.commit()


def _rebuild(
    conn: psycopg.Connection[Any],
    side: psycopg.Connection[Any],
    projections: list[ModuleType],
    show: bool,
    limit: int,
    prefetcher: Prefetcher,
    catalogs: CatalogMap,
    stop: threading.Event | None,
) -> int:
    started = time.monotonic()
    names = [p.NAME for p in projections]
    log.info(
        "rebuilding projections", extra={"projections": ",".join(names), "version": __version__}
    )
    with conn.transaction():
        conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(BUILD_SCHEMA))
        )
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(BUILD_SCHEMA)))
        for projection in projections:
            create_tables(conn, projection, BUILD_SCHEMA)
        deferred = deferred_indexes.defer(conn, BUILD_SCHEMA)
        conn.execute(_in_build(CREATE_BUILD_DEAD_LETTERS))
        row = conn.execute(COUNT_EVENTS).fetchone()
    progress = Progress(row[0] if row else 0, show)
    cursors: dict[str, Position] = dict.fromkeys(names, START)
    folded: dict[str, int] = dict.fromkeys(names, 0)
    letters = [0]  # how many went to the build schema's table
    received: list[Any] = [None]
    insert_letter = _in_build(INSERT_BUILD_DEAD_LETTER)

    def collect(cur: psycopg.Cursor[Any], letter: DeadLetter) -> None:
        cur.execute(insert_letter, (letter.projection, letter.seq, letter.tx, letter.error))
        letters[0] += 1

    def one_batch(side: psycopg.Connection[Any] | None) -> BatchResult:
        result = fold_batch(
            conn,
            projections,
            cursors,
            limit,
            collect,
            prefetcher=prefetcher,
            side=side,
            catalogs=catalogs,
        )
        for name, count in result.folded.items():
            folded[name] += count
        if result.received_at is not None:
            received[0] = result.received_at
        progress.advance(result.read)
        return result

    while True:
        if stop is not None and stop.is_set():
            raise RebuildStopped(",".join(names))
        with batch_transaction(conn, BUILD_SCHEMA, side):
            result = one_batch(side)
        if not result.full:
            break
    # Settled before the swap: VACUUM sets the visibility map (index-only scans skip the
    # heap) before the readers' indexes are built, so it has fewer indexes to clean; then
    # statistics, with those of the indexes' expressions (fresh tables have none until
    # autovacuum comes by, and meanwhile the planner guesses: a dataset page's freshness
    # took 10x as long).
    tables = settle.tables_of(projections)
    steps = [time.monotonic()]
    settle.vacuum(conn, BUILD_SCHEMA, tables, analyze=False)
    steps.append(time.monotonic())
    with conn.transaction():
        deferred_indexes.create(conn, deferred)
        steps.append(time.monotonic())
        for table in tables:
            conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(BUILD_SCHEMA, table)))
    steps.append(time.monotonic())
    log.info(
        "rebuilt tables settled",
        extra={
            "fold_s": round(steps[0] - started, 1),
            "vacuum_s": round(steps[1] - steps[0], 1),
            "indexes_s": round(steps[2] - steps[1], 1),
            "analyze_s": round(steps[3] - steps[2], 1),
        },
    )
    for attempt in range(1, SWAP_ATTEMPTS + 1):
        saved = (dict(cursors), dict(folded), letters[0], received[0])
        try:
            with conn.transaction():
                conn.execute("SET LOCAL lock_timeout = '20s'")
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (FOLD_LOCK,))
                set_search_path(conn, BUILD_SCHEMA)
                # The last batches and the swap: one transaction, so one connection.
                while one_batch(None).full:
                    pass
                refuse_fewer_events(conn, folded)
                swap(conn, projections, cursors, folded, received[0], catalogs)
            break
        except (errors.LockNotAvailable, errors.DeadlockDetected):
            if attempt == SWAP_ATTEMPTS:
                raise
            log.warning("swap waited too long for readers; retrying", extra={"attempt": attempt})
            cursors.update(saved[0])
            folded.update(saved[1])
            letters[0] = saved[2]
            received[0] = saved[3]
    progress.finish()
    total = max(folded.values(), default=0)
    log.info(
        "rebuild complete",
        extra={
            "projections": ",".join(names),
            "events": total,
            "seconds": round(time.monotonic() - started, 1),
            "dead_letters": letters[0],
        },
    )
    return total


def swap(
    conn: psycopg.Connection[Any],
    projections: list[ModuleType],
    cursors: dict[str, Position],
    folded: dict[str, int],
    received: Any,
    catalogs: CatalogMap = NO_CATALOGS,
) -> None:
    """Moves the built tables into `readmodel` and records where they stand (in the open tx)."""
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(OLD_SCHEMA)))
    for projection in projections:
        for table in stored_tables(projection):
            conn.execute(
                sql.SQL("ALTER TABLE IF EXISTS {} SET SCHEMA {}").format(
                    sql.Identifier(LIVE_SCHEMA, table), sql.Identifier(OLD_SCHEMA)
                )
            )
        for table in projection.TABLES:
            conn.execute(
                sql.SQL("ALTER TABLE {} SET SCHEMA {}").format(
                    sql.Identifier(BUILD_SCHEMA, table), sql.Identifier(LIVE_SCHEMA)
                )
            )
        conn.execute(
            "INSERT INTO projection_state (name, version) VALUES (%s, %s) "
            "ON CONFLICT (name) DO NOTHING",
            (projection.NAME, projection.VERSION),
        )
        position = cursors[projection.NAME]
        conn.execute(
            SWAPPED_STATE,
            {
                "version": projection.VERSION,
                "rules": rules_of(projection, catalogs),
                "tx": position.tx,
                "seq": position.seq,
                "n": folded[projection.NAME],
                "received": received,
                "name": projection.NAME,
            },
        )
    conn.execute(DELETE_DEAD_LETTERS, ([p.NAME for p in projections],))
    conn.execute(_in_build(MOVE_DEAD_LETTERS))
    for schema in (OLD_SCHEMA, BUILD_SCHEMA):
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def _in_build(query: str) -> sql.Composed:
    """`query` with its table `{}` the build schema's dead-letter table."""
    return sql.SQL(query).format(sql.Identifier(BUILD_SCHEMA, BUILD_DEAD_LETTERS))


def prepare_tables(database_url: str, catalogs: CatalogMap = NO_CATALOGS) -> list[str]:
    """Creates the missing read-model tables; returns the projections to rebuild: those
    whose stored version differs from the code's, or derived with another catalog map."""
    with psycopg.connect(database_url) as conn:
        create_readmodel_tables(conn, catalogs)
        return outdated_projections(conn, catalogs)


def rebuild_outdated(
    database_url: str, progress: bool = False, catalogs: CatalogMap = NO_CATALOGS
) -> list[str]:
    """Rebuilds the projections whose stored version differs from the code's, or that were
    derived with another catalog map than `catalogs`; returns them."""
    outdated = prepare_tables(database_url, catalogs)
    if outdated:
        log.info(
            "projections of another version or catalog map found; rebuilding",
            extra={"projections": ",".join(outdated)},
        )
        rebuild(database_url, outdated, progress, catalogs=catalogs)
    return outdated


def refuse_another_map(conn: psycopg.Connection[Any], catalogs: CatalogMap) -> None:
    """Exit when the active projector joins names by another catalog map: the datasets this
    replay swapped in would be derived by rules the projector does not fold by (it would
    have to rebuild them again). Rules change through the projector."""
    active = active_projector_rules(conn)
    conn.rollback()
    if active is None or active == rules_key(catalogs):
        return
    mine = catalogs.fingerprint[:8] or "none"
    theirs = f"{active & 0xFFFFFFFF:08x}" if active else "none"
    raise Exit(
        f"the active projector joins dataset names by another catalog map (fingerprint "
        f"{theirs}; this replay's METASTORE_CATALOGS_FILE: {mine}): replay with the "
        "projector's map, or give the projector the new one (it rebuilds the datasets itself)"
    )


def run_replay(settings: Settings, projection: str | None = None, progress: bool = True) -> None:
    """The `metastore replay` command."""
    assert settings.database_url is not None
    if projection is not None and projection not in BY_NAME:
        raise Exit(
            f"unknown projection {projection!r}; one of: {', '.join(p.NAME for p in PROJECTIONS)}"
        )
    names = [projection] if projection else [p.NAME for p in PROJECTIONS]
    with psycopg.connect(settings.database_url) as conn:
        if CATALOG_PROJECTIONS.intersection(names):
            refuse_another_map(conn, settings.catalogs)
        create_readmodel_tables(conn, settings.catalogs)
    started = time.monotonic()
    events = rebuild(settings.database_url, names, progress, catalogs=settings.catalogs)
    print(
        f"replayed {events:,} events into {', '.join(names)} "
        f"in {time.monotonic() - started:,.1f}s; switched over"
    )
