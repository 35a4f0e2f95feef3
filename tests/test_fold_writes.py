"""A batch writes each read-model row once: a row its upsert wrote is not written again by a
later statement of the same batch (each rewrite is another tuple, its index entries and
WAL: the server's work an event, issue 46)."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg

from projections.runner import catch_up
from tests.logdata import append
from tests.support import all_scenario_events, failed_trino_events, run_event, schema_facet

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


PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.23.0/integration/spark"
JOBS = 400


def _runs(round_: int, jobs: range) -> list[dict[str, Any]]:
    """A run of each of `jobs`, reading one table and writing another, on day `round_`."""
    events = []
    for j in jobs:
        run = str(uuid.UUID(int=round_ << 64 | j))
        job = ("spark-etl", f"load_table_{j:04d}")
        inputs = [{"namespace": "s3a://raw", "name": f"events_{j:04d}", "facets": {}}]
        outputs = [{"namespace": "s3a://curated", "name": f"table_{j:04d}", "facets": {}}]
        for kind, hour in (("START", 10), ("COMPLETE", 11)):
            when = f"2026-09-{round_ + 1:02d}T{hour}:00:00Z"
            events.append(run_event(kind, when, PRODUCER, job, run, inputs, outputs))
    return events


def _updates(conn: Conn) -> dict[str, tuple[int, int]]:
    """(updated, HOT-updated) rows of each read-model table, as the server counted them."""
    conn.execute("SELECT pg_stat_force_next_flush()")  # (this session's counts, now)
    rows = conn.execute(
        "SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
        "WHERE schemaname = 'readmodel'"
    ).fetchall()
    return {name: (updated, hot) for name, updated, hot in rows}


def test_a_job_run_again_updates_its_rows_in_place(conn: Conn) -> None:
    # Pages filled by a first run of each job, then every tenth job runs again: its job,
    # its edges and its datasets are updated in their pages (HOT), no new index entries.
    append(conn, _runs(0, range(JOBS)))
    catch_up(conn)
    before = _updates(conn)
    append(conn, _runs(1, range(0, JOBS, 10)))
    catch_up(conn)
    after = _updates(conn)
    for table in ("jobs", "job_edges", "datasets"):
        updated = after[table][0] - before[table][0]
        hot = after[table][1] - before[table][1]
        assert updated >= JOBS // 10, (table, updated)
        assert hot == updated, (table, updated, hot)


def test_a_cadence_learned_again_unchanged_is_not_rewritten(conn: Conn) -> None:
    job = ("spark-etl", "daily_orders")
    events = []
    for day in range(6):
        run = str(uuid.UUID(int=7 << 64 | day))
        for kind, hour in (("START", 2), ("COMPLETE", 3)):
            when = f"2026-09-{day + 1:02d}T0{hour}:00:00Z"
            events.append(run_event(kind, when, PRODUCER, job, run, [], []))
    append(conn, events)
    catch_up(conn)
    cadence = "SELECT cadence, next_expected, xmin::text FROM readmodel.job_cadence"
    before = conn.execute(cadence).fetchall()
    assert [row[0] for row in before] == ["daily"]
    # A late RUNNING event of the last run: the run is still COMPLETE, the cadence the same.
    last = str(uuid.UUID(int=7 << 64 | 5))
    append(conn, [run_event("RUNNING", "2026-09-06T02:30:00Z", PRODUCER, job, last, [], [])])
    catch_up(conn)
    assert conn.execute(cadence).fetchall() == before  # the same row version


def _described(name: str, fields: list[tuple[str, str | None]]) -> dict[str, Any]:
    """An output dataset with a schema of string fields, some described."""
    facet = schema_facet(PRODUCER, [(n, "string") for n, _ in fields])
    facet["fields"] = [
        {"name": n, "type": "string", **({"description": d} if d else {})} for n, d in fields
    ]
    return {"namespace": "s3a://curated", "name": name, "facets": {"schema": facet}}


INDEX_PAGES = "SELECT pg_relation_size('readmodel.{}') / current_setting('block_size')::int"


def test_fields_without_a_description_add_nothing_to_the_description_index(conn: Conn) -> None:
    # Most fields have no description, and a GIN index holds a NULL as an entry too: each
    # such field cost the fold an insert no search could read (issue 46).
    undescribed = [(f"column_{i}", None) for i in range(5)]
    outputs = [_described(f"table_{j:04d}", undescribed) for j in range(JOBS)]
    outputs.append(_described("payments", [("iban", "Bank account of the customer")]))
    run = str(uuid.UUID(int=7))
    when = "2026-09-01T10:00:00Z"
    append(conn, [run_event("COMPLETE", when, PRODUCER, ("spark-etl", "load"), run, [], outputs)])
    catch_up(conn)
    fields = conn.execute("SELECT count(*), count(description) FROM readmodel.dataset_fields")
    assert fields.fetchone() == (JOBS * 5 + 1, 1)
    # (the metapage, the root and a page of pending entries for the one described field;
    # the 2,000 others' NULLs took several more)
    pages = conn.execute(INDEX_PAGES.format("dataset_fields_description_trgm")).fetchone()
    assert pages is not None and pages[0] <= 3, pages
    described = conn.execute(
        "SELECT name FROM readmodel.dataset_fields WHERE lower(description) LIKE '%account%'"
    ).fetchall()
    assert described == [("iban",)]
