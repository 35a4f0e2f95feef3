"""What the database says about the projections and the projector lease, read at scrape time
by every process (the API's pods and every projector, standby too), so lag, stalls, dead
letters and leadership show on any pod, a hung projector's too.

One statement on the scrape's own connection, under a short statement_timeout, bounded in
work (the lag is counted to LAG_COUNTED_TO events). The
stall judgement is metastore.stalls' (`is_stalled`); a projection that stalls or recovers
is logged once per transition by StallLog.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, NamedTuple

import psycopg

from metastore.eventlog import HORIZON
from metastore.metrics import (
    LEASE_HELD,
    LEASE_HOLDER,
    PROJECTION_DEAD_LETTERS,
    PROJECTION_LAG_EVENTS,
    PROJECTION_LAG_SECONDS,
    PROJECTION_POSITION,
    PROJECTION_STALLED,
)
from metastore.stalls import is_stalled

log = logging.getLogger("metastore.projections")

# The scrape's own statement ends within this, whatever a projector or a lock does.
STATEMENT_TIMEOUT_MS = 2000

# Without JIT: the planner's guess of the lag counts' cost made PostgreSQL compile the
# statement for 1.4 s at 100,000 events behind, past the timeout under load.
SESSION = f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}; SET LOCAL jit = off"

# The active projector's session advisory lock, one of projections.schema's keys (a one-key
# lock: pg_locks shows it as classid 0, objid the key, objsubid 1); the holder's
# application_name names its pod.
LEADER_LOCK = 0x6D730002

# The lag is counted once per distinct cursor (the projections mostly share one), to
# 100,000 events as the projector's count was (past it, "at least"): 0.1-0.2 s for a store
# 100,000 events behind, where a count per projection took seven times that.
LAG_COUNTED_TO = 100_000
PROJECTIONS = f"""
WITH lags AS MATERIALIZED (  -- (the counts once per cursor, not per projection)
    SELECT c.cursor_tx, c.cursor_seq,
           (SELECT count(*) FROM (
                SELECT 1 FROM event_log e
                WHERE (e.tx, e.seq) > (c.cursor_tx, c.cursor_seq)
                  AND e.tx < {HORIZON}
                LIMIT {LAG_COUNTED_TO}) AS unfolded) AS events,
           (SELECT e.received_at FROM event_log e
            WHERE (e.tx, e.seq) > (c.cursor_tx, c.cursor_seq)
              AND e.tx < {HORIZON}
            ORDER BY e.tx, e.seq LIMIT 1) AS oldest
    FROM (SELECT DISTINCT cursor_tx, cursor_seq FROM projection_state) AS c)
SELECT p.name, p.cursor_seq, l.events,
       coalesce(extract(epoch FROM now() - l.oldest), 0)::float8,
       (SELECT count(*) FROM dead_letters d WHERE d.projection = p.name),
       extract(epoch FROM now() - p.updated_at)::float8
FROM projection_state p JOIN lags l USING (cursor_tx, cursor_seq)
ORDER BY p.name
"""

# pg_locks and pg_stat_activity's application_name are visible to every role.
LEASE_HOLDERS = """
SELECT coalesce(nullif(a.application_name, ''), 'pid ' || l.pid)
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.classid = 0 AND l.objid = %s::bigint::oid
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""


class ProjectionHealth(NamedTuple):
    name: str
    position_seq: int
    lag_events: int
    lag_seconds: float
    dead_letters: int
    idle_seconds: float


class StoreHealth(NamedTuple):
    projections: list[ProjectionHealth]
    lease_holders: list[str]


def read_store_health(conn: psycopg.Connection[Any]) -> StoreHealth:
    """Reads on `conn` (which it leaves idle) under STATEMENT_TIMEOUT_MS."""
    with conn.transaction():
        conn.execute(SESSION)
        projections = [ProjectionHealth(*r) for r in conn.execute(PROJECTIONS).fetchall()]
        holders = [r[0] for r in conn.execute(LEASE_HOLDERS, (LEADER_LOCK,)).fetchall()]
    return StoreHealth(projections, holders)


async def read_store_health_async(conn: psycopg.AsyncConnection[Any]) -> StoreHealth:
    async with conn.transaction():
        await conn.execute(SESSION)
        cur = await conn.execute(PROJECTIONS)
        projections = [ProjectionHealth(*r) for r in await cur.fetchall()]
        cur = await conn.execute(LEASE_HOLDERS, (LEADER_LOCK,))
        holders = [r[0] for r in await cur.fetchall()]
    return StoreHealth(projections, holders)


def publish(health: StoreHealth, stall_timeout: float) -> None:
    """Sets the gauges from one reading, and logs the stalls it finds begun or ended."""
    stalled = []
    for p in health.projections:
        labels = {"projection": p.name}
        PROJECTION_POSITION.labels(**labels).set(p.position_seq)
        PROJECTION_LAG_EVENTS.labels(**labels).set(p.lag_events)
        PROJECTION_LAG_SECONDS.labels(**labels).set(max(p.lag_seconds, 0.0))
        PROJECTION_DEAD_LETTERS.labels(**labels).set(p.dead_letters)
        stall = is_stalled(p.lag_events, p.lag_seconds, p.idle_seconds, stall_timeout)
        PROJECTION_STALLED.labels(**labels).set(1 if stall else 0)
        if stall:
            stalled.append(p.name)
    LEASE_HELD.set(1 if health.lease_holders else 0)
    LEASE_HOLDER.clear()  # a holder that left must not stay at 1
    for holder in health.lease_holders:
        LEASE_HOLDER.labels(holder=holder).set(1)
    STALL_LOG.observe(stalled, stall_timeout)


class StallLog:
    """Logs a warning when a projection stalls and an info line when it moves again: once
    per change this process sees (by /readyz's checks or a scrape), not once per check."""

    def __init__(self) -> None:
        self._stalled: set[str] | None = None
        self._lock = threading.Lock()

    def observe(self, stalled: list[str], stall_timeout: float) -> None:
        now = set(stalled)
        with self._lock:
            before, self._stalled = self._stalled or set(), now
        for name in sorted(now - before):
            log.warning(
                "projection stalled: not moved for over %g s while events wait",
                stall_timeout,
                extra={"projection": name},
            )
        for name in sorted(before - now):
            log.info("projection moving again", extra={"projection": name})


STALL_LOG = StallLog()
