"""Whether read models are settled: vacuumed, so an index-only scan reads no heap page."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from projections.schema import PROJECTIONS
from projections.settle import tables_of
from tests.logdata import dump_readmodel
from tests.support import plan_nodes

# The read-model tables whose visibility map does not cover every page.
UNSETTLED = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'readmodel' AND c.relkind = 'r' AND c.relname = ANY(%s)
  AND c.relallvisible < c.relpages
ORDER BY 1
"""


def unsettled_tables(conn: psycopg.Connection[Any]) -> list[str]:
    """The read-model tables with pages VACUUM has not set all-visible (pg_class's figures,
    which VACUUM and ANALYZE update), refreshed first."""
    conn.execute("ANALYZE")
    return [name for (name,) in conn.execute(UNSETTLED, (tables_of(PROJECTIONS),))]


def heap_fetches(conn: psycopg.Connection[Any], query: str) -> int:
    """The heap pages `query`'s index-only scans read (it runs, planned without seq or
    bitmap scans: the test's tables are small enough for the planner to read whole)."""
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL enable_bitmapscan = off")
        row = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {query}").fetchone()
    assert row is not None
    plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
    scans = [n for n in plan_nodes(plan[0]["Plan"]) if n["Node Type"] == "Index Only Scan"]
    assert scans, plan
    return sum(int(n["Heap Fetches"]) for n in scans)


def every_row(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Every row of every projection's tables, in a canonical order, and the dead letters."""
    return dump_readmodel(conn, tables=tables_of(PROJECTIONS))
