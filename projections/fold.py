"""Folding one batch of the log into the projections, in the caller's transaction.

A batch is read past the lowest cursor of the projections being folded, each projection
folds the events past its own cursor, and the cursors move in the same transaction: a
crash anywhere rolls back both, so a restart re-reads exactly the unfolded events.
A projection whose fold raises is re-folded event by event (SAVEPOINTs) to find the
events that fail; each goes to `dead_letters` and the rest are folded.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import gc
import json
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from types import ModuleType
from typing import Any, NamedTuple

import msgspec
import psycopg
from psycopg import sql
from psycopg.rows import tuple_row
from psycopg.types.json import set_json_loads

from metastore import pgarray
from metastore.catalogs import NO_CATALOGS, CatalogMap
from metastore.eventlog import (
    Position,
    StoredEvent,
    batch_after_query,
    batch_rows,
)
from metastore.metrics import DEAD_LETTERS, FOLD_FALLBACKS, FOLDED_EVENTS
from projections.common import FoldEvent, planner_without
from projections.decode import fold_event
from projections.schema import SIDE_PROJECTIONS, rules_of

log = logging.getLogger("metastore.projector")

BATCH_SIZE = 2000
# A batch also ends before its events' stored JSON passes this many bytes (an event larger
# than that is a batch of its own): a batch's memory, decoded and folded, is some times its
# bytes (docs/PERFORMANCE.md, "Bounded fold"), and a batch that ends here is not read
# ahead of. 2,000 events of the benchmark's workload (3 KB on average) are about 6 MB, of
# the conformance scenarios about 9 MB: full batches of those still are (8 MiB cut them,
# and folded 15 % slower).
BATCH_BYTES = 16 * 1024 * 1024
# And after the event that brings its dataset names (inputs, outputs, their symlinks) to
# this many: each is a few KB of memory over the projections, and 16 MiB of events with
# thousands of small outputs each would be hundreds of thousands of them (an event alone
# names at most envelope.MAX_EVENT_DATASETS datasets and decode.MAX_EVENT_SYMLINKS more).
BATCH_NAMES = 40_000

LOAD_STATE = """
SELECT name, version, rules, cursor_tx::text::bigint, cursor_seq FROM projection_state
WHERE name = ANY(%s) FOR UPDATE
"""
# The cursors of a connection's projections, in one statement: a round trip each cost the
# batch's fixed part as much as the fold of a few events on a loaded machine.
SAVE_STATES = """
UPDATE projection_state p
SET cursor_tx = c.tx::xid8, cursor_seq = c.seq, events_folded = p.events_folded + c.n,
    last_event_received_at = coalesce(%(received)s, p.last_event_received_at),
    updated_at = now()
FROM unnest(%(names)s::text[], %(tx)s::text[], %(seq)s::bigint[], %(n)s::bigint[])
    AS c(name, tx, seq, n)
WHERE p.name = c.name
"""
INSERT_DEAD_LETTER = """
INSERT INTO dead_letters (projection, seq, tx, error) VALUES (%s, %s, %s::text::xid8, %s)
"""


class DeadLetter(msgspec.Struct, frozen=True):
    projection: str
    seq: int
    tx: int
    error: str


DeadLetterSink = Callable[[psycopg.Cursor[Any], DeadLetter], None]


def store_dead_letter(cur: psycopg.Cursor[Any], letter: DeadLetter) -> None:
    cur.execute(INSERT_DEAD_LETTER, (letter.projection, letter.seq, letter.tx, letter.error))


# The read must stop after `limit` rows: a Merge Append of the partitions' (tx, seq)
# indexes. The planner only picks it when it expects many rows past the cursor; it judges
# `(tx, seq) > (X, S)` by `tx > X`, so with the cursor inside a large transaction (a bulk
# load, the last group commit) or on a log not yet analyzed, it expects a handful and
# sorts instead, which reads (and detoasts) every event past the cursor, every batch:
# a catch-up over n events cost O(n²). Sorting is
# switched off for this one statement; the fold's own queries keep the session's plans.


class Unreadable(msgspec.Struct, frozen=True):
    """An event of the log that could not be read or decoded for the folds, and why.

    Every projection that has not folded past it dead-letters it; the cursors move on.
    """

    position: Position
    error: str


class Batch(msgspec.Struct):
    """What `read_batch` read: the events decoded, those that could not be, in log order."""

    events: list[FoldEvent]
    unreadable: list[Unreadable]
    read: int  # rows read (events and unreadable ones)
    last: Position | None  # the last row's position (None: nothing read)
    received_at: dt.datetime | None  # the last row's append time
    full: bool = False  # it ended at its limit of events or bytes: more may follow
    # It ended at its limit of bytes or dataset names: the next is not read ahead, so the
    # projector holds one such batch at a time (docs/PERFORMANCE.md, "Bounded fold").
    heavy: bool = False
    size: int = 0  # its events' stored bytes
    names: int = 0  # the dataset names its events bring (see BATCH_NAMES)

    def then(self, rest: Batch) -> Batch:
        """This batch and `rest`, read past it (read_batch's `continues`)."""
        return Batch(
            self.events + rest.events,
            self.unreadable + rest.unreadable,
            self.read + rest.read,
            rest.last or self.last,
            rest.received_at if rest.last else self.received_at,
            rest.full,
            rest.heavy,
            self.size + rest.size,
            self.names + rest.names,
        )


def read_batch(
    conn: psycopg.Connection[Any],
    after: Position,
    limit: int,
    catalogs: CatalogMap = NO_CATALOGS,
    max_bytes: int = BATCH_BYTES,
    continues: Batch | None = None,
) -> Batch:
    """The next `limit` events past `after` (no more than `max_bytes` of them, unless one
    alone is larger, and up to the one that brings their dataset names to BATCH_NAMES),
    decoded for the folds (with `catalogs`). With `continues` (a batch that did not end at
    a limit, `after` its last position), its rest: the limits count its events too, and
    the first event read is no exception to the bytes.

    In the caller's transaction (the setting is reset after the read), or in a
    transaction of its own on an autocommit connection (the prefetcher's). What cannot be
    read or decoded is handed back as `unreadable`, never raised: a time PostgreSQL holds
    and Python does not (stored before ingest refused it, or written by other means) fails
    the whole read, which is then done again with such times as NULL (only then: the
    guard costs nothing while every row loads); a decoding that raises fails its event.
    """
    alone, names = continues is None, 0
    if continues is not None:
        limit, max_bytes, names = (
            limit - continues.read,
            max_bytes - continues.size,
            continues.names,
        )
    try:
        stored_events, cut, size = _read_past(conn, after, limit, max_bytes, False, alone)
    except psycopg.DataError:
        stored_events, cut, size = _read_past(conn, after, limit, max_bytes, True, alone)
    events: list[FoldEvent] = []
    unreadable: list[Unreadable] = []
    first_names = names
    for index, stored in enumerate(stored_events):
        if names >= BATCH_NAMES:  # (the events after are read again by the next batch)
            del stored_events[index:]
            cut = True
            break
        if stored.event_time is None or stored.received_at is None:
            unreadable.append(Unreadable(stored.position, UNREADABLE_TIME))
            continue
        try:
            event = fold_event(
                stored.position,
                stored.received_at,
                stored.event_time,
                stored.kind,
                stored.event_type,
                stored.run_id,
                stored.job_namespace,
                stored.job_name,
                stored.event,
                catalogs,
            )
        except Exception as exc:  # (no cost while nothing raises)
            unreadable.append(Unreadable(stored.position, _error_text(exc)))
            continue
        events.append(event)
        names += sum(1 + len(ref.symlinks) for ref in event.refs)
    last = stored_events[-1] if stored_events else None
    batch = Batch(
        events,
        unreadable,
        len(stored_events),
        last.position if last else None,
        last.received_at if last else None,
        cut or len(stored_events) == limit,
        cut,
        size,
        names - first_names,
    )
    return batch if continues is None else continues.then(batch)


def _read_past(
    conn: psycopg.Connection[Any], *statement: Any
) -> tuple[list[StoredEvent], bool, int]:
    """The log's events past a position (eventlog.batch_after_query's `statement`), with
    sorting off and planned once (see planner_without: with sorting off its one plan is the
    merge of each partition's position index), in one round trip on a connection in a
    transaction.

    The setting, the read and the reset go in one pipeline and the rows are loaded after
    it (a time Python cannot hold fails there, with the setting already reset): five
    round trips (a savepoint, the setting, the read, the reset, the release) were a fixed
    cost of every batch the projector reads itself. The prefetcher's autocommit connection
    reads in a transaction of its own (SET LOCAL needs one): three round trips.
    """
    own = conn.transaction() if conn.autocommit else contextlib.nullcontext()
    with conn.cursor(row_factory=tuple_row) as cur:
        with own, conn.pipeline(), planner_without(conn, "enable_sort", plan_once=True):
            cur.execute(*batch_after_query(*statement))
        return batch_rows(cur.fetchall())


UNREADABLE_TIME = (
    "the event's eventTime (or append time) is outside years 1-9999 in UTC, "
    "which no reader holds; ingest refuses such events now"
)


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


def _first_line(exc: BaseException) -> str:
    return _error_text(exc).splitlines()[0][:500]


# The collector's thresholds while folding. A batch is hundreds of thousands of small
# objects (decoded events, loaded rows) that live as long as the batch. With Python's
# defaults (700, 10, 10) they outlived the young collections into the oldest generation,
# whose full collections then came every batch or two and walked the whole batch
# (docs/PERFORMANCE.md, "The collector's young threshold"). With young collections every
# 100,000 allocations a batch's objects are mostly freed by reference counting before any
# collection looks at them; garbage cycles are still collected, a little later.
FOLD_GC_THRESHOLD = (100_000, 10, 10)


@contextlib.contextmanager
def collector_for_batches() -> Iterator[None]:
    """Sets the collector's thresholds to FOLD_GC_THRESHOLD for the block (then restores them)."""
    previous = gc.get_threshold()
    gc.set_threshold(*FOLD_GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*previous)


def tune_session(conn: psycopg.Connection[Any]) -> None:
    """Session settings for a folding connection (it must be idle).

    synchronous_commit off: a batch lost to a server crash is lost with its cursor move, so
    the projector folds it again; the read models are derived, nothing else depends on the
    flush. No JIT: a large batch's statements are estimated past its thresholds, and
    compiling them cost 300 ms a batch for a statement that ran in 40. lz4 compresses the
    large facet documents several times faster than pglz (when the server has it). The
    time zone: see `utc_session`. JSON values loaded (the rows' facet times and rules) are
    decoded by msgspec: the standard library's decoder was 4 % of a fold's profile. Custom
    plans only: psycopg prepares a statement after five executions and PostgreSQL then
    keeps a generic plan made with the statistics and sizes of that moment until the next
    ANALYZE; made while the store was young, it scanned whole tables once they had grown
    (a streaming scenario's batches of 50: p50 137 ms, 27 with custom plans), at the cost of
    planning each statement each batch (p50 23 -> 27 ms in the ordinary case).
    """
    utc_session(conn)
    set_json_loads(load_json, conn)
    pgarray.register(conn)  # (the rows' binary arrays: common.row_param)
    conn.execute("SET synchronous_commit = off")
    conn.execute("SET jit = off")
    conn.execute("SET plan_cache_mode = force_custom_plan")
    try:
        conn.execute("SET default_toast_compression = 'lz4'")
    except psycopg.Error:
        conn.rollback()
    conn.commit()


_json_decoder = msgspec.json.Decoder()


def load_json(data: str | bytes) -> Any:
    """A json or jsonb value as `json.loads` gives it: by msgspec, five times faster; by
    `json.loads` what msgspec refuses (a number beyond a float's range, which jsonb holds)."""
    try:
        return _json_decoder.decode(data)
    except msgspec.DecodeError:
        return json.loads(data)


def utc_session(conn: psycopg.Connection[Any]) -> None:
    """Sets the session's TimeZone to UTC, whatever the server's default.

    psycopg hands timestamptz values out in the session's zone. For 'UTC' that is
    `datetime.timezone.utc`; for any other name (initdb's default here is 'Etc/UTC') a
    ZoneInfo, which is slower to load, encode and subtract, and a fold handles several
    timestamps an event. The instants are the same either way.
    """
    conn.execute("SET TimeZone = 'UTC'")


def set_search_path(conn: psycopg.Connection[Any], schema: str) -> None:
    conn.execute(sql.SQL("SET LOCAL search_path TO {}, public").format(sql.Identifier(schema)))


def folding_connection(
    name: str, conn: psycopg.Connection[Any], side: psycopg.Connection[Any] | None
) -> psycopg.Connection[Any]:
    """The connection projection `name` folds on: `side` for SIDE_PROJECTIONS, if given."""
    return side if side is not None and name in SIDE_PROJECTIONS else conn


def by_connection(
    names: Iterable[str], conn: psycopg.Connection[Any], side: psycopg.Connection[Any] | None
) -> list[tuple[psycopg.Connection[Any], list[str]]]:
    """The projections `names` grouped by the connection each folds on (folding_connection)."""
    lanes: dict[int, tuple[psycopg.Connection[Any], list[str]]] = {}
    for name in names:
        on = folding_connection(name, conn, side)
        lanes.setdefault(id(on), (on, []))[1].append(name)
    return list(lanes.values())


def load_cursors(
    conn: psycopg.Connection[Any],
    projections: Sequence[ModuleType],
    side: psycopg.Connection[Any] | None = None,
    catalogs: CatalogMap = NO_CATALOGS,
) -> dict[str, Position]:
    """The cursors of the projections whose stored tables are of this code's version and
    were derived with these `catalogs` (see schema.rules_of).

    (Other tables are rebuilt, never folded into by code that does not know their layout,
    or by rules they were not derived with.) Locks their state rows until the transaction
    ends: those of the SIDE_PROJECTIONS in the `side` connection's transaction, when given.
    """
    return open_batch(conn, projections, None, side, catalogs)


def open_batch(
    conn: psycopg.Connection[Any],
    projections: Sequence[ModuleType],
    schema: str | None,
    side: psycopg.Connection[Any] | None = None,
    catalogs: CatalogMap = NO_CATALOGS,
    first: Callable[[psycopg.Connection[Any]], Callable[[], None]] | None = None,
) -> dict[str, Position]:
    """load_cursors, after setting the search path to `schema` (unless None: in a
    batch_transaction(search_path=False)) and queueing `first`'s statements on `conn`, in
    one pipeline on each connection, `conn`'s first, so the side's statements follow
    `first`'s (the fold lock). `first` returns what checks its statements' results, called
    after the pipeline.

    Each statement waited for its answer before: on a loaded machine a round trip costs a
    millisecond or more, and this was eight of them a batch.
    """
    versions = {p.NAME: (p.VERSION, rules_of(p, catalogs)) for p in projections}
    lanes = {id(on): names for on, names in by_connection(versions, conn, side)}
    cursors: dict[str, Position] = {}
    for on in [conn] if side is None else [conn, side]:
        names = lanes.get(id(on), [])
        with on.cursor(row_factory=tuple_row) as cur:
            with on.pipeline():
                if schema is not None:
                    set_search_path(on, schema)
                check = first(on) if first is not None and on is conn else None
                if names:
                    cur.execute(LOAD_STATE, (names,))
            if check is not None:
                check()
            for name, version, rules, tx, seq in cur.fetchall() if names else []:
                if versions[name] == (version, rules):
                    cursors[name] = Position(tx, seq)
    return cursors


@contextlib.contextmanager
def batch_transaction(
    conn: psycopg.Connection[Any],
    schema: str,
    side: psycopg.Connection[Any] | None = None,
    search_path: bool = True,
) -> Iterator[None]:
    """One batch's transaction on `conn`, and on `side` (committed just after), in `schema`
    (unless `search_path` is False: then open_batch sets it).

    A crash between the two commits leaves the side projections' cursors a batch behind
    the others': the next batch folds their events again, nothing is lost or doubled.
    """
    try:
        with conn.transaction():
            if search_path:
                set_search_path(conn, schema)
                if side is not None:
                    set_search_path(side, schema)
            yield
        if side is not None:
            side.commit()
    except BaseException:
        if side is not None and not side.broken:
            side.rollback()
        raise


class Prefetcher:
    """Reads and decodes the next batch on its own connection and thread.

    The log below the horizon never changes, so a batch read past a position by another
    connection is exactly the batch the fold would read itself. Holds at most one batch.
    """

    def __init__(self, database_url: str, catalogs: CatalogMap = NO_CATALOGS) -> None:
        self.database_url = database_url
        self.catalogs = catalogs
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefetch")
        self.conn: psycopg.Connection[Any] | None = None
        self.pending: tuple[Position, int, Future[Batch]] | None = None

    def _read(self, after: Position, limit: int) -> Batch:
        if self.conn is None or self.conn.closed:
            self.conn = psycopg.connect(self.database_url, autocommit=True, connect_timeout=10)
            utc_session(self.conn)
        return read_batch(self.conn, after, limit, self.catalogs)

    def request(self, after: Position, limit: int) -> None:
        self.discard()
        self.pending = (after, limit, self.executor.submit(self._read, after, limit))

    def take(self, after: Position, limit: int) -> Batch | None:
        """The prefetched batch past `after`, or None when there is none for that position."""
        pending, self.pending = self.pending, None
        if pending is None or pending[:2] != (after, limit):
            if pending is not None:
                pending[2].cancel()
            return None
        try:
            return pending[2].result()
        except psycopg.Error:
            return None  # read it again on the folding connection, which reports the error

    def discard(self) -> None:
        if self.pending is not None:
            self.pending[2].cancel()
            self.pending = None

    def close(self) -> None:
        self.discard()
        self.executor.shutdown(wait=True)
        if self.conn is not None:
            self.conn.close()

    def __enter__(self) -> Prefetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BatchResult(msgspec.Struct):
    read: int = 0
    folded: dict[str, int] = {}
    received_at: dt.datetime | None = None
    full: bool = False  # the batch ended at its limit of events or bytes: more may follow


def fold_batch(
    conn: psycopg.Connection[Any],
    projections: Sequence[ModuleType],
    cursors: dict[str, Position],
    limit: int = BATCH_SIZE,
    dead_letter: DeadLetterSink = store_dead_letter,
    prefetcher: Prefetcher | None = None,
    side: psycopg.Connection[Any] | None = None,
    catalogs: CatalogMap = NO_CATALOGS,
    save: bool = False,
) -> BatchResult:
    """Reads and folds one batch past `cursors` (moved in place), in the open transaction.

    `catalogs`: the catalog map the events are decoded with (a prefetcher has its own,
    the same).

    The caller has set the search path (live or build schema), saves the cursors (unless
    `save`: then save_cursors stores them here) and commits. With a `prefetcher`, the next
    batch is read while this one folds. With a `side` connection (in a transaction, search
    path set), the SIDE_PROJECTIONS fold on it, their cursors are saved there, and the
    caller commits it after `conn`.
    """
    start = min(cursors[p.NAME] for p in projections)
    batch = prefetcher.take(start, limit) if prefetcher else None
    if batch is None or batch.last is None:
        batch = read_batch(conn, start, limit, catalogs)
    elif not batch.full:
        # Read ahead while the last batch's writes ran (the live fold's, which ended where
        # the log did): the events that came since are all there is left to read and
        # decode here, while the next batch waits.
        batch = read_batch(conn, batch.last, limit, catalogs, continues=batch)
    result = BatchResult(read=batch.read, folded={}, full=batch.full)
    if batch.last is None:
        return result
    events, last = batch.events, batch.last
    read_next = None
    if prefetcher is not None and not batch.heavy:
        read_next = functools.partial(prefetcher.request, last, limit)
    result.received_at = batch.received_at
    with contextlib.ExitStack() as stack:
        cur = stack.enter_context(conn.cursor(row_factory=tuple_row))
        side_cur = stack.enter_context(side.cursor(row_factory=tuple_row)) if side else cur
        for folding in {cur, side_cur}:
            pgarray.register(folding)  # (row_param's text[] parameters)
        work: list[Work] = []
        for projection in projections:
            cursor = cursors[projection.NAME]
            mine = events if cursor == start else [e for e in events if e.position > cursor]
            on = cur if folding_connection(projection.NAME, conn, side) is conn else side_cur
            lost = [u for u in batch.unreadable if u.position > cursor]
            for unreadable in lost:
                dead_letter_unreadable(on, projection.NAME, unreadable, dead_letter)
            if mine:
                work.append(Work(projection, mine, on))
            result.folded[projection.NAME] = len(mine) + len(lost)
            cursors[projection.NAME] = max(last, cursor)
        # Saved in the fold's pipelines when every cursor's connection has one: a round trip
        # for the save after the batch was one more wait a batch.
        saving = {id(on) for on, _ in by_connection(result.folded, conn, side)}
        queued = save and saving <= {id(item.cur.connection) for item in work}
        then = functools.partial(save_cursors, conn, cursors, result, side) if queued else None
        undone = fold_pipelined(work, read_next, then)
        for item in undone:
            fold_isolated(item.cur, item.projection, item.events, dead_letter)
        if save and (undone or not queued):
            redo = {id(item.cur.connection) for item in undone} if queued else None
            save_cursors(conn, cursors, result, side, redo)
    for item in work:
        FOLDED_EVENTS.labels(projection=item.projection.NAME).inc(len(item.events))
    return result


def dead_letter_unreadable(
    cur: psycopg.Cursor[Any], projection: str, unreadable: Unreadable, dead_letter: DeadLetterSink
) -> None:
    log.error(
        "event unreadable; dead-lettered",
        extra={"projection": projection, "seq": unreadable.position.seq, "error": unreadable.error},
    )
    DEAD_LETTERS.labels(projection=projection).inc()
    dead_letter(
        cur,
        DeadLetter(projection, unreadable.position.seq, unreadable.position.tx, unreadable.error),
    )


class Work(NamedTuple):
    """One projection's share of a batch, and the cursor (connection) it folds on."""

    projection: ModuleType
    events: list[FoldEvent]
    cur: psycopg.Cursor[Any]


def fold_pipelined(
    work: Sequence[Work],
    read_next: Callable[[], None] | None = None,
    then: Callable[[], None] | None = None,
) -> list[Work]:
    """Folds every projection's events in pipelines, then queues `then`'s statements in
    them; returns the work an error undid: none, or that of each connection whose pipeline
    failed (rolled back to its savepoint, with `then`'s statements on it).

    Waiting for each statement left the server idle while Python folded, and Python idle
    while the server wrote. In a pipeline the writes queue up and run while Python folds
    the next projection, as long as nothing waits for a result behind them on the same
    connection. So the write-only projections of the side connection queue their writes
    first (its server works through them for the whole batch, on the other core), then the
    projections that read their stored rows first (those with `load`, then `apply`) all
    read before anything is written on the main connection, whose write-only projections
    queue their writes next, for the server to work through while Python merges the
    loaded rows.
    `read_next` (the prefetcher's request for the next batch) is called once everything is
    queued, so the next batch is read and decoded while this thread only waits for the
    servers to finish the writes. Requested as the batch began, the decoding competed for
    the GIL with the folding, whose every wakeup on the socket then waited for it
    (docs/PERFORMANCE.md, "The next batch is read once the current one is queued").
    An error only shows at the end (the pipeline's sync), too late to tell which
    projection it came from, so the whole batch is undone (a savepoint on each connection)
    and the caller folds it again projection by projection (`fold_isolated`). The
    savepoints are set and released inside the pipelines: psycopg's own (a transaction
    block around the pipeline) cost two round trips a connection, every batch.
    """
    conns = list({id(item.cur.connection): item.cur.connection for item in work}.values())
    loading = [item for item in work if hasattr(item.projection, "load")]
    writing = [item for item in work if not hasattr(item.projection, "load")]
    reading = {id(item.cur.connection) for item in loading}  # connections that load
    released: set[int] = set()
    try:
        with contextlib.ExitStack() as stack:
            for conn in conns:
                stack.enter_context(pipelined_savepoint(conn, released))
            for projection, events, cur in writing:
                if id(cur.connection) not in reading:
                    projection.fold(cur, events)
            loaded = [(item, item.projection.load(item.cur, item.events)) for item in loading]
            for projection, events, cur in writing:
                if id(cur.connection) in reading:
                    projection.fold(cur, events)
            for (projection, events, cur), state in loaded:
                projection.apply(cur, events, state)
            if read_next is not None:
                read_next()
            if then is not None:
                then()
        return []
    except Exception as exc:
        if any(conn.broken or conn.closed for conn in conns):
            raise  # the database is gone: nothing to isolate
        # (A connection whose pipeline synced before another's failed keeps its work.)
        for conn in conns:
            if id(conn) not in released:
                conn.execute(ROLLBACK_TO_FOLD)
        log.info(
            "pipelined batch fold failed; folding projection by projection",
            extra={"error": _first_line(exc)},
        )
        return [item for item in work if id(item.cur.connection) not in released]


# The savepoint of fold_pipelined, by name: set and released in the pipeline, rolled back
# to (after the pipeline's sync) when it fails.
SAVEPOINT_FOLD = "SAVEPOINT pipelined_fold"
RELEASE_FOLD = "RELEASE SAVEPOINT pipelined_fold"
ROLLBACK_TO_FOLD = "ROLLBACK TO SAVEPOINT pipelined_fold"


@contextlib.contextmanager
def pipelined_savepoint(conn: psycopg.Connection[Any], released: set[int]) -> Iterator[None]:
    """A pipeline on `conn` (in a transaction) opened by a savepoint, released at its end
    when the block and the pipeline's sync did not raise (then `id(conn)` is added to
    `released`); otherwise the caller rolls back to it (ROLLBACK_TO_FOLD)."""
    with conn.pipeline():
        conn.execute(SAVEPOINT_FOLD)
        yield
        conn.execute(RELEASE_FOLD)
    released.add(id(conn))


def fold_isolated(
    cur: psycopg.Cursor[Any],
    projection: ModuleType,
    events: list[FoldEvent],
    dead_letter: DeadLetterSink,
) -> None:
    """Folds `events`; when that raises, folds them one by one and dead-letters the failures."""
    conn = cur.connection
    try:
        with conn.transaction():
            projection.fold(cur, events)
        return
    except Exception as exc:
        if conn.broken or conn.closed:
            raise  # the database is gone: nothing to isolate
        # One line and a count, whatever the batch's size: each failing event gets its own
        # line (and dead letter) below, the error says why; a traceback says nothing more.
        FOLD_FALLBACKS.labels(projection=projection.NAME).inc()
        log.warning(
            "batch fold failed; folding its events one by one",
            extra={"projection": projection.NAME, "events": len(events), "error": _first_line(exc)},
        )
    for event in events:
        try:
            with conn.transaction():
                projection.fold(cur, [event])
        except Exception as exc:
            if conn.broken or conn.closed:
                raise
            error = _error_text(exc)
            log.error(
                "event fold failed; dead-lettered",
                extra={"projection": projection.NAME, "seq": event.seq, "error": error},
            )
            DEAD_LETTERS.labels(projection=projection.NAME).inc()
            dead_letter(cur, DeadLetter(projection.NAME, event.seq, event.position.tx, error))


def save_cursors(
    conn: psycopg.Connection[Any],
    cursors: dict[str, Position],
    result: BatchResult,
    side: psycopg.Connection[Any] | None = None,
    only: set[int] | None = None,
) -> None:
    """Stores the cursors of the projections `result` folded (SIDE_PROJECTIONS' on `side`);
    with `only`, of those folding on the connections of these ids."""
    for on, names in by_connection(result.folded, conn, side):
        if only is not None and id(on) not in only:
            continue
        with on.cursor() as cur:
            cur.execute(
                SAVE_STATES,
                {
                    "names": names,
                    "tx": [str(cursors[name].tx) for name in names],
                    "seq": [cursors[name].seq for name in names],
                    "n": [result.folded[name] for name in names],
                    "received": result.received_at,
                },
            )
