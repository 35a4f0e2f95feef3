"""Group commit: the events of concurrent ingest requests appended in shared transactions.

One INSERT and one commit per request caps ingest at the rate PostgreSQL commits. Instead
each request hands its events to the committer and waits; a few worker tasks each take
everything pending (up to a group's limits), append it in one transaction (one statement
on an autocommit connection, so one round trip) and, only after the commit, answer every
request of the group. A request's events always go into one group, so a batch is stored
all at once or not at all.

A database outage fails the waiting requests with the psycopg/pool error (the app answers
503 with Retry-After; clients retry, and the log's dedup makes a retry of an event that
did get committed harmless). An event PostgreSQL itself refuses (say a number beyond
`numeric`) would fail its whole group, so the group is then retried one event at a time
and only that event is refused.

The committer also keeps the log's monthly partitions created ahead (at start, then daily),
so a long-running deployment never falls into the default partition.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from metastore.db import DATABASE_UNAVAILABLE, POOL_TIMEOUT_S
from metastore.eventlog import ENSURE_PARTITIONS, LogRecord, append_events_async
from metastore.metrics import GROUP_COMMIT_EVENTS, INGEST_EVENTS

log = logging.getLogger("metastore.ingest")

WORKERS = 2  # transactions in flight at once: one fills while the other commits
MAX_GROUP_EVENTS = 1000
MAX_GROUP_BYTES = 4 * 1024 * 1024
MAX_PENDING_BYTES = 256 * 1024 * 1024  # beyond this, new requests get 503 (back-pressure)
# While the database is known to be down, fail fast rather than wait the pool's timeout:
# clients (openlineage-python: 5 s) should see a 503, not their own timeout.
DOWN_POOL_TIMEOUT_S = 1.0
COMMIT_TIMEOUT_S = 20.0
PARTITIONS_AHEAD = 3
PARTITION_INTERVAL_S = 24 * 3600.0
PARTITION_RETRY_S = 60.0

# Errors that mean "this event cannot be stored" rather than "the service is unwell".
EVENT_REFUSED = (psycopg.errors.DataError, psycopg.errors.ProgramLimitExceeded)

# An event's outcome: None when it is in the log (new or a duplicate), else why PostgreSQL
# refused it (not retriable).
Outcome = str | None


class Unavailable(Exception):
    """The committer cannot take events now (stopping, overloaded, or a server fault)."""


class _Pending:
    __slots__ = ("future", "records", "size")

    def __init__(self, records: Sequence[LogRecord], future: asyncio.Future[list[Outcome]]):
        self.records = records
        self.size = sum(len(r.event_json) for r in records)
        self.future = future


class GroupCommitter:
    """Appends concurrent requests' events in shared transactions.

    `pool` hands out autocommit connections: a group's append is one statement, and that
    statement is its transaction.
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        *,
        workers: int = WORKERS,
        max_group_events: int = MAX_GROUP_EVENTS,
        max_group_bytes: int = MAX_GROUP_BYTES,
        max_pending_bytes: int = MAX_PENDING_BYTES,
        partition_interval: float = PARTITION_INTERVAL_S,
    ) -> None:
        self._pool = pool
        self._workers = workers
        self._max_group_events = max_group_events
        self._max_group_bytes = max_group_bytes
        self._max_pending_bytes = max_pending_bytes
        self._partition_interval = partition_interval
        self._pending: collections.deque[_Pending] = collections.deque()
        self._pending_bytes = 0
        self._in_flight = 0
        self._wakeup = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._accepting = False
        self._database_down = False

    async def start(self) -> None:
        self._accepting = True
        self._tasks = [
            asyncio.create_task(self._work(), name=f"group-commit-{i}")
            for i in range(self._workers)
        ]
        self._tasks.append(asyncio.create_task(self._keep_partitions(), name="partitions"))

    async def stop(self, drain_timeout: float = 10.0) -> None:
        """Stops taking events, commits what is pending (for a while), stops the workers."""
        self._accepting = False
        deadline = time.monotonic() + drain_timeout
        while (self._pending or self._in_flight) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        while self._pending:
            pending = self._pending.popleft()
            if not pending.future.done():
                pending.future.set_exception(Unavailable("the service is stopping"))

    async def append(self, records: Sequence[LogRecord]) -> list[Outcome]:
        """Appends the records in a shared transaction; returns after the commit.

        One outcome per record. Raises the psycopg/pool error when the database is
        unreachable, Unavailable when the committer cannot take the events now.
        """
        if not self._accepting:
            raise Unavailable("the service is stopping")
        pending = _Pending(records, asyncio.get_running_loop().create_future())
        if self._pending_bytes and self._pending_bytes + pending.size > self._max_pending_bytes:
            raise Unavailable("too many events are waiting to be written")
        self._pending.append(pending)
        self._pending_bytes += pending.size
        self._wakeup.set()
        return await pending.future

    def _take_group(self) -> list[_Pending]:
        group: list[_Pending] = []
        events = size = 0
        while self._pending:
            head = self._pending[0]
            if group and (
                events + len(head.records) > self._max_group_events
                or size + head.size > self._max_group_bytes
            ):
                break
            self._pending.popleft()
            self._pending_bytes -= head.size
            if head.future.done():  # the client went away before we got to it
                continue
            group.append(head)
            events += len(head.records)
            size += head.size
        return group

    async def _work(self) -> None:
        while True:
            if not self._pending:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            group = self._take_group()
            if not group:
                continue
            self._in_flight += 1
            try:
                await self._commit(group)
            except Exception as exc:  # never lose a worker; the requests get a 503
                log.exception("group commit failed")
                _fail(group, Unavailable(f"internal error: {type(exc).__name__}"))
            finally:
                self._in_flight -= 1

    def _pool_timeout(self) -> float:
        return DOWN_POOL_TIMEOUT_S if self._database_down else POOL_TIMEOUT_S

    async def _commit(self, group: list[_Pending]) -> None:
        records = [record for pending in group for record in pending.records]
        for attempt in (1, 2):
            try:
                # A PostgreSQL that stops answering (no error, no RST) must not hang requests.
                async with (
                    asyncio.timeout(COMMIT_TIMEOUT_S),
                    self._pool.connection(timeout=self._pool_timeout()) as conn,
                ):
                    # On the committer's autocommit connection this one statement is the
                    # whole transaction: when it returns, the events are committed.
                    new = await append_events_async(conn, records)
                break
            except TimeoutError:
                log.error("appending to the event log timed out", extra={"events": len(records)})
                INGEST_EVENTS.labels("failed").inc(len(records))
                _fail(group, Unavailable("the event log did not answer in time"))
                return
            except EVENT_REFUSED:
                await self._commit_separately(group)
                return
            except DATABASE_UNAVAILABLE as exc:
                # A connection broken by a PostgreSQL restart fails once: retry on a fresh
                # one (safe: a retry of committed events is deduplicated).
                if attempt == 1 and not isinstance(exc, PoolTimeout):
                    continue
                self._database_down = True
                INGEST_EVENTS.labels("failed").inc(len(records))
                _fail(group, exc)
                return
            except psycopg.Error as exc:
                log.error("appending to the event log failed", extra={"error": str(exc)})
                INGEST_EVENTS.labels("failed").inc(len(records))
                _fail(group, Unavailable("the event log cannot be written now"))
                return
        self._database_down = False
        GROUP_COMMIT_EVENTS.observe(len(records))
        INGEST_EVENTS.labels("stored").inc(new)
        INGEST_EVENTS.labels("duplicate").inc(len(records) - new)
        for pending in group:
            if not pending.future.done():
                pending.future.set_result([None] * len(pending.records))

    async def _commit_separately(self, group: list[_Pending]) -> None:
        """One transaction per event, so only the events PostgreSQL refuses fail."""
        for pending in group:
            outcomes: list[Outcome] = []
            try:
                async with self._pool.connection(timeout=self._pool_timeout()) as conn:
                    for record in pending.records:
                        try:
                            async with conn.transaction():
                                new = await append_events_async(conn, [record])
                            outcomes.append(None)
                            INGEST_EVENTS.labels("stored" if new else "duplicate").inc()
                        except EVENT_REFUSED as exc:
                            reason = exc.diag.message_primary or type(exc).__name__
                            outcomes.append(f"PostgreSQL cannot store this event: {reason}")
                            INGEST_EVENTS.labels("invalid").inc()
            except DATABASE_UNAVAILABLE as exc:
                _fail([pending], exc)
                continue
            except psycopg.Error as exc:
                log.error("appending to the event log failed", extra={"error": str(exc)})
                _fail([pending], Unavailable("the event log cannot be written now"))
                continue
            if not pending.future.done():
                pending.future.set_result(outcomes)

    async def _keep_partitions(self) -> None:
        while True:
            try:
                async with self._pool.connection() as conn:
                    await conn.execute(ENSURE_PARTITIONS, {"months_ahead": PARTITIONS_AHEAD})
                delay = self._partition_interval
            except (psycopg.Error, PoolTimeout) as exc:
                log.warning("creating event log partitions failed", extra={"error": str(exc)})
                delay = PARTITION_RETRY_S
            await asyncio.sleep(delay)


def _fail(group: list[_Pending], exc: BaseException) -> None:
    for pending in group:
        if not pending.future.done():
            pending.future.set_exception(exc)
