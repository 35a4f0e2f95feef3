"""A run's events are found in the log by the run index whatever the statistics: the
fold's RunFacts (common.RUN_FACTS) and a run's event pages (/runs/{id}/events) read a run's
few events, not every event of its job.

A log partition has no statistics until autovacuum analyzes it (a new month, a store just
restored): with the job's name beside the run id in one scan, PostgreSQL took the job
index (two equal columns look more selective than one) and read every event of the job
for each run. A job of 10,000 runs then folded in 21 s instead of 2 (make bench's parent
chain figures, whose runs all belong to one job; docs/PERFORMANCE.md).
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import psycopg

from metastore import pgarray
from metastore.api.asof import RUN_STATES_AT
from metastore.api.runs import RUN_EVENTS
from metastore.eventlog import Position, batch_after_query
from projections.common import INDEX_PROBES_ONLY, RUN_FACTS
from projections.runner import catch_up
from tests.logdata import append
from tests.plans import planned_once
from tests.support import run_event

Conn = psycopg.Connection[Any]
RUNS = 3_000
JOB = ("busy", "every_minute")
PRODUCER = "https://github.com/apache/airflow"


def without_autovacuum(conn: Conn) -> None:
    """Leaves the log's partitions unanalyzed: no ANALYZE by autovacuum during the test."""
    partitions = conn.execute(
        "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'event_log'::regclass"
    ).fetchall()
    for (partition,) in partitions:
        conn.execute(f"ALTER TABLE {partition} SET (autovacuum_enabled = false)")


def partition_count(conn: Conn) -> int:
    """How many partitions the log has (a probe each is what a bounded read costs)."""
    (count,) = conn.execute(
        "SELECT count(*) FROM pg_inherits WHERE inhparent = 'event_log'::regclass"
    ).fetchone() or (0,)
    return int(count)


def one_busy_job_without_statistics(conn: Conn) -> list[uuid.UUID]:
    """RUNS runs of one job, started and completed, in log partitions never analyzed."""
    without_autovacuum(conn)
    runs = [uuid.uuid4() for _ in range(RUNS)]
    events = []
    for i, run in enumerate(runs):
        for state, second in (("START", 0), ("COMPLETE", 30)):
            when = f"2026-11-{1 + i % 28:02d}T10:{i % 60:02d}:{second:02d}Z"
            events.append(run_event(state, when, PRODUCER, JOB, str(run), [], []))
    append(conn, events)
    analyzed = conn.execute(
        "SELECT count(*) FROM pg_stats WHERE tablename LIKE 'event_log%%'"
    ).fetchone()
    assert analyzed == (0,), "the test needs partitions without statistics"
    return runs


def buffers_read(conn: Conn, query: str, params: Any) -> tuple[int, str]:
    """The shared buffers `query` touched, and its plan."""
    cur = conn.cursor()
    pgarray.register(cur)
    plan = "\n".join(
        line for (line,) in cur.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + query, params)
    )
    top = next(line for line in plan.splitlines() if "Buffers: shared" in line)
    return int(top.split("hit=")[1].split()[0]) + int(
        top.split("read=")[1].split()[0] if "read=" in top else 0
    ), plan


def buffers_read_planned_once(
    conn: Conn, query: str, params: dict[str, Any] | tuple[Any, ...], *methods: str
) -> tuple[int, str]:
    """buffers_read of `query`'s generic plan, made as the fold makes it: prepared, with
    `methods` off and plans kept (planner_without's `plan_once`, as common.run_facts and
    the projector's read run)."""
    with planned_once(conn, query, *methods) as keys:
        values = [params[k] for k in keys]  # type: ignore[index]
        (types,) = conn.execute(
            "SELECT parameter_types::text[] FROM pg_prepared_statements WHERE name = 'planned_once'"
        ).fetchone() or ([],)
        # (EXPLAIN takes no parameters: the values go in as literals)
        execute = psycopg.ClientCursor(conn).mogrify(
            f"EXECUTE planned_once({', '.join(f'%s::{t}' for t in types)})", values
        )
        return buffers_read(conn, execute, None)


def test_the_fold_asks_the_log_about_a_batch_s_runs_by_run_not_by_job(conn: Conn) -> None:
    runs = one_busy_job_without_statistics(conn)
    batch = runs[-500:]
    params = (pgarray.uuid_array(batch),)
    for buffers, plan in (
        buffers_read(conn, RUN_FACTS, params),
        buffers_read_planned_once(conn, RUN_FACTS, (batch,), *INDEX_PROBES_ONLY),
    ):
        assert "job_namespace_job_name" not in plan, plan
        # a run's few events in each partition: about 22 buffers; by job it was 200 and
        # more, growing with the job's runs
        assert buffers < 40 * len(batch), plan
    cur = conn.cursor()
    pgarray.register(cur)
    rows = cur.execute(RUN_FACTS, (pgarray.uuid_array(batch),)).fetchall()
    assert len(rows) == len(batch) and not any(failed for *_, failed in rows)


def test_a_run_s_events_page_reads_its_events_not_its_job_s(conn: Conn) -> None:
    runs = one_busy_job_without_statistics(conn)
    params = {"run_id": runs[1234], "tx": "0", "seq": 0, "limit": 100, "page_bytes": 1 << 20}
    buffers, plan = buffers_read(conn, RUN_EVENTS, params)
    assert "job_namespace_job_name" not in plan, plan
    assert buffers < 60, plan
    events = conn.execute(RUN_EVENTS, params).fetchall()
    assert len(events) == 2 and all(text is not None for *_, text in events)


STREAMING_EVENTS = 3_000


def streaming_run(job: tuple[str, str], run: uuid.UUID) -> list[dict[str, Any]]:
    """A streaming run's START on 2026-11-01 and STREAMING_EVENTS RUNNING events, one a
    minute at :30 from then (Flink reports one a minute while a job runs)."""
    events = [run_event("START", "2026-11-01T00:00:00Z", PRODUCER, job, str(run), [], [])]
    for i in range(STREAMING_EVENTS):
        when = f"2026-11-{1 + i // 1440:02d}T{i // 60 % 24:02d}:{i % 60:02d}:30Z"
        events.append(run_event("RUNNING", when, PRODUCER, job, str(run), [], []))
    return events


def streaming_runs_without_statistics(conn: Conn) -> tuple[uuid.UUID, uuid.UUID]:
    """Two streaming runs of STREAMING_EVENTS RUNNING events each (Flink reports one a minute
    while a job runs), in log partitions never analyzed: one still running, one that then
    failed."""
    without_autovacuum(conn)
    running, failed = uuid.uuid4(), uuid.uuid4()
    job = ("flink", "clicks_by_minute")
    events = streaming_run(job, running) + streaming_run(job, failed)
    events.append(run_event("FAIL", "2026-11-20T00:00:00Z", PRODUCER, job, str(failed), [], []))
    append(conn, events)
    return running, failed


def test_the_fold_asks_for_a_streaming_run_s_ends_not_its_every_event(conn: Conn) -> None:
    running, failed = streaming_runs_without_statistics(conn)
    for statistics in ("none", "analyzed"):
        if statistics == "analyzed":
            conn.execute("ANALYZE event_log")
        for run in (running, failed):
            params = (pgarray.uuid_array([run]),)
            for buffers, plan in (
                buffers_read(conn, RUN_FACTS, params),
                buffers_read_planned_once(conn, RUN_FACTS, ([run],), *INDEX_PROBES_ONLY),
            ):
                # its first event and its ends, a probe a partition each; by the run index
                # the question read each of the run's 3,001 events (and more each minute it
                # runs)
                assert buffers < 60, (statistics, plan)
        cur = conn.cursor()
        pgarray.register(cur)
        facts = {
            run: ended_failed
            for run, *_, ended_failed in cur.execute(
                RUN_FACTS, (pgarray.uuid_array([running, failed]),)
            ).fetchall()
        }
        assert facts == {running: False, failed: True}


def test_the_projector_reads_its_page_of_the_log_planned_once_whatever_the_statistics(
    conn: Conn,
) -> None:
    # Planned once (projections.fold._read_past), a plan made on a log without statistics
    # stays: with sorting off it can only merge each partition's position index, so a
    # batch reads its events, not the log sorted.
    streaming_runs_without_statistics(conn)
    row = conn.execute(
        "SELECT tx::text, seq FROM event_log ORDER BY tx, seq OFFSET 3000 LIMIT 1"
    ).fetchone()
    assert row is not None
    middle = Position(int(row[0]), row[1])
    for statistics in ("none", "analyzed"):
        if statistics == "analyzed":
            conn.execute("ANALYZE event_log")
        query, params = batch_after_query(middle, 50, 1 << 20)
        buffers, plan = buffers_read_planned_once(conn, query, params, "enable_sort")
        scans = re.findall(r"(\w+ Scan)(?: using \w+)? on (event_log\w*)", plan)
        assert {scan for scan, table in scans if table != "event_log_clock"} == {"Index Scan"}, (
            statistics,
            plan,
        )
        assert "Sort Method" not in plan, (statistics, plan)  # (a merge, no sort)
        # 50 events and a probe a partition; the log sorted was 6,002 events
        assert buffers < 120, (statistics, plan)


def test_runs_states_at_t_planned_once_read_each_run_s_latest_events(conn: Conn) -> None:
    # asof.RUN_STATES_AT (a graph's edges' and a dataset's runs' states as of T) keeps the
    # plan it was first given: made on partitions never analyzed, it still probes each run's
    # newest events by T, not the 3,001 of a streaming run.
    running, failed = streaming_runs_without_statistics(conn)
    catch_up(conn)
    partitions = partition_count(conn)
    for statistics in ("none", "analyzed"):
        if statistics == "analyzed":
            conn.execute("ANALYZE event_log")
        for when, states in (
            ("2026-11-02T00:00:00Z", {running: "RUNNING", failed: "RUNNING"}),
            ("2026-11-21T00:00:00Z", {running: "RUNNING", failed: "FAIL"}),
        ):
            params = {"runs": [running, failed], "as_of": when}
            buffers, plan = buffers_read_planned_once(conn, RUN_STATES_AT, params, "enable_seqscan")
            assert buffers < 16 * partitions + 40, (statistics, when, plan)
            found = conn.execute(RUN_STATES_AT, params).fetchall()
            assert {run: state for run, state, _ in found} == states
