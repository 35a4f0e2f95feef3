"""The fold's statements that match a batch's ids against a table probe its index whatever
the table's statistics say (projections.common.INDEX_PROBES_ONLY).

A store's tables grow faster than autovacuum analyzes them: with statistics from when
`run_edges` was nearly empty, lineage's settle of a batch's run edges read every output
edge once, kept them and compared them with each run of the batch, a cost that grew with
the table and held the projection lag at seconds (docs/PERFORMANCE.md, issue 46).
"""

from __future__ import annotations

from typing import Any

import psycopg

from projections.common import INDEX_PROBES_ONLY, planner_without
from projections.lineage import SETTLE_RUN_WRITES
from projections.runner import catch_up
from tests.logdata import append, copies
from tests.support import all_scenario_events

Conn = psycopg.Connection[Any]


def test_the_settle_of_run_edges_probes_by_run_with_statistics_of_a_nearly_empty_table(
    conn: Conn,
) -> None:
    for table in ("run_edges", "lineage_runs"):  # (no ANALYZE but ours)
        conn.execute(f"ALTER TABLE readmodel.{table} SET (autovacuum_enabled = false)")
    append(conn, copies(all_scenario_events(), 1, salt="first"))
    catch_up(conn)
    conn.execute("ANALYZE readmodel.run_edges, readmodel.lineage_runs")
    conn.commit()
    append(conn, copies(all_scenario_events(), 40, salt="later"))
    catch_up(conn)
    row = conn.execute("SELECT array_agg(run_id) FROM readmodel.lineage_runs").fetchone()
    assert row is not None and len(row[0]) > 1000
    with conn.transaction():
        conn.execute("SET LOCAL search_path TO readmodel, public")
        with planner_without(conn, *INDEX_PROBES_ONLY):
            plan = "\n".join(
                line
                for (line,) in conn.execute(
                    "EXPLAIN (COSTS OFF) " + SETTLE_RUN_WRITES, {"runs": row[0]}
                )
            )
    assert "Index Scan using run_edges_pkey on run_edges" in plan, plan
    assert "Materialize" not in plan and "Seq Scan" not in plan, plan
