"""The log's indexes of sql/0006.log-indexes.sql: what they bound, and how `metastore
migrate` builds them, a partition at a time while appends go on.

A job's page as of T finds the job's last event by then in one probe a log partition
(event_log_job_time); before, "last seen as of T" was max(event_time) over the job index
(by position): every event of the job up to T, a heap row each, a run a minute for a year
1.5 million rows, past the read timeout. The fold's question whether a run ended FAIL or
ABORT reads the run's ends alone (event_log_run_ends), not every event of a streaming run.
Both are created ON ONLY the partitioned log and built for each partition CONCURRENTLY
(metastore/log_indexes.py).
"""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from metastore import log_indexes
from metastore.api.jobs import GET_JOB_AS_OF, JOB_SEEN_AT
from metastore.eventlog import append_events
from metastore.migrations import apply_migrations
from projections.common import job_id
from projections.runner import catch_up
from tests.logdata import append, log_record
from tests.support import run_event, running
from tests.test_run_log_probes import JOB, PRODUCER, buffers_read, one_busy_job_without_statistics

Conn = psycopg.Connection[Any]
AS_OF = dt.datetime(2026, 11, 15, 10, 59, tzinfo=dt.UTC)

PARTITION_INDEXES = """
SELECT c.relname, x.relname
FROM pg_inherits p
JOIN pg_class c ON c.oid = p.inhrelid
LEFT JOIN LATERAL (
    SELECT ix.relname FROM pg_inherits i
    JOIN pg_index x ON x.indexrelid = i.inhrelid JOIN pg_class ix ON ix.oid = x.indexrelid
    WHERE i.inhparent = 'event_log_job_time'::regclass AND x.indrelid = p.inhrelid) x ON true
WHERE p.inhparent = 'event_log'::regclass
ORDER BY 1
"""
VALID = "SELECT indisvalid FROM pg_index WHERE indexrelid = 'event_log_job_time'::regclass"


def last_event_by(conn: Conn, when: dt.datetime) -> dt.datetime:
    """The job's last eventTime at or before `when`, from every event of it (the answer)."""
    times = [
        t
        for (t,) in conn.execute(
            "SELECT event_time FROM event_log WHERE job_namespace = %s AND job_name = %s", JOB
        )
        if t <= when
    ]
    return max(times)


def test_a_job_s_page_as_of_t_reads_its_last_event_by_one_probe_a_partition(
    database_url: str, conn: Conn, tmp_path: Path
) -> None:
    one_busy_job_without_statistics(conn)  # 3,000 runs, 6,000 events, partitions unanalyzed
    catch_up(database_url)
    job = job_id(*JOB)
    params = {"id": job, "as_of": AS_OF, "readable": []}
    expected = last_event_by(conn, AS_OF)
    seen_at = f"""SELECT {JOB_SEEN_AT.format(job="j")}
        FROM (VALUES (%(namespace)s, %(name)s)) AS j(namespace, name)"""
    seen_params = {"namespace": JOB[0], "name": JOB[1], "as_of": AS_OF}
    (partitions,) = conn.execute(
        "SELECT count(*) FROM pg_inherits WHERE inhparent = 'event_log'::regclass"
    ).fetchone() or (0,)
    for statistics in ("none", "analyzed"):
        if statistics == "analyzed":
            conn.execute("ANALYZE event_log")
        # a probe of each partition's index: a few buffers each; by the job index (by
        # position) it read all of the job's 6,000 events, 470 buffers, growing with the job
        buffers, plan = buffers_read(conn, seen_at, seen_params)
        assert buffers <= 4 * partitions, (statistics, plan)
        assert "->  Sort" not in plan and "event_log_job " not in plan, plan
        assert conn.execute(seen_at, seen_params).fetchone() == (expected,)
        buffers, plan = buffers_read(conn, GET_JOB_AS_OF[False], params)
        assert buffers < 300, (statistics, plan)  # (574 before, 130 now)
        (row,) = conn.execute(GET_JOB_AS_OF[False], params).fetchall()
        assert row[8] == expected
    # through the service: the page as of T says when the job was last seen by then
    with (
        running("api", database_url, tmp_path) as api,
        httpx.Client(base_url=api.base_url + "/api/v1", timeout=10) as client,
    ):
        page = client.get(f"/jobs/{job}", params={"as_of": AS_OF.isoformat()})
        assert page.status_code == 200, page.text
        seen = dt.datetime.fromisoformat(page.json()["last_seen"].replace("Z", "+00:00"))
        assert seen == expected


def unbuilt(conn: Conn) -> None:
    """The store as sql/0006 leaves it before `build`: the log's index, no partition's."""
    (definition,) = conn.execute(
        "SELECT pg_get_indexdef('event_log_job_time'::regclass)"
    ).fetchone() or ("",)
    assert " ON ONLY " in definition, definition
    conn.execute("DROP INDEX event_log_job_time")  # (with every partition's)
    conn.execute(definition)
    assert conn.execute(VALID).fetchone() == (False,)


def some_events(count: int, day: int = 3) -> list[dict[str, Any]]:
    return [
        run_event(
            "START",
            f"2026-12-{day:02d}T10:00:{i % 60:02d}Z",
            PRODUCER,
            JOB,
            str(uuid.uuid4()),
            [],
            [],
        )
        for i in range(count)
    ]


def test_migrate_builds_the_index_of_every_partition_and_the_log_s_becomes_valid(
    database_url: str, conn: Conn
) -> None:
    append(conn, some_events(50))
    conn.execute("DELETE FROM _yoyo_migration WHERE migration_id = '0006.log-indexes'")
    conn.execute("DROP INDEX event_log_job_time")
    conn.execute("DROP INDEX event_log_run_ends")
    assert apply_migrations(database_url) == ["0006.log-indexes"]
    assert conn.execute(VALID).fetchone() == (True,)
    assert conn.execute(VALID.replace("job_time", "run_ends")).fetchone() == (True,)
    ends = conn.execute(PARTITION_INDEXES.replace("job_time", "run_ends")).fetchall()
    assert all(index == f"{partition}_run_ends" for partition, index in ends), ends
    partitions = conn.execute(PARTITION_INDEXES).fetchall()
    assert len(partitions) >= 5  # the default one and this month's and three ahead
    assert all(index == f"{partition}_job_time" for partition, index in partitions), partitions
    # a partition created later gets its index with the table
    conn.execute("SELECT event_log_ensure_partitions(8)")
    later = conn.execute(PARTITION_INDEXES).fetchall()
    assert len(later) > len(partitions) and all(index for _, index in later), later
    assert conn.execute(VALID).fetchone() == (True,)
    assert apply_migrations(database_url) == []  # nothing left to do, nothing rebuilt
    assert conn.execute(PARTITION_INDEXES).fetchall() == later


def test_an_interrupted_build_is_finished_by_the_next_migrate(
    database_url: str, conn: Conn
) -> None:
    append(conn, some_events(50))
    unbuilt(conn)
    # A build that stopped half-way leaves an invalid index behind (here: a failed one).
    (partition,) = conn.execute(
        "SELECT tableoid::regclass::text FROM event_log GROUP BY 1"
    ).fetchone() or ("",)
    with pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute(
            f"CREATE UNIQUE INDEX CONCURRENTLY {partition}_job_time ON {partition} (job_name)"
        )
    assert apply_migrations(database_url) == []
    assert conn.execute(VALID).fetchone() == (True,)
    index = dict(conn.execute(PARTITION_INDEXES).fetchall())[partition]
    assert index == f"{partition}_job_time"
    (definition,) = conn.execute("SELECT pg_get_indexdef(%s::regclass)", (index,)).fetchone() or (
        "",
    )
    assert "(job_namespace, job_name, event_time)" in definition and "UNIQUE" not in definition


def test_appends_go_on_while_the_index_is_built(database_url: str, conn: Conn) -> None:
    append(conn, some_events(50))
    unbuilt(conn)
    with (
        psycopg.connect(database_url) as writing,
        psycopg.connect(database_url, autocommit=True) as migrating,
        psycopg.connect(database_url, autocommit=True) as ingest,
    ):
        # (a transaction that has appended, still open)
        append_events(writing, [log_record(e) for e in some_events(1, day=4)])
        built: list[str] = []
        builder = threading.Thread(target=lambda: built.extend(log_indexes.build(migrating)))
        builder.start()
        try:
            # The build waits for the open append; appends that start meanwhile do not wait
            # (a CREATE INDEX of the log would hold them behind it).
            ingest.execute("SET statement_timeout = '5s'")
            for _ in range(3):
                assert append(ingest, some_events(20, day=5)) == 20
            assert builder.is_alive()  # still waiting for the open transaction
        finally:
            writing.commit()
            builder.join(timeout=60)
    assert not builder.is_alive() and built
    assert conn.execute(VALID).fetchone() == (True,)
