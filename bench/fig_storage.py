"""Storage: bytes per event of the log (table, TOAST and indexes) against the events' JSON."""

from __future__ import annotations

from typing import Any

import psycopg

from bench.context import Context
from bench.report import Row

GROUP = "log"

LOG_BYTES = """
SELECT coalesce(sum(pg_total_relation_size(relid)), 0)
FROM pg_partition_tree('event_log') WHERE isleaf
"""
DIGEST_BYTES = "SELECT pg_total_relation_size('event_digests')"
COUNT = "SELECT count(*), coalesce(sum(size_bytes), 0) FROM event_log"
READMODEL_BYTES = """
SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'readmodel' AND c.relkind = 'r'
"""


ROW = Row("storage, bytes/event", "bytes/event", baseline_label="the events' JSON size")


def rows(ctx: Context) -> list[Row]:
    return ctx.rows(GROUP, ROW)


def measure(ctx: Context, out: list[Row], url: str) -> None:
    (row,) = out
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE event_log")
        conn.execute("VACUUM ANALYZE event_digests")
        log_bytes = _one(conn, LOG_BYTES)
        digest_bytes = _one(conn, DIGEST_BYTES)
        counted = conn.execute(COUNT).fetchone()
        readmodel = _one(conn, READMODEL_BYTES)
    assert counted is not None
    events, json_bytes = int(counted[0]), int(counted[1])
    row.record(
        (log_bytes + digest_bytes) / events,
        baseline=json_bytes / events,
        note=f"{events:,} events: event_log partitions with TOAST and indexes "
        f"{log_bytes / 2**20:,.0f} MiB + event_digests {digest_bytes / 2**20:,.0f} MiB, over "
        f"{json_bytes / 2**20:,.0f} MiB of JSON as received (the json text is TOAST-compressed). "
        f"For reference the read models take {readmodel / 2**20:,.0f} MiB "
        f"({readmodel / events:,.0f} bytes/event).",
    )


def _one(conn: psycopg.Connection[Any], query: str) -> int:
    row = conn.execute(query).fetchone()
    return int(row[0]) if row else 0
