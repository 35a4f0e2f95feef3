"""The log's indexes of sql/0006.log-indexes.sql and sql/0007.log-run-time.sql: what they
bound, and how `metastore migrate` builds them, a partition at a time while appends go on.

A job's page as of T finds the job's last event by then in one probe a log partition
(event_log_job_time); before, "last seen as of T" was max(event_time) over the job index
(by position): every event of the job up to T, a heap row each, a run a minute for a year
1.5 million rows, past the read timeout. The fold's question whether a run ended FAIL or
ABORT reads the run's ends alone (event_log_run_ends), not every event of a streaming run;
a streaming run's state as of T is its latest event by then (event_log_run_time), not all of
them. All are created ON ONLY the partitioned log and built for each partition CONCURRENTLY
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
from metastore.api import asof
from metastore.api.jobs import GET_JOB_AS_OF, JOB_SEEN_AT
from metastore.eventlog import append_events
from metastore.migrations import apply_migrations
from projections.common import job_id
from projections.runner import catch_up
from tests.logdata import append, log_record
from tests.support import run_event, running
from tests.test_run_log_probes import (
    JOB,
    PRODUCER,
    buffers_read,
    one_busy_job_without_statistics,
    partition_count,
    streaming_run,
    without_autovacuum,
)

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
    partitions = partition_count(conn)
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


STREAMING = ("flink", "clicks_by_minute")
REUSING = ("flink", "sessions_by_minute")
JOBS = {
    "running": STREAMING,
    "failed": (STREAMING[0], "orders_by_minute"),
    "restarted": (STREAMING[0], "revenue_by_minute"),
    "reused": REUSING,
}
RESTARTED_AT = dt.datetime(2026, 11, 1, 16, 40, 45, tzinfo=dt.UTC)  # after minute 1,000
MID_RUN = dt.datetime(2026, 11, 2, 1, 0, 45, tzinfo=dt.UTC)  # between minutes 1,500 and 1,501
# A run's state at T (what the job's page as of T shows of its latest run).
RUN_STATE_AT = f"""SELECT s.event_type, s.event_time
FROM readmodel.lineage_runs lr{asof.RUN_AT_JOIN} WHERE lr.run_id = %(run)s"""


def streaming_jobs_without_statistics(conn: Conn) -> dict[str, uuid.UUID]:
    """Four jobs' streaming runs (test_run_log_probes.streaming_run: 3,000 minutes),
    in log partitions never analyzed: one still running; one that FAILed after MID_RUN; one
    that COMPLETEd before MID_RUN, went on (a restart under the same runId) and COMPLETEd
    again after it; one whose runId another job's run reused, that job's event coming last
    before MID_RUN."""
    without_autovacuum(conn)
    runs = {key: uuid.uuid4() for key in JOBS}
    events = [event for key, run in runs.items() for event in streaming_run(JOBS[key], run)]
    events.append(
        run_event(
            "FAIL", "2026-11-20T00:00:00Z", PRODUCER, JOBS["failed"], str(runs["failed"]), [], []
        )
    )
    for when in (RESTARTED_AT.isoformat(), "2026-11-20T00:00:00Z"):
        run = str(runs["restarted"])
        events.append(run_event("COMPLETE", when, PRODUCER, JOBS["restarted"], run, [], []))
    # (an emitter's bug: another job's event under the same runId, after the run's minute)
    events.append(
        run_event(
            "RUNNING",
            "2026-11-02T01:00:40Z",
            PRODUCER,
            ("other", "job"),
            str(runs["reused"]),
            [],
            [],
        )
    )
    append(conn, events)
    return runs


def test_a_streaming_run_s_state_as_of_t_is_its_latest_event_by_one_probe_a_partition(
    database_url: str, conn: Conn, tmp_path: Path
) -> None:
    runs = streaming_jobs_without_statistics(conn)
    catch_up(database_url)
    expected = dt.datetime(2026, 11, 2, 1, 0, 30, tzinfo=dt.UTC)  # minute 1,500
    partitions = partition_count(conn)
    for statistics in ("none", "analyzed"):
        if statistics == "analyzed":
            conn.execute("ANALYZE event_log")
        for key, state, when in (
            ("running", "RUNNING", expected),
            ("failed", "RUNNING", expected),
            # its COMPLETE by T wins over its later minutes (as in the runs projection)
            ("restarted", "COMPLETE", RESTARTED_AT),
        ):
            # its latest event and its ends, a probe of each partition; by the run index it
            # read each of the run's 1,501 events up to T, 141 buffers (and a row more a
            # minute it runs: half a million in a year)
            buffers, plan = buffers_read(conn, RUN_STATE_AT, {"run": runs[key], "as_of": MID_RUN})
            assert buffers <= 8 * partitions + 20, (statistics, key, plan)
            params = {"id": job_id(*JOBS[key]), "as_of": MID_RUN, "readable": []}
            (row,) = conn.execute(GET_JOB_AS_OF[False], params).fetchall()
            assert row[10:13] == (runs[key], state, when), (statistics, key)
        # the reused runId: the other job's event came last, so the run's own are read
        params = {"id": job_id(*REUSING), "as_of": MID_RUN, "readable": []}
        (row,) = conn.execute(GET_JOB_AS_OF[False], params).fetchall()
        assert row[10:13] == (runs["reused"], "RUNNING", expected), statistics
    # through the service: the page as of T, as of after the failure, and as of now as now
    with (
        running("api", database_url, tmp_path) as api,
        httpx.Client(base_url=api.base_url + "/api/v1", timeout=10) as client,
    ):
        for job, as_of, state, when in (
            (STREAMING, MID_RUN, "RUNNING", expected),
            ((STREAMING[0], "orders_by_minute"), MID_RUN, "RUNNING", expected),
            (
                (STREAMING[0], "orders_by_minute"),
                dt.datetime(2026, 11, 21, tzinfo=dt.UTC),
                "FAIL",
                dt.datetime(2026, 11, 20, tzinfo=dt.UTC),
            ),
        ):
            page = client.get(f"/jobs/{job_id(*job)}", params={"as_of": as_of.isoformat()})
            assert page.status_code == 200, page.text
            latest = page.json()["latest_run"]
            assert latest["state"] == state
            assert dt.datetime.fromisoformat(latest["state_time"].replace("Z", "+00:00")) == when
        now = client.get(f"/jobs/{job_id(*STREAMING)}").json()["latest_run"]
        as_of_now = client.get(
            f"/jobs/{job_id(*STREAMING)}",
            params={"as_of": dt.datetime.now(dt.UTC).isoformat()},
        ).json()["latest_run"]
        assert now["state"] == as_of_now["state"] == "RUNNING"
        assert now["state_time"] == as_of_now["state_time"]
        assert now["state_time"].startswith("2026-11-03T01:59:30")  # its last minute
