"""The export feed: `GET /export/openlineage/events`, the stored events in log order.

A pull feed, resumable by an opaque cursor (a `metastore.eventlog.Position`): the cursor is
the consumer's whole state. Every answer first fixes a bound — the log's watermark, or where
`limit` events end — and reads only up to it, so the cursor it hands out is exact even while
appends commit out of order (see metastore/eventlog.py).

- JSON (default): `{"events": [...], "next_cursor": "..."}`, `limit` ≤ 1,000. `next_cursor` is
  never null: the last event's position when the page is full (or its bytes are, below),
  else the bound (with filters, a tailer moves past events that do not match instead of
  scanning them again).
- `Accept: application/x-ndjson`: one stored event a line, read page by page (constant
  memory), up to the watermark at the start of the request or `limit` events. The lines are
  the events alone, so the resume cursor is the `X-Next-Cursor` header, known before the
  first line because the bound is. A stream cut off midway is retried from the same cursor.
  Each line is one whole event: a stored text with line breaks (pretty-printed) goes out
  with its whitespace between tokens removed, and U+0085, U+2028 and U+2029 (line breaks
  to some splitters, allowed raw in JSON strings) escaped, so no string can start a line.
- A page holds at most PAGE_BYTES of stored events (the first one whatever its size, up to
  METASTORE_MAX_EVENT_BYTES): the page ends early and its cursor continues after it, so
  the API's memory is bounded by bytes, not by `limit`.
- `wait=N` (≤ 60 s): when nothing is past the cursor, wait for the next append (one LISTEN
  connection per process wakes every waiting request) and answer as soon as it is readable.

Events go out as stored (the `json` text as received), without a decode/encode round trip
in Python; only their positions and texts are read, so no stored value fails a page. With
authorization configured, a reader gets only the events it may see, their sensitive
facets left out where not allowed (metastore/export_access.py): a page may be sparse.
`namespace` and `job` match the job of run and job events; dataset events have no job, so
those filters leave them out.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import re
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import msgspec
import psycopg
from psycopg_pool import AsyncConnectionPool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from metastore import export_access
from metastore.authz import Authorizer
from metastore.eventlog import (
    NOTIFY_CHANNEL,
    START,
    EventText,
    Filters,
    Position,
    nth_position_after_async,
    read_texts_after_async,
    watermark_async,
)
from metastore.login import GatedAsyncConnection, LoginRefused
from metastore.metrics import EXPORT_EVENTS, EXPORT_WAITING
from metastore.principal import principal_of
from metastore.problems import ProblemError
from metastore.timeparam import plus_for_space

log = logging.getLogger("metastore.export")

NDJSON = "application/x-ndjson"
DEFAULT_LIMIT = 100
MAX_JSON_LIMIT = 1000
MAX_NDJSON_LIMIT = 1_000_000_000  # a stream is paged; the cap only keeps OFFSET in range
MAX_WAIT_S = 60.0
# Events per database read while streaming NDJSON: bounds the memory of one stream.
STREAM_PAGE = 500
# The stored bytes of one page (JSON) or one database read (NDJSON), past its first event.
# A page is then at most max(PAGE_BYTES, the largest event: 32 MB by default), and the
# API holds it about three times while answering (the rows' text, its bytes, the body).
PAGE_BYTES = 4 * 1024 * 1024
# An NDJSON line this long is sent on its own rather than joined with others (a copy).
SEND_ALONE = 256 * 1024
# While the LISTEN connection is down, waiting requests look at the log this often.
POLL_WITHOUT_LISTENER_S = 1.0
# Reading from a replica, they look this often too: the NOTIFY comes from the primary and
# may come before the replica has replayed the row, even before the request began waiting.
POLL_REPLICA_S = 0.25
# After a NOTIFY the new row can still be hidden behind an older running transaction (the
# read horizon); look again after these growing pauses until it shows.
RECHECK_FIRST_S = 0.005
RECHECK_MAX_S = 0.2
PARAMETERS = ("cursor", "namespace", "job", "run_id", "since", "limit", "wait")


class LogNotifier:
    """One LISTEN connection per process, waking every waiting long-poll when the log grows."""

    def __init__(self, database_url: str, *, reads_replica: bool = False) -> None:
        self._url = database_url
        self.reads_replica = reads_replica
        self._appended = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._first_attempt = asyncio.Event()
        self.listening = False

    def signal(self) -> asyncio.Event:
        """The event set by the next append. Take it before reading, so none is missed."""
        return self._appended

    def _wake(self) -> None:
        self._appended.set()
        self._appended = asyncio.Event()

    async def start(self, timeout: float = 2.0) -> None:
        """Starts listening; waits (briefly) for the first attempt, so the first long-poll
        after start is woken by NOTIFY rather than by polling."""
        self._task = asyncio.create_task(self._listen(), name="metastore-log-notifier")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._first_attempt.wait(), timeout)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._wake()

    async def _listen(self) -> None:
        backoff = 0.5
        while True:
            try:
                async with await GatedAsyncConnection.connect(
                    self._url, autocommit=True, connect_timeout=5
                ) as conn:
                    await conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    self.listening = True
                    self._first_attempt.set()
                    self._wake()  # appends may have happened while we were not listening
                    backoff = 0.5
                    while True:
                        async for _ in conn.notifies(timeout=30):
                            self._wake()
                        await conn.execute("SELECT 1")  # a dead server shows up here
            except (psycopg.Error, OSError) as exc:
                if not isinstance(exc, LoginRefused):  # (logged at each refused login)
                    log.warning(
                        "log notifications unavailable; long-polls fall back to polling",
                        extra={"error": type(exc).__name__},
                    )
            finally:
                self.listening = False
                self._first_attempt.set()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 10.0)


class FeedRequest(msgspec.Struct, frozen=True):
    cursor: Position
    filters: Filters
    limit: int | None
    wait: float
    ndjson: bool


def _bad(name: str, reason: str, kind: str | None = None) -> ProblemError:
    return ProblemError(400, f"query parameter {name!r}: {reason}", pointer=name, kind=kind)


def _parse_since(raw: str) -> dt.datetime:
    try:
        value = dt.datetime.fromisoformat(plus_for_space(raw))
    except ValueError:
        raise _bad("since", "expected an ISO 8601 date-time, e.g. 2024-05-01T00:00:00Z") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def _parse_int(name: str, raw: str, low: int, high: int) -> int:
    if not (raw.isascii() and raw.isdigit()):  # int() would also take "1_000" and " 7"
        raise _bad(name, "expected an integer")
    value = int(raw)
    if not low <= value <= high:
        raise _bad(name, f"must be between {low} and {high}")
    return value


def _parse_name(name: str, raw: str | None) -> str | None:
    if raw and "\x00" in raw:  # PostgreSQL text cannot hold U+0000: no name has it
        raise _bad(name, "cannot contain U+0000")
    return raw or None


def _parse_wait(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise _bad("wait", "expected a number of seconds") from None
    if not 0 <= value <= MAX_WAIT_S:  # also rejects nan
        raise _bad("wait", f"must be between 0 and {MAX_WAIT_S:g} seconds")
    return value


def wants_ndjson(accept: str) -> bool:
    """NDJSON when the client asks for it by name (a browser's `*/*` gets JSON)."""
    for item in accept.split(","):
        media, *params = item.split(";")
        if media.strip().lower() != NDJSON:
            continue
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    return float(value) > 0
                except ValueError:
                    return False
        return True
    return False


def parse_feed_request(request: Request) -> FeedRequest:
    query = request.query_params
    for name in query:
        if name not in PARAMETERS:
            raise _bad(name, f"unknown; the parameters are {', '.join(PARAMETERS)}")
        if len(query.getlist(name)) > 1:
            raise _bad(name, "given more than once")
    cursor = START
    if query.get("cursor"):
        try:
            cursor = Position.decode(query["cursor"])
        except ValueError:
            raise _bad(
                "cursor", "not a cursor handed out by this feed", kind="invalid-cursor"
            ) from None
    run_id = None
    if "run_id" in query:
        try:
            run_id = uuid.UUID(query["run_id"])
        except ValueError:
            raise _bad("run_id", "expected a UUID") from None
    ndjson = wants_ndjson(request.headers.get("accept", ""))
    limit = None
    if "limit" in query:
        limit = _parse_int(
            "limit", query["limit"], 1, MAX_NDJSON_LIMIT if ndjson else MAX_JSON_LIMIT
        )
    return FeedRequest(
        cursor=cursor,
        filters=Filters(
            namespace=_parse_name("namespace", query.get("namespace")),
            job=_parse_name("job", query.get("job")),
            run_id=run_id,
            since=_parse_since(query["since"]) if "since" in query else None,
        ),
        limit=limit,
        wait=_parse_wait(query["wait"]) if "wait" in query else 0.0,
        ndjson=ndjson,
    )


async def read_page(
    pool: AsyncConnectionPool[Any],
    cursor: Position,
    limit: int,
    filters: Filters,
    shown: export_access.EventFilter = export_access.EVERY_EVENT,
) -> tuple[list[EventText], Position]:
    """Up to `limit` events past `cursor` (at most PAGE_BYTES of them), those `shown` lets
    its reader see (export_access), and the cursor to continue from: past every event read."""
    async with pool.connection() as conn:
        bound = await watermark_async(conn)
        if bound <= cursor:
            return [], cursor
        events, capped = await read_texts_after_async(
            conn, cursor, limit, PAGE_BYTES, filters, until=bound
        )
    # A short page read everything up to the bound: continue from there.
    next_cursor = events[-1].position if capped or len(events) == limit else bound
    return await shown.visible(events), next_cursor


async def wait_for_page(
    pool: AsyncConnectionPool[Any],
    notifier: LogNotifier,
    cursor: Position,
    limit: int,
    filters: Filters,
    wait: float,
    shown: export_access.EventFilter = export_access.EVERY_EVENT,
) -> tuple[list[EventText], Position]:
    """`read_page`, waiting up to `wait` seconds for an append when there is nothing yet
    (that `shown` lets its reader see: past what it may not, the wait goes on from there)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    recheck: float | None = None
    EXPORT_WAITING.inc()
    try:
        while True:
            appended = notifier.signal()
            events, next_cursor = await read_page(pool, cursor, limit, filters, shown)
            remaining = deadline - loop.time()
            if events or remaining <= 0:
                return events, next_cursor
            if next_cursor > cursor:  # the appends we were woken for are readable now
                recheck = None
            cursor = next_cursor
            timeout = remaining
            if not notifier.listening:
                timeout = min(timeout, POLL_WITHOUT_LISTENER_S)
            if notifier.reads_replica:
                timeout = min(timeout, POLL_REPLICA_S)
            if recheck is not None:
                timeout = min(timeout, recheck)
            try:
                await asyncio.wait_for(appended.wait(), timeout)
                recheck = RECHECK_FIRST_S
            except TimeoutError:
                if recheck is not None:
                    recheck = min(recheck * 2, RECHECK_MAX_S)
    finally:
        EXPORT_WAITING.dec()


def _json_body(events: Sequence[EventText], next_cursor: Position) -> bytes:
    # One join, so a page is copied once (a page can be 32 MB).
    parts = [b'{"events":[']
    for event in events:
        parts += (event.text, b",")
    if events:
        parts.pop()
    parts += (b'],"next_cursor":"', next_cursor.encode().encode(), b'"}')
    return b"".join(parts)


async def _stream_bound(
    pool: AsyncConnectionPool[Any], cursor: Position, limit: int | None, filters: Filters
) -> Position:
    async with pool.connection() as conn:
        if limit is not None:
            nth = await nth_position_after_async(conn, cursor, limit, filters)
            if nth is not None:
                return nth
        return max(await watermark_async(conn), cursor)


async def _stream_lines(
    pool: AsyncConnectionPool[Any],
    cursor: Position,
    bound: Position,
    filters: Filters,
    shown: export_access.EventFilter = export_access.EVERY_EVENT,
) -> AsyncIterator[bytes]:
    while cursor < bound:
        async with pool.connection() as conn:
            page, capped = await read_texts_after_async(
                conn, cursor, STREAM_PAGE, PAGE_BYTES, filters, until=bound
            )
        if not page:
            return
        read, cursor = len(page), page[-1].position
        page = await shown.visible(page)
        # Small lines go out joined (one send for many); a large one alone, uncopied. Each
        # stored text is let go as its line is made, so a page is held about once.
        sent = len(page)
        page.reverse()
        parts: list[bytes] = []
        while page:
            line = ndjson_line(page.pop().text)
            if len(line) < SEND_ALONE:
                parts += (line, b"\n")
                continue
            if parts:
                yield b"".join(parts)
                parts = []
            yield line
            del line
            parts.append(b"\n")
        yield b"".join(parts)
        EXPORT_EVENTS.labels("ndjson").inc(sent)
        if read < STREAM_PAGE and not capped:
            return


# A JSON string (escapes included) or a run of whitespace: removing every whitespace run
# and keeping every string leaves the same JSON with no whitespace between tokens.
_STRING_OR_SPACE = re.compile(rb'("[^"\\]*(?:\\.[^"\\]*)*")|[ \t\n\r]+', re.DOTALL)
# Characters some line splitters break at (Python's str.splitlines, old JavaScript), which
# JSON allows raw inside strings: escaped, they are the same string.
_LINE_BREAKS_IN_STRINGS = (
    (b"\xc2\x85", b"\\u0085"),
    (b"\xe2\x80\xa8", b"\\u2028"),
    (b"\xe2\x80\xa9", b"\\u2029"),
)


def ndjson_line(text: bytes) -> bytes:
    """A stored event's JSON as one NDJSON line (without its newline): one whole event.

    JSON allows whitespace (and so line breaks) only between tokens, and a raw control
    character nowhere in a string, so a text without CR or LF is one line as stored; one
    with them (pretty-printed, or crafted to put a forged event on a line of its own) has
    the whitespace between its tokens removed (about 6 ns a byte, only for those).
    """
    if b"\n" in text or b"\r" in text:
        text = _STRING_OR_SPACE.sub(rb"\1", text)
    if b"\xc2\x85" in text or b"\xe2\x80" in text:
        for raw, escaped in _LINE_BREAKS_IN_STRINGS:
            text = text.replace(raw, escaped)
    return text


async def openlineage_events(request: Request) -> Response:
    await _may_read_export(request)
    feed = parse_feed_request(request)
    shown = export_access.EventFilter(request.app.state.authorizer, principal_of(request.scope))
    pool: AsyncConnectionPool[Any] = request.app.state.pool
    notifier: LogNotifier = request.app.state.log_notifier
    cursor = feed.cursor
    headers = {"Cache-Control": "no-store"}
    if feed.ndjson:
        if feed.wait > 0:
            found, next_cursor = await wait_for_page(
                pool, notifier, cursor, 1, feed.filters, feed.wait, shown
            )
            if not found:  # nothing that matches up to there
                cursor = next_cursor
        bound = await _stream_bound(pool, cursor, feed.limit, feed.filters)
        headers["X-Next-Cursor"] = bound.encode()
        return StreamingResponse(
            _stream_lines(pool, cursor, bound, feed.filters, shown),
            media_type=NDJSON,
            headers=headers,
        )
    limit = feed.limit or DEFAULT_LIMIT
    if feed.wait > 0:
        events, next_cursor = await wait_for_page(
            pool, notifier, cursor, limit, feed.filters, feed.wait, shown
        )
    else:
        events, next_cursor = await read_page(pool, cursor, limit, feed.filters, shown)
    EXPORT_EVENTS.labels("json").inc(len(events))
    headers["X-Next-Cursor"] = next_cursor.encode()
    return Response(_json_body(events, next_cursor), media_type="application/json", headers=headers)


async def _may_read_export(request: Request) -> None:
    """The feed is the whole log's: a principal the policy does not allow it gets a 403."""
    authorizer: Authorizer = request.app.state.authorizer
    if authorizer.enabled:
        principal = principal_of(request.scope)
        if not await authorizer.may(principal, "ReadExport"):
            who = repr(principal.name) if principal.name else "an anonymous caller"
            raise ProblemError(
                403,
                f"{who} may not read the export feed (operation ReadExport)",
                kind="policy-forbidden",
            )


routes = [Route("/export/openlineage/events", openlineage_events, methods=["GET"])]
