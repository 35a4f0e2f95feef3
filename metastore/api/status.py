"""GET /status: how big the log is, where it ends, and how far each projection lags."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from metastore import __version__
from metastore.api import models_status
from metastore.api.db import connection, row, rows
from metastore.api.operation import Operation, Resource
from metastore.api.readmodels import EXPECTED, other_versions
from metastore.api.responses import json_response
from metastore.eventlog import HORIZON, WATERMARK, Position
from metastore.stalls import is_stalled

EXACT_COUNT_BELOW = 50_000

# The planner's row estimate over the partitions (cheap at any size), and their size.
LOG_ESTIMATE = """
SELECT coalesce(sum(greatest(c.reltuples, 0)), 0)::bigint,
       coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'event_log'::regclass
"""
LOG_COUNT = "SELECT count(*) FROM event_log"
LAST_RECEIVED = f"""
SELECT received_at FROM event_log
WHERE tx < {HORIZON}
ORDER BY tx DESC, seq DESC LIMIT 1
"""

# Lag counts the readable events past each projection's cursor; lag_seconds is the age
# of the oldest of them (0 when it has folded everything readable).
PROJECTIONS = f"""
SELECT p.name, p.version, p.cursor_tx::text::bigint, p.cursor_seq, p.events_folded,
       p.updated_at,
       (SELECT count(*) FROM event_log e
        WHERE (e.tx, e.seq) > (p.cursor_tx, p.cursor_seq)
          AND e.tx < {HORIZON}),
       coalesce(extract(epoch FROM now() - (
           SELECT e.received_at FROM event_log e
           WHERE (e.tx, e.seq) > (p.cursor_tx, p.cursor_seq)
             AND e.tx < {HORIZON}
           ORDER BY e.tx, e.seq LIMIT 1)), 0)::float8,
       (SELECT count(*) FROM dead_letters d WHERE d.projection = p.name),
       extract(epoch FROM now() - p.updated_at)::float8
FROM projection_state p
ORDER BY p.name
"""

# Whether this is a streaming replica, and how far its replay is behind the WAL it has
# received (0 when it has replayed all of it: an idle primary is not lag).
REPLICATION = """
SELECT pg_is_in_recovery(),
       CASE WHEN NOT pg_is_in_recovery()
              OR pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn()
            THEN 0
            ELSE greatest(coalesce(
                extract(epoch FROM now() - pg_last_xact_replay_timestamp()), 0), 0)
       END::float8
"""

STATUS_OP = Operation(
    "GET",
    "/status",
    "getStatus",
    "How fresh the answers are",
    models_status.Status,
    tag="status",
    description="The log's size and last readable position, and for each projection its "
    "position, how many events and seconds it lags behind the log, and its dead letters. "
    "`freshness` adds the lag of the streaming replica the API reads from, if any. A "
    "projection that has not folded for longer than METASTORE_STALL_TIMEOUT (60 s by "
    "default) while events wait is `stalled`. `version` is the API's release; `rebuilding` "
    "names the projections whose tables are another release's (reads wait for their "
    "rebuild).",
)
resource = Resource()


@resource.add(STATUS_OP)
async def get_status(request: Request) -> Response:
    stall_timeout = request.app.state.settings.stall_timeout
    # (on a reserved connection: /status answers while reads hold the read pool)
    async with connection(request, reserved=True) as conn:
        estimate, size_bytes = await row(conn, LOG_ESTIMATE)
        if estimate < EXACT_COUNT_BELOW:
            (estimate,) = await row(conn, LOG_COUNT)
        tx, seq = await row(conn, WATERMARK)
        last = await row(conn, LAST_RECEIVED)
        projections = await rows(conn, PROJECTIONS)
        in_recovery, replication_lag = await row(conn, REPLICATION)
    return json_response(
        request,
        models_status.Status(
            version=__version__,
            log=models_status.LogStatus(
                events=estimate,
                size_bytes=size_bytes,
                position=Position(tx, seq).encode(),
                last_received_at=last[0] if last else None,
            ),
            projections=[
                models_status.ProjectionStatus(
                    name=p[0],
                    version=p[1],
                    position=Position(p[2], p[3]).encode(),
                    events_folded=p[4],
                    updated_at=p[5],
                    lag_events=p[6],
                    lag_seconds=p[7],
                    dead_letters=p[8],
                    stalled=is_stalled(p[6], p[7], p[9], stall_timeout),
                )
                for p in projections
            ],
            freshness=models_status.Freshness(
                source="replica" if in_recovery else "primary",
                replication_lag_seconds=replication_lag,
                lag_seconds=replication_lag + max((p[7] for p in projections), default=0.0),
            ),
            rebuilding=other_versions({p[0]: p[1] for p in projections}, EXPECTED),
        ),
    )
