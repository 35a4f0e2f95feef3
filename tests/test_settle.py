"""The projector settles its read models once after a long catch-up (projections/settle.py)."""

from __future__ import annotations

from typing import Any

import psycopg

from projections.runner import catch_up
from projections.settle import Settler
from tests.logdata import append
from tests.settled import heap_fetches, unsettled_tables
from tests.support import all_scenario_events

Conn = psycopg.Connection[Any]


def test_a_long_catch_up_is_vacuumed_once_caught_up(conn: Conn, database_url: str) -> None:
    append(conn, all_scenario_events())
    folded = catch_up(conn)
    unsettled = unsettled_tables(conn)
    assert unsettled and heap_fetches(conn, "SELECT count(*) FROM readmodel.jobs") > 0
    settler = Settler(database_url, after=folded)
    # Batches still coming (full), or too few events: nothing yet.
    settler.batch(folded, full=True)
    assert settler.thread is None
    settler.batch(0, full=False)
    assert settler.thread is not None
    settler.close(timeout=60)
    assert not settler.running
    assert unsettled_tables(conn) == []
    assert heap_fetches(conn, "SELECT count(*) FROM readmodel.jobs") == 0
    # Counted again from nothing: the next short catch-up settles nothing.
    settler.thread = None
    settler.batch(folded - 1, full=False)
    assert settler.thread is None


def test_a_short_catch_up_is_left_to_autovacuum(conn: Conn, database_url: str) -> None:
    append(conn, all_scenario_events())
    folded = catch_up(conn)
    settler = Settler(database_url, after=folded + 1)
    settler.batch(folded, full=False)
    assert settler.thread is None
    assert unsettled_tables(conn)
