"""`metastore replay` and the projector's own rebuild of outdated projections."""

from __future__ import annotations

import random
import string
import subprocess
import sys
from typing import Any

import psycopg

from projections import column_lineage, history, jobs
from projections.deferred_indexes import READ_ONLY_INDEXES
from projections.replay import rebuild_outdated
from projections.runner import catch_up
from projections.schema import create_readmodel_tables
from tests.logdata import append, dump_readmodel
from tests.settled import every_row, heap_fetches, unsettled_tables
from tests.support import ROOT, all_scenario_events

Conn = psycopg.Connection[Any]


def replay_command(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "metastore", "replay", "--no-progress", *args],
        env={"METASTORE_DATABASE_URL": database_url, "PATH": "/usr/bin:/bin"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_replay_rebuilds_the_same_tables_and_ids(conn: Conn, database_url: str) -> None:
    append(conn, all_scenario_events()[:40])
    catch_up(conn)
    append(conn, all_scenario_events()[40:])
    catch_up(conn)
    before = dump_readmodel(conn)
    job_ids = {r[0] for r in conn.execute("SELECT id FROM readmodel.jobs")}
    result = replay_command(database_url)
    assert result.returncode == 0, result.stderr
    assert "switched over" in result.stdout
    assert dump_readmodel(conn) == before
    assert {r[0] for r in conn.execute("SELECT id FROM readmodel.jobs")} == job_ids
    # The swapped-in tables come with statistics: the planner need not guess until
    # autovacuum comes by (reltuples -1: never analyzed).
    assert (
        conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'readmodel' AND c.relkind = 'r' AND c.reltuples < 0"
        ).fetchall()
        == []
    )
    # The scratch schema is gone, the cursors point at the end of the log.
    assert conn.execute(
        "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'readmodel_%'"
    ).fetchone() == (0,)
    assert catch_up(conn) == 0


def test_replay_of_one_projection_leaves_the_others_alone(conn: Conn, database_url: str) -> None:
    append(conn, all_scenario_events())
    catch_up(conn)
    before = dump_readmodel(conn)
    # Damage both: only the replayed one is repaired.
    conn.execute("DELETE FROM readmodel.jobs WHERE namespace = 'airflow'")
    conn.execute("DELETE FROM readmodel.runs WHERE job_namespace = 'airflow'")
    result = replay_command(database_url, "--projection", "jobs")
    assert result.returncode == 0, result.stderr
    after = dump_readmodel(conn)
    assert after["jobs"] == before["jobs"]
    assert after["runs"] != before["runs"]


def test_replay_of_an_unknown_projection_says_which_exist(database_url: str) -> None:
    result = replay_command(database_url, "--projection", "nope")
    assert result.returncode == 1
    assert "unknown projection 'nope'" in result.stderr and "jobs" in result.stderr


def test_tables_of_an_older_version_are_rebuilt(conn: Conn, database_url: str) -> None:
    append(conn, all_scenario_events())
    catch_up(conn)
    before = dump_readmodel(conn)
    conn.execute(
        "UPDATE projection_state SET version = %s WHERE name = 'jobs'", (jobs.VERSION - 1,)
    )
    conn.execute("TRUNCATE readmodel.jobs")
    # Outdated tables are not folded into meanwhile: the fold skips them.
    append(conn, [{**all_scenario_events()[0], "eventTime": "2030-01-01T00:00:00Z"}])
    catch_up(conn)
    assert conn.execute("SELECT count(*) FROM readmodel.jobs").fetchone() == (0,)
    assert rebuild_outdated(database_url) == ["jobs"]
    assert conn.execute("SELECT version FROM projection_state WHERE name = 'jobs'").fetchone() == (
        jobs.VERSION,
    )
    after = dump_readmodel(conn)
    assert len(after["jobs"]) == len(before["jobs"])
    assert rebuild_outdated(database_url) == []


def live_tables(conn: Conn) -> set[str]:
    rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'readmodel'")
    return {name for (name,) in rows}


# history v2 kept a run's column lineage in run_column_edges, one row per field pair; v5
# in run_column_lineage, one row per output and run (column_lineage_runs since).
V2_HISTORY_TABLE = "CREATE TABLE readmodel.run_column_edges (edge_key uuid PRIMARY KEY)"
V5_HISTORY_TABLE = "CREATE TABLE readmodel.run_column_lineage (edges jsonb)"


def test_a_rebuild_drops_the_tables_an_older_version_had(conn: Conn, database_url: str) -> None:
    append(conn, all_scenario_events())
    catch_up(conn)
    before = dump_readmodel(conn)
    conn.execute(V2_HISTORY_TABLE)
    conn.execute(V5_HISTORY_TABLE)
    conn.execute("UPDATE projection_state SET version = 2 WHERE name = 'history'")
    assert rebuild_outdated(database_url) == ["history"]
    assert not {"run_column_edges", "run_column_lineage"} & live_tables(conn)
    assert {"column_lineage_runs", "schema_observations"} <= live_tables(conn)
    assert dump_readmodel(conn) == before


def test_fresh_tables_of_a_projection_replace_those_of_its_older_version(
    conn: Conn, database_url: str
) -> None:
    """An upgrade whose tables are not all there (column_lineage v4 had no column_reports):
    the projection's tables are made afresh, the old ones dropped, and it folds the log
    again from the start."""
    append(conn, all_scenario_events())
    catch_up(conn)
    before = dump_readmodel(conn)
    conn.execute("DROP TABLE readmodel.column_reports")
    conn.execute("DROP TABLE readmodel.schema_observations")
    conn.execute(V2_HISTORY_TABLE)
    assert create_readmodel_tables(conn) == [column_lineage.NAME, history.NAME]
    assert "run_column_edges" not in live_tables(conn)
    (logged,) = conn.execute("SELECT count(*) FROM event_log").fetchone() or (0,)
    assert catch_up(conn) == logged
    assert dump_readmodel(conn) == before


def test_replay_keeps_the_dead_letters_once(conn: Conn, database_url: str) -> None:
    # A dataset name too long for a btree index: its event fails in the projections that
    # index dataset names. The rebuild finds the same failures and replaces the letters.
    def event(minute: int, run_id: str, dataset: str) -> dict[str, Any]:
        return {
            "eventTime": f"2026-01-01T10:{minute:02d}:00Z",
            "eventType": "START",
            "producer": "https://example.com/tests",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": run_id, "facets": {}},
            "job": {"namespace": "replay", "name": "job", "facets": {}},
            "inputs": [{"namespace": "ns", "name": dataset}],
            "outputs": [],
        }

    good, bad = "01890000-0000-7000-8000-000000000001", "01890000-0000-7000-8000-000000000002"
    huge = "".join(random.Random(7).choices(string.ascii_letters, k=12000))  # incompressible
    append(conn, [event(1, good, "ok"), event(2, bad, huge), event(3, good, "ok")])
    catch_up(conn)
    letters = "SELECT projection, seq, error FROM dead_letters ORDER BY projection, seq"
    before = conn.execute(letters).fetchall()
    assert before and all("index row" in error for _, _, error in before)
    result = replay_command(database_url)
    assert result.returncode == 0, result.stderr
    assert conn.execute(letters).fetchall() == before
    assert conn.execute(
        "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'readmodel_%'"
    ).fetchone() == (0,)


INDEXES = "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'readmodel' ORDER BY 1"


def test_a_replayed_store_has_a_live_folds_rows_and_every_index(
    conn: Conn, database_url: str
) -> None:
    """The rebuild creates the readers' indexes after its fold: the swapped-in tables hold
    what the live fold's do, row for row in every table, and every index the DDL makes (a
    forgotten one would answer the same, only slowly)."""
    append(conn, all_scenario_events())
    catch_up(conn)
    rows, indexes = every_row(conn), conn.execute(INDEXES).fetchall()
    assert {name for name, _ in indexes} >= READ_ONLY_INDEXES
    result = replay_command(database_url)
    assert result.returncode == 0, result.stderr
    assert every_row(conn) == rows
    assert conn.execute(INDEXES).fetchall() == indexes


def test_a_replayed_store_is_settled(conn: Conn, database_url: str) -> None:
    """Right after a replay a list's total reads its index alone, no heap page: the
    rebuild vacuumed its tables (the visibility map set) before the swap."""
    append(conn, all_scenario_events())
    catch_up(conn)
    assert unsettled_tables(conn)  # (a live fold leaves them to autovacuum)
    result = replay_command(database_url)
    assert result.returncode == 0, result.stderr
    assert unsettled_tables(conn) == []
    assert heap_fetches(conn, "SELECT count(*) FROM readmodel.jobs") == 0
