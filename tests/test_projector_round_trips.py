"""The projector's fixed cost a batch: how often it waits for the server (issue 46, m-lag).

At 1,000 events/s a batch lasts its fixed part over (1 - the fold's cost an event x the
rate), and on a loaded machine each wait for an answer costs a millisecond or more: a batch
of one event waited 18 times on the main connection and 9 on the side one. Counted from
libpq's protocol trace: each time the client, having sent, reads an answer.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import psycopg

from metastore.store_health import LEADER_LOCK
from projections.fold import tune_session
from projections.runner import catch_up, fold_live_batch
from projections.schema import PROJECTIONS
from tests.logdata import append
from tests.support import run_event

Conn = psycopg.Connection[Any]

# BEGIN, the opening (search path, fold lock, lease, cursors), the read, the loads'
# answers in the fold's pipeline (three), its end (the cursors saved in it), COMMIT.
MAIN_WAITS = 8
# BEGIN, the opening, the run facts' answer in the fold's pipeline, its end, COMMIT.
SIDE_WAITS = 5


def waits(trace: Path) -> int:
    """How often the client waited: a message from the server after one to it."""
    count, previous = 0, ""
    for line in trace.read_text().splitlines():
        direction = line.split("\t")[1] if "\t" in line else ""
        if direction == "B" and previous == "F":
            count += 1
        if direction in ("F", "B"):
            previous = direction
    return count


def event(kind: str, minute: int, run: uuid.UUID) -> dict[str, Any]:
    table = {"namespace": "db", "name": f"t{minute}"}
    job = ("ns", "job")
    when = f"2026-01-01T10:{minute:02d}:00Z"
    return run_event(kind, when, "https://example.com/t", job, str(run), [table], [table])


def test_a_batch_of_one_event_waits_for_the_server_a_fixed_few_times(
    conn: Conn, database_url: str, tmp_path: Path
) -> None:
    append(conn, [event("START", 1, uuid.uuid4())])
    catch_up(database_url)  # (the statements' first runs are behind it)
    append(conn, [event("COMPLETE", 2, uuid.uuid4())])
    conn.execute("SELECT pg_advisory_lock(%s)", (LEADER_LOCK,))  # (the lease's fence)
    with psycopg.connect(database_url) as main, psycopg.connect(database_url) as side:
        tune_session(main)
        tune_session(side)
        main_trace, side_trace = tmp_path / "main", tmp_path / "side"
        with main_trace.open("w") as to_main, side_trace.open("w") as to_side:
            main.pgconn.trace(to_main.fileno())
            side.pgconn.trace(to_side.fileno())
            result = fold_live_batch(main, side=side, leader_pid=conn.info.backend_pid)
            main.pgconn.untrace()
            side.pgconn.untrace()
    assert result.read == 1
    assert result.folded == dict.fromkeys((p.NAME for p in PROJECTIONS), 1)
    assert waits(main_trace) <= MAIN_WAITS
    assert waits(side_trace) <= SIDE_WAITS
