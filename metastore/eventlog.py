"""The event log: append events, read them back past a cursor.

Order and the cursor. `seq` is handed out when a row is inserted, but transactions commit
in any order, so a reader paging by `seq` can pass over a row whose transaction commits
later with a smaller `seq`. Instead the log's order is `(tx, seq)`, where `tx` is the id of
the writing transaction plus the store's offset (NEXT_TX), and readers only read rows with
`tx` below the oldest transaction still running plus that offset (HORIZON): every
transaction below that horizon has finished, so no row can ever appear behind a cursor that
has passed it. The offset is raised when the server's transaction counter is behind the log
(`catch_up_order`, sql/0005.log-clock.sql), so the order survives a restore into a new server.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import logging
import uuid
from collections.abc import Sequence
from typing import Any

import msgspec
import psycopg
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.rows import tuple_row

from metastore import pgarray
from metastore.pgarray import BinaryArray

NOTIFY_CHANNEL = "metastore_events"

log = logging.getLogger("metastore.eventlog")


class LogRecord(msgspec.Struct, frozen=True):
    """One event ready to append: the raw JSON and the envelope fields kept as columns."""

    event_time: dt.datetime
    kind: str  # "run" | "job" | "dataset"
    event_type: str | None
    run_id: uuid.UUID | None
    job_namespace: str | None
    job_name: str | None
    producer: str
    digest: bytes
    event_json: bytes
    # The namespaces the event writes (its job's and its outputs', a DatasetEvent's
    # dataset's), as stored: ingest asks whether the principal may write them.
    writes: tuple[str, ...] = ()


class Position(msgspec.Struct, frozen=True, order=True):
    """A place in the log: everything at or before it has been read."""

    tx: int = 0
    seq: int = 0

    def encode(self) -> str:
        return base64.urlsafe_b64encode(f"{self.tx}.{self.seq}".encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, cursor: str) -> Position:
        """Parses an opaque cursor; raises ValueError for anything we did not hand out."""
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
            tx_text, seq_text = raw.split(".")
            tx, seq = int(tx_text), int(seq_text)
        except (ValueError, UnicodeDecodeError, binascii.Error):
            raise ValueError("not a cursor handed out by this service") from None
        if tx < 0 or seq < 0 or tx >= 2**64 or seq >= 2**63:
            raise ValueError("not a cursor handed out by this service")
        return cls(tx, seq)


START = Position(0, 0)


class StoredEvent(msgspec.Struct, frozen=True):
    """An event read back from the log."""

    position: Position
    # None only when read with guard_times=True and the time is outside what Python holds.
    received_at: dt.datetime | None
    event_time: dt.datetime | None
    kind: str
    event_type: str | None
    run_id: uuid.UUID | None
    job_namespace: str | None
    job_name: str | None
    event: Any  # the decoded JSON document, or raw JSON text when read with raw=True


# The log's order offset (sql/0005.log-clock.sql), read by the statement itself: a table
# the statement names is locked before the statement's snapshot is taken, so an append waits
# for a raise and then sees it; and the plan is cached (a SQL function doing the same is
# planned at every call).
NEXT_TX = (
    "(SELECT (pg_current_xact_id()::text::bigint + c.xid_offset)::text::xid8"
    " FROM event_log_clock c)"
)
# Readers read below it: every transaction under it has finished (an older offset only holds
# a reader back).
HORIZON = (
    "(SELECT (pg_snapshot_xmin(pg_current_snapshot())::text::bigint + c.xid_offset)::text::xid8"
    " FROM event_log_clock c)"
)


# One statement, so an append is one round trip (on an autocommit connection, the commit
# too): PostgreSQL no longer sits idle in transaction between BEGIN, INSERT, COPY, NOTIFY
# and COMMIT (docs/PERFORMANCE.md, "Ingest ahead of the router"). The digests are inserted
# in sorted order so that concurrent appends holding overlapping events take their row
# locks in the same order and cannot deadlock; the events keep their order. The
# parameters go as binary arrays (metastore/pgarray.py): no array quoting of the JSON text
# and no per-element dumping in Python. The digests are inserted from their own array, so
# `input` is read once and stays inlined instead of being copied into a CTE store
# (docs/PERFORMANCE.md, "Batches"). `::json` also fits a log created with a jsonb `event`
# column (an assignment cast), as the first schema had it.
APPEND_EVENTS = f"""
WITH fresh AS (
    INSERT INTO event_digests (digest)
    SELECT d FROM unnest(%(digest)b::bytea[]) AS d ORDER BY d
    ON CONFLICT DO NOTHING
    RETURNING digest
), input AS (
    SELECT * FROM unnest(
        %(event_time)b::timestamptz[], %(kind)b::text[], %(event_type)b::text[],
        %(run_id)b::uuid[], %(job_namespace)b::text[], %(job_name)b::text[],
        %(producer)b::text[], %(digest)b::bytea[], %(size_bytes)b::integer[], %(event)b::text[]
    ) WITH ORDINALITY AS i (event_time, kind, event_type, run_id, job_namespace, job_name,
                             producer, digest, size_bytes, event, ord)
), stored AS (
    INSERT INTO event_log
        (tx, event_time, kind, event_type, run_id, job_namespace, job_name, producer, digest,
         size_bytes, event)
    SELECT {NEXT_TX}, i.event_time, i.kind, i.event_type, i.run_id,
           i.job_namespace, i.job_name, i.producer, i.digest, i.size_bytes, i.event::json
    FROM input i JOIN fresh USING (digest)
    ORDER BY i.ord
    RETURNING 1
)
SELECT s.appended
FROM (SELECT count(*) AS appended FROM stored) s
LEFT JOIN LATERAL (SELECT pg_notify('{NOTIFY_CHANNEL}', '') WHERE s.appended > 0) n ON true
"""


def _append_params(records: Sequence[LogRecord]) -> dict[str, BinaryArray] | None:
    """The columns of the records not repeated earlier in `records`; None when empty."""
    unique: dict[bytes, LogRecord] = {}
    for record in records:
        unique.setdefault(record.digest, record)
    if not unique:
        return None
    rows = list(unique.values())
    return {
        "event_time": pgarray.timestamptz_array([r.event_time for r in rows]),
        "kind": pgarray.text_array([r.kind for r in rows]),
        "event_type": pgarray.text_array([r.event_type for r in rows]),
        "run_id": pgarray.uuid_array([r.run_id for r in rows]),
        "job_namespace": pgarray.text_array([r.job_namespace for r in rows]),
        "job_name": pgarray.text_array([r.job_name for r in rows]),
        "producer": pgarray.text_array([r.producer for r in rows]),
        "digest": pgarray.bytea_array([r.digest for r in rows]),
        "size_bytes": pgarray.int4_array([len(r.event_json) for r in rows]),
        "event": pgarray.text_array([r.event_json for r in rows]),
    }


def append_events(conn: psycopg.Connection[Any], records: Sequence[LogRecord]) -> int:
    """Appends the records not already in the log; returns how many were new.

    In the caller's transaction, or as a transaction of its own on an autocommit
    connection. Duplicates (same digest, in the log or earlier in `records`) are skipped:
    an exact retry is stored once. A concurrent transaction appending the same event makes
    this one wait for it, then skip it. When anything was new, a NOTIFY wakes readers;
    PostgreSQL delivers it at commit.
    """
    params = _append_params(records)
    if params is None:
        return 0
    with conn.cursor(row_factory=tuple_row) as cur:
        pgarray.register(cur)
        cur.execute(APPEND_EVENTS, params)
        row = cur.fetchone()
    assert row is not None
    return int(row[0])


async def append_events_async(
    conn: psycopg.AsyncConnection[Any], records: Sequence[LogRecord]
) -> int:
    """`append_events` on an async connection (the group committer's)."""
    params = _append_params(records)
    if params is None:
        return 0
    async with conn.cursor(row_factory=tuple_row) as cur:
        pgarray.register(cur)
        await cur.execute(APPEND_EVENTS, params)
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


ENSURE_PARTITIONS = "SELECT event_log_ensure_partitions(%(months_ahead)s)"

# Raises the order's offset when this server's transaction counter is behind the log (a
# restore into a new server); 0 almost always, without taking a lock.
CATCH_UP = "SELECT event_log_catch_up()"


def _caught_up(row: tuple[Any, ...] | None) -> int:
    raised = int(row[0]) if row else 0
    if raised:
        log.warning(
            "this server's transaction counter was behind the event log (a restore or a move "
            "to a new server): new events now sort after the restored ones",
            extra={"offset_raised_by": raised},
        )
    return raised


def catch_up_order(conn: psycopg.Connection[Any]) -> int:
    """Moves the log's order past every stored position if the server's transaction counter
    is behind them; returns by how much (0: nothing to do). Commits unless autocommit."""
    with conn.cursor(row_factory=tuple_row) as cur:
        cur.execute(CATCH_UP)
        row = cur.fetchone()
    if not conn.autocommit:
        conn.commit()
    return _caught_up(row)


async def catch_up_order_async(conn: psycopg.AsyncConnection[Any]) -> int:
    """`catch_up_order` on an async connection (the API's ingest pool)."""
    async with conn.cursor(row_factory=tuple_row) as cur:
        await cur.execute(CATCH_UP)
        row = await cur.fetchone()
    if not conn.autocommit:
        await conn.commit()
    return _caught_up(row)


# The committed events past a cursor, in log order (`{filters}`: more conditions). ORDER BY
# names the table's columns: a bare `tx` would mean the output column `tx::text::bigint`,
# which no index has, and every read would sort the whole log.
_PAST_CURSOR = f"""FROM event_log
WHERE (tx, seq) > (%(tx)s::text::xid8, %(seq)s)
  AND tx < {HORIZON}
  {{filters}}
ORDER BY event_log.tx, event_log.seq
"""
READ_AFTER = f"""
SELECT tx::text::bigint, seq, {{times}}, kind, event_type, run_id,
       job_namespace, job_name, {{event}}
{_PAST_CURSOR}LIMIT %(limit)s
"""


class Filters(msgspec.Struct, frozen=True):
    """Optional filters on the envelope columns (all must match)."""

    namespace: str | None = None
    job: str | None = None
    run_id: uuid.UUID | None = None
    since: dt.datetime | None = None


# Each filter's condition on its column, its value the parameter `f_<filter>`.
_FILTER_CONDITIONS = {
    "namespace": "job_namespace =",
    "job": "job_name =",
    "run_id": "run_id =",
    "since": "event_time >=",
}


def _filter_sql(filters: Filters | None) -> tuple[str, dict[str, Any]]:
    if filters is None:
        return "", {}
    clauses: list[str] = []
    params: dict[str, Any] = {}
    for name, condition in _FILTER_CONDITIONS.items():
        value = getattr(filters, name)
        if value is not None:
            clauses.append(f"AND {condition} %(f_{name})s")
            params[f"f_{name}"] = value
    return "\n  ".join(clauses), params


TIMES = "received_at, event_time"
# Python's datetime (psycopg's timestamptz loader) holds years 1 to 9999 only; PostgreSQL
# holds more, and one such value fails the whole read. Guarded, those read as NULL.
_IN_RANGE = (
    "CASE WHEN {0} BETWEEN '0001-01-01 00:00:00+00' AND '9999-12-31 23:59:59.999999+00' "
    "THEN {0} END"
)
GUARDED_TIMES = f"{_IN_RANGE.format('received_at')}, {_IN_RANGE.format('event_time')}"

READ_UNTIL = "AND (tx, seq) <= (%(u_tx)s::text::xid8, %(u_seq)s)"


def _read_query(
    after: Position,
    limit: int,
    filters: Filters | None,
    raw: bool,
    until: Position | None,
    guard_times: bool = False,
) -> tuple[str, dict[str, Any]]:
    where, params = _filter_sql(filters)
    if until is not None:
        where = f"{where}\n  {READ_UNTIL}"
        params.update(u_tx=until.tx, u_seq=until.seq)
    query = READ_AFTER.format(
        times=GUARDED_TIMES if guard_times else TIMES,
        event="event::text" if raw else "event",
        filters=where,
    )
    return query, {"tx": after.tx, "seq": after.seq, "limit": limit, **params}


def _stored_events(rows: list[tuple[Any, ...]]) -> list[StoredEvent]:
    return [
        StoredEvent(Position(r[0], r[1]), r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9])
        for r in rows
    ]


def read_events_after(
    conn: psycopg.Connection[Any],
    after: Position,
    limit: int,
    filters: Filters | None = None,
    raw: bool = False,
    until: Position | None = None,
    guard_times: bool = False,
) -> list[StoredEvent]:
    """Reads up to `limit` committed events past `after` (and at or before `until`), in log order.

    With `raw=True` the event is the JSON text as PostgreSQL renders it (no decode/encode
    round trip in Python, for the export feed); otherwise the decoded document. With
    `guard_times=True` a time Python cannot hold is None instead of failing the read
    (psycopg.DataError).
    """
    query, params = _read_query(after, limit, filters, raw, until, guard_times)
    with conn.cursor(row_factory=tuple_row) as cur:
        cur.execute(query, params)
        return _stored_events(cur.fetchall())


# The projector's batch: up to `limit` events, and no more of them than add up to
# `max_bytes` of stored JSON (the first whatever its size), so a batch's memory follows its
# bytes (ten 4 MB events in one batch took the projector past 1 GiB). The row that would
# pass the budget (the second, when the first alone does) comes back with its event NULL
# (its text is never read: a value only leaves TOAST when an expression uses it), which
# tells the reader the batch was cut. `alone`: false when the page continues a batch (the
# prefetcher's), whose rest of the budget even the first must fit. `running` gives the
# bytes read.
READ_BATCH_AFTER = f"""
SELECT tx::text::bigint, seq, {{times}}, kind, event_type, run_id, job_namespace, job_name,
       CASE WHEN (n = 1 AND %(alone)s) OR running <= %(max_bytes)s THEN event::text END,
       running
FROM (
    SELECT tx, seq, received_at, event_time, kind, event_type, run_id, job_namespace,
           job_name, event, size_bytes, row_number() OVER w AS n,
           sum(size_bytes) OVER w AS running
    FROM (
        SELECT * FROM event_log
        WHERE (tx, seq) > (%(tx)s::text::xid8, %(seq)s)
          AND tx < {HORIZON}
        ORDER BY event_log.tx, event_log.seq
        LIMIT %(limit)s
    ) AS page
    WINDOW w AS (ORDER BY page.tx, page.seq ROWS UNBOUNDED PRECEDING)
) AS sized
WHERE n <= 2 OR running - size_bytes <= %(max_bytes)s
ORDER BY sized.tx, sized.seq
"""


def batch_after_query(
    after: Position, limit: int, max_bytes: int, guard_times: bool = False, alone: bool = True
) -> tuple[str, dict[str, Any]]:
    """The projector's read of up to `limit` committed events past `after`, as raw JSON
    text, in log order, as long as their stored sizes add up to at most `max_bytes` (the
    first one whatever its size, if `alone`): its statement and parameters, for batch_rows.
    `guard_times`: see read_events_after."""
    query = READ_BATCH_AFTER.format(times=GUARDED_TIMES if guard_times else TIMES)
    params = {"tx": after.tx, "seq": after.seq, "limit": limit, "max_bytes": max_bytes}
    return query, {**params, "alone": alone}


def batch_rows(rows: list[tuple[Any, ...]]) -> tuple[list[StoredEvent], bool, int]:
    """batch_after_query's events (those before the first row whose event is NULL: past
    the budget), whether the budget cut them short, and their stored bytes."""
    kept = next((i for i, row in enumerate(rows) if row[9] is None), len(rows))
    return _stored_events(rows[:kept]), kept < len(rows), rows[kept - 1][10] if kept else 0


async def read_events_after_async(
    conn: psycopg.AsyncConnection[Any],
    after: Position,
    limit: int,
    filters: Filters | None = None,
    raw: bool = False,
    until: Position | None = None,
) -> list[StoredEvent]:
    """`read_events_after` on an async connection (the API process)."""
    query, params = _read_query(after, limit, filters, raw, until)
    async with conn.cursor(row_factory=tuple_row) as cur:
        await cur.execute(query, params)
        return _stored_events(await cur.fetchall())


# The export feed's page: positions and sizes first, then the texts of those that fit a
# byte budget, so an event past the budget is never read into the API (ten 30 MB events in
# one page took it to 1.65 GB). Only the position and the text: no time is loaded, so no
# stored value can fail the read.
READ_SIZES_AFTER = f"""
SELECT tx::text::bigint, seq, size_bytes
{_PAST_CURSOR}LIMIT %(limit)s
"""
READ_TEXTS_AFTER = """
SELECT tx::text::bigint, seq, event::text
FROM event_log
WHERE (tx, seq) > (%(tx)s::text::xid8, %(seq)s)
  AND (tx, seq) <= (%(u_tx)s::text::xid8, %(u_seq)s)
  {filters}
ORDER BY event_log.tx, event_log.seq
"""


class EventText(msgspec.Struct, frozen=True):
    position: Position
    text: bytes  # the stored JSON text, UTF-8


class _TextAsBytes(Loader):
    """Loads `text` as its UTF-8 bytes: the export sends the bytes it reads, and a str
    (then encoded) made two more copies of every page (64 MB of a 32 MB event)."""

    def load(self, data: Buffer) -> bytes:
        return bytes(data)


async def read_texts_after_async(
    conn: psycopg.AsyncConnection[Any],
    after: Position,
    limit: int,
    max_bytes: int,
    filters: Filters | None = None,
    until: Position | None = None,
) -> tuple[list[EventText], bool]:
    """Up to `limit` events past `after` (at or before `until`), in log order, as long as
    their stored sizes add up to at most `max_bytes` (the first one whatever its size);
    and whether the budget ended the page before `limit` or `until`."""
    where, params = _filter_sql(filters)
    if until is not None:
        where = f"{where}\n  {READ_UNTIL}"
        params.update(u_tx=until.tx, u_seq=until.seq)
    params.update(tx=after.tx, seq=after.seq, limit=limit)
    async with conn.cursor(row_factory=tuple_row) as cur:
        await cur.execute(READ_SIZES_AFTER.format(filters=where), params)
        sizes = await cur.fetchall()
        if not sizes:
            return [], False
        taken, total = 0, 0
        for _, _, size in sizes:
            if taken and total + size > max_bytes:
                break
            taken, total = taken + 1, total + size
        last = Position(sizes[taken - 1][0], sizes[taken - 1][1])
        where, params = _filter_sql(filters)
        params.update(tx=after.tx, seq=after.seq, u_tx=last.tx, u_seq=last.seq)
        cur.adapters.register_loader("text", _TextAsBytes)
        await cur.execute(READ_TEXTS_AFTER.format(filters=where), params)
        rows = await cur.fetchall()
    return [EventText(Position(r[0], r[1]), r[2]) for r in rows], taken < len(sizes)


WATERMARK = f"""
SELECT coalesce(
    (SELECT tx::text::bigint FROM event_log
     WHERE tx < {HORIZON}
     ORDER BY event_log.tx DESC, event_log.seq DESC LIMIT 1), 0),
    coalesce(
    (SELECT seq FROM event_log
     WHERE tx < {HORIZON}
     ORDER BY event_log.tx DESC, event_log.seq DESC LIMIT 1), 0)
"""


def watermark(conn: psycopg.Connection[Any]) -> Position:
    """The position of the last event a reader can read now (START for an empty log)."""
    with conn.cursor(row_factory=tuple_row) as cur:
        cur.execute(WATERMARK)
        row = cur.fetchone()
    assert row is not None
    return Position(row[0], row[1])


async def watermark_async(conn: psycopg.AsyncConnection[Any]) -> Position:
    """`watermark` on an async connection (the API process)."""
    async with conn.cursor(row_factory=tuple_row) as cur:
        await cur.execute(WATERMARK)
        row = await cur.fetchone()
    assert row is not None
    return Position(row[0], row[1])


# The position of the n-th committed event past a cursor (OFFSET n-1): where a read of n
# events would end, known before any of them is sent (the export stream announces it).
NTH_AFTER = f"""
SELECT tx::text::bigint, seq
{_PAST_CURSOR}OFFSET %(offset)s LIMIT 1
"""


async def nth_position_after_async(
    conn: psycopg.AsyncConnection[Any], after: Position, n: int, filters: Filters | None = None
) -> Position | None:
    """The position of the `n`-th (1-based) committed event past `after`; None if fewer."""
    assert n >= 1
    where, params = _filter_sql(filters)
    async with conn.cursor(row_factory=tuple_row) as cur:
        await cur.execute(
            NTH_AFTER.format(filters=where),
            {"tx": after.tx, "seq": after.seq, "offset": n - 1, **params},
        )
        row = await cur.fetchone()
    return None if row is None else Position(row[0], row[1])
