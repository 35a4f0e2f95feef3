"""A batch writes each read-model row once: a row its upsert wrote is not written again by a
later statement of the same batch (each rewrite is another tuple, its index entries and
WAL: the server's work an event, issue 46)."""

from __future__ import annotations

from typing import Any

import psycopg

from projections.runner import catch_up
from tests.logdata import append
from tests.support import all_scenario_events, failed_trino_events

Conn = psycopg.Connection[Any]

# cmin: the command of the transaction that wrote the row's live version. The fold's
# upsert of a table is one statement, so rows written once by it share one.
WRITERS = "SELECT count(DISTINCT cmin::text), count(*) FROM readmodel.{} WHERE {}"


def test_job_edges_written_once_by_the_batch_that_settles_their_writes(conn: Conn) -> None:
    append(conn, [*all_scenario_events(), *failed_trino_events()])
    catch_up(conn)  # (one batch: the writes and the failed attempts settle in it)
    writes = conn.execute(WRITERS.format("job_edges", "last_write_at IS NOT NULL")).fetchone()
    attempts = conn.execute(WRITERS.format("job_edges", "attempt_at IS NOT NULL")).fetchone()
    everything = conn.execute(WRITERS.format("job_edges", "true")).fetchone()
    assert writes is not None and writes[1] > 10
    assert attempts is not None and attempts[1] >= 1
    assert everything == (1, everything[1])  # one statement wrote every row
