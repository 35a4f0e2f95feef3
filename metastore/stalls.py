"""Which projections are stalled: not moved for longer than METASTORE_STALL_TIMEOUT while
events wait for them. Read by /readyz (the API's and the projector's) and /api/v1/status.

A projection moves its cursor (and `projection_state.updated_at`) with every batch it
folds; one that has folded nothing for that long while the oldest event past its cursor is
older than that is stalled, whatever the cause (a rebuild in progress, a projector down or
on another catalog map, a fold that never ends). A projection at the end of the log is
never stalled, however long it has been idle, and neither is one just handed an event.
"""

from __future__ import annotations

from typing import Any

import psycopg

from metastore.eventlog import HORIZON

STALLED = f"""
SELECT p.name FROM projection_state p
WHERE p.updated_at < now() - make_interval(secs => %(seconds)s)
  AND (SELECT e.received_at FROM event_log e
       WHERE (e.tx, e.seq) > (p.cursor_tx, p.cursor_seq)
         AND e.tx < {HORIZON}
       ORDER BY e.tx, e.seq LIMIT 1) < now() - make_interval(secs => %(seconds)s)
ORDER BY p.name
"""


def stalled_projections(conn: psycopg.Connection[Any], seconds: float) -> list[str]:
    return [row[0] for row in conn.execute(STALLED, {"seconds": seconds}).fetchall()]


async def stalled_projections_async(
    conn: psycopg.AsyncConnection[Any], seconds: float
) -> list[str]:
    cur = await conn.execute(STALLED, {"seconds": seconds})
    return [row[0] for row in await cur.fetchall()]


def is_stalled(lag_events: int, lag_seconds: float, idle_seconds: float, seconds: float) -> bool:
    """The same judgement from a projection's lag and how long since its cursor moved."""
    return lag_events > 0 and lag_seconds > seconds and idle_seconds > seconds
