"""Projector crash and takeover, with real `metastore projector` processes.

- SIGKILL while a fold transaction is open, restart: the read models equal a clean replay
  of the same log (`metastore replay`), and no event was folded twice.
- Two projectors: one folds, the other stands by and takes over after the first is killed.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from projections.schema import PROJECTIONS
from tests.logdata import append, copies, dump_readmodel
from tests.support import Process, all_scenario_events, start_process

pytestmark = pytest.mark.reliability

COPIES = 120  # of the conformance scenarios: ~10,000 events, several fold batches
TAKEOVER_LIMIT_S = 10.0

FOLDED = "SELECT name, events_folded FROM projection_state"
# A backend of the projector inside a fold: a transaction that has written (has an xid).
FOLD_IN_PROGRESS = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_xid IS NOT NULL
"""


def folded(conn: psycopg.Connection[Any]) -> dict[str, int]:
    return dict(conn.execute(FOLDED).fetchall())


def wait_until_folded(conn: psycopg.Connection[Any], total: int, timeout: float) -> float:
    started = time.monotonic()
    while True:
        state = folded(conn)
        if len(state) == len(PROJECTIONS) and all(n >= total for n in state.values()):
            return time.monotonic() - started
        assert time.monotonic() - started < timeout, f"not caught up to {total}: {state}"
        time.sleep(0.02)


def log_count(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM event_log").fetchone()
    assert row is not None
    return int(row[0])


def replay(database_url: str, log_dir: Path) -> None:
    """`metastore replay`: every projection rebuilt from the whole log, swapped in."""
    result = subprocess.run(
        [sys.executable, "-m", "metastore", "replay", "--no-progress"],
        env={"METASTORE_DATABASE_URL": database_url, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=log_dir,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def role(process: Process) -> str:
    return str(httpx.get(process.base_url + "/healthz", timeout=5).json()["role"])


def test_a_projector_killed_mid_batch_resumes_to_what_a_clean_replay_builds(
    database_url: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    events = copies(all_scenario_events(), COPIES, salt="crash")
    for start in range(0, len(events), 2000):
        append(conn, events[start : start + 2000])
    total = log_count(conn)  # fewer than sent: copies of events without a run are one event

    projector = start_process("projector", database_url, tmp_path)
    try:
        deadline = time.monotonic() + 120
        while True:  # kill it inside a fold transaction, after some batches committed
            state = folded(conn)
            progress = min(state.values(), default=0)
            busy = conn.execute(FOLD_IN_PROGRESS).fetchone()
            if 0 < progress < total and busy and busy[0] > 0:
                break
            assert progress < total, "folded everything before it could be killed"
            assert time.monotonic() < deadline, "the projector did not start folding"
            time.sleep(0.005)
        projector.kill(signal.SIGKILL)
        at_kill = folded(conn)
    finally:
        projector.stop()

    projector = start_process("projector", database_url, tmp_path)
    try:
        resumed_in = wait_until_folded(conn, total, timeout=180)
    finally:
        projector.stop()
    after_restart = dump_readmodel(conn)
    counts = folded(conn)

    replay(database_url, tmp_path)
    clean = dump_readmodel(conn)
    rows = sum(len(v) for v in clean.values())
    print(
        f"\nprojector crash: {total} events; SIGKILL inside a fold with {at_kill} folded; "
        f"the restarted projector caught up in {resumed_in:.1f} s; events_folded after: "
        f"{counts}; {rows} read-model rows, equal to a clean replay: {after_restart == clean}"
    )
    assert all(n == total for n in counts.values()), counts  # none folded twice
    assert all(n < total for n in at_kill.values())
    for table in clean:
        assert after_restart[table] == clean[table], table
    assert clean["dead_letters"] == []


def test_a_standby_projector_takes_over_within_10_s_of_the_active_one_dying(
    database_url: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    first_events = copies(all_scenario_events(), 2, salt="first")
    append(conn, first_events)
    first = log_count(conn)
    one = start_process("projector", database_url, tmp_path)
    two = start_process("projector", database_url, tmp_path)
    try:
        deadline = time.monotonic() + 60
        while sorted((role(one), role(two))) != ["active", "standby"]:
            assert time.monotonic() < deadline, (role(one), role(two))
            time.sleep(0.1)
        active, standby = (one, two) if role(one) == "active" else (two, one)
        wait_until_folded(conn, first, timeout=60)

        active.kill(signal.SIGKILL)
        killed = time.monotonic()
        more = copies(all_scenario_events(), 1, salt="after-kill")
        append(conn, more)
        wait_until_folded(conn, log_count(conn), timeout=TAKEOVER_LIMIT_S)
        takeover = time.monotonic() - killed
        print(
            f"\nstandby takeover: the standby folded {log_count(conn) - first} new events "
            f"{takeover:.2f} s after the active projector was killed; role now {role(standby)}"
        )
        assert role(standby) == "active"
        assert takeover < TAKEOVER_LIMIT_S
    finally:
        one.stop()
        two.stop()
