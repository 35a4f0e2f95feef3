"""The event log itself: immutable, partitioned by month, idempotent, and never skipped."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import msgspec
import psycopg
import pytest
from psycopg import errors, sql
from psycopg_pool import AsyncConnectionPool

from metastore.config import load_settings
from metastore.db import create_pool
from metastore.envelope import parse_event
from metastore.eventlog import (
    START,
    LogRecord,
    append_events,
    append_events_async,
    read_events_after,
    watermark,
)
from metastore.group_commit import GroupCommitter


def record(n: int = 0, event_type: str = "START") -> LogRecord:
    event = {
        "eventType": event_type,
        "eventTime": "2024-05-01T10:00:00Z",
        "run": {"runId": str(uuid.UUID(int=n + 1))},
        "job": {"namespace": "tests", "name": f"job-{n}"},
        "producer": "https://example.com/tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }
    return parse_event(json.dumps(event).encode())


def count(conn: psycopg.Connection[Any], where: str = "true") -> int:
    row = conn.execute(f"SELECT count(*) FROM event_log WHERE {where}").fetchone()
    assert row is not None
    return int(row[0])


def month_partition(months_ahead: int) -> str:
    today = dt.datetime.now(dt.UTC)
    month = today.month - 1 + months_ahead
    return f"event_log_{today.year + month // 12:04d}_{month % 12 + 1:02d}"


@pytest.fixture
def filled(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """Two events in this month's partition, one (from the far future) in DEFAULT."""
    with conn.transaction():
        append_events(conn, [record(1), record(2)])
    conn.execute(
        "INSERT INTO event_log (received_at, event_time, kind, producer, digest, size_bytes,"
        " event) VALUES ('2100-01-01Z', now(), 'job', 'https://example.com/tests', 'd', 2, '{}')"
    )
    return conn


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE {table} SET producer = 'rewritten'",
        "DELETE FROM {table}",
        "TRUNCATE {table}",
    ],
)
@pytest.mark.parametrize("table", ["event_log", "event_log_default", "current_month"])
def test_the_log_rejects_changes_even_from_its_owner(
    filled: psycopg.Connection[Any], statement: str, table: str
) -> None:
    name = month_partition(0) if table == "current_month" else table
    with pytest.raises(errors.InsufficientPrivilege, match="append-only"):
        filled.execute(statement.format(table=name))
    assert count(filled, "producer = 'https://example.com/tests'") == 3


@pytest.mark.parametrize(
    "statement", ["UPDATE event_digests SET digest = 'x'", "TRUNCATE event_digests"]
)
def test_the_digests_reject_changes(filled: psycopg.Connection[Any], statement: str) -> None:
    with pytest.raises(errors.InsufficientPrivilege):
        filled.execute(statement)


@pytest.fixture
def writer_role(conn: psycopg.Connection[Any], database_url: str) -> Iterator[str]:
    """A real database role for the service, granted what event_log_grant_writer grants."""
    role = f"metastore_writer_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    try:
        conn.execute("SELECT event_log_grant_writer(%s)", (role,))
        yield role
    finally:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_the_service_role_may_only_insert_and_select(
    filled: psycopg.Connection[Any], writer_role: str, database_url: str
) -> None:
    with psycopg.connect(database_url, user=writer_role, autocommit=True) as service:
        with service.transaction():
            assert append_events(service, [record(3)]) == 1
        assert len(read_events_after(service, START, 10)) == 4
        # It keeps the partitions ahead without owning the table (SECURITY DEFINER).
        service.execute("SELECT event_log_ensure_partitions(3)")
        for statement in (
            "UPDATE event_log SET producer = 'x'",
            "DELETE FROM event_log",
            "TRUNCATE event_log",
            "DELETE FROM event_digests",
            "DROP TABLE event_log_default",
        ):
            with pytest.raises(errors.InsufficientPrivilege):
                service.execute(statement)
    assert count(filled) == 4


def test_events_go_to_the_current_months_partition(filled: psycopg.Connection[Any]) -> None:
    rows = filled.execute(
        "SELECT tableoid::regclass::text, count(*) FROM event_log GROUP BY 1"
    ).fetchall()
    assert dict(rows) == {"event_log_default": 1, month_partition(0): 2}


def test_partitions_exist_three_months_ahead_and_creating_them_is_idempotent(
    conn: psycopg.Connection[Any],
) -> None:
    for months in range(4):
        assert conn.execute("SELECT to_regclass(%s)", (month_partition(months),)).fetchone() != (
            None,
        )
    assert conn.execute("SELECT event_log_ensure_partitions(3)").fetchone() == (0,)
    conn.execute(f"DROP TABLE {month_partition(3)}")
    assert conn.execute("SELECT event_log_ensure_partitions(3)").fetchone() == (1,)


def test_rows_in_the_default_partition_do_not_break_partition_creation(
    conn: psycopg.Connection[Any],
) -> None:
    """If maintenance lapsed, rows land in DEFAULT; later maintenance must not fail on them."""
    lapsed = dt.datetime.now(dt.UTC).replace(day=15) + dt.timedelta(days=31 * 4)
    conn.execute(
        "INSERT INTO event_log (received_at, event_time, kind, producer, digest, size_bytes,"
        " event) VALUES (%s, now(), 'job', 'p', 'd', 2, '{}')",
        (lapsed,),
    )
    assert count(conn, "tableoid = 'event_log_default'::regclass") == 1
    assert conn.execute("SELECT event_log_ensure_partitions(5)").fetchone() == (1,)
    assert conn.execute("SELECT to_regclass(%s)", (month_partition(4),)).fetchone() == (None,)
    assert conn.execute("SELECT to_regclass(%s)", (month_partition(5),)).fetchone() != (None,)
    assert count(conn) == 1


def test_an_exact_retry_is_stored_once(conn: psycopg.Connection[Any]) -> None:
    with conn.transaction():
        assert append_events(conn, [record(1), record(1), record(2)]) == 2
    with conn.transaction():
        assert append_events(conn, [record(2), record(1)]) == 0
    assert count(conn) == 2


def test_the_async_append_keeps_arrival_order_and_dedupes(database_url: str) -> None:
    records = [record(n) for n in (5, 3, 9, 3, 1)]

    async def append() -> int:
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            new = await append_events_async(conn, records)
            await conn.commit()
            return new

    assert asyncio.run(append()) == 4
    with psycopg.connect(database_url) as conn:
        names = [e.job_name for e in read_events_after(conn, START, 10)]
        assert names == ["job-5", "job-3", "job-9", "job-1"]
        stored = read_events_after(conn, START, 10, raw=True)[0].event
        assert json.loads(stored) == json.loads(records[0].event_json)


def test_an_event_postgresql_refuses_fails_alone_in_its_group(database_url: str) -> None:
    # The envelope lets nothing through that the log refuses; should that ever change, the
    # group is retried one event at a time so only the refused event fails.
    broken = msgspec.structs.replace(record(8), digest=b"broken", event_json=b'{"a": ')
    group = [record(7), broken, record(9)]

    async def append() -> list[str | None]:
        async with AsyncConnectionPool(
            database_url, min_size=1, max_size=2, kwargs={"autocommit": True}, open=False
        ) as pool:
            committer = GroupCommitter(pool)
            await committer.start()
            try:
                return await committer.append(group)
            finally:
                await committer.stop()

    outcomes = asyncio.run(append())
    assert outcomes[0] is None and outcomes[2] is None
    assert outcomes[1] is not None and "cannot store" in outcomes[1]
    with psycopg.connect(database_url) as conn:
        names = [e.job_name for e in read_events_after(conn, START, 10)]
    assert names == ["job-7", "job-9"]


def test_a_reader_never_skips_an_append_that_commits_late(database_url: str) -> None:
    """Transactions commit out of order; the reader must neither skip nor reorder."""

    async def scenario() -> None:
        early = await psycopg.AsyncConnection.connect(database_url)
        late = await psycopg.AsyncConnection.connect(database_url)
        reader = psycopg.connect(database_url, autocommit=True)
        try:
            await append_events_async(early, [record(1, "START")])  # holds its transaction
            for n in (2, 3):
                await append_events_async(late, [record(n, "COMPLETE")])
                await late.commit()
            # The late events are committed and visible to a plain query ...
            assert count(reader, "event_type = 'COMPLETE'") == 2
            # ... but a cursor reader does not read past the early, open transaction.
            assert read_events_after(reader, START, 100) == []
            assert watermark(reader) == START

            await early.commit()
            events = read_events_after(reader, START, 100)
            assert [e.job_name for e in events] == ["job-1", "job-2", "job-3"]
            assert watermark(reader) == events[-1].position
            assert read_events_after(reader, events[-1].position, 100) == []
        finally:
            await early.close()
            await late.close()
            reader.close()

    asyncio.run(scenario())


def test_a_group_that_meets_a_dead_connection_is_committed_on_a_fresh_one(
    database_url: str,
) -> None:
    """The committer's connection dies while its append waits (a PostgreSQL restart, an
    administrator's pg_terminate_backend): the group is appended again on a fresh
    connection, and the request is answered as committed, its event stored once."""
    settings = load_settings({"METASTORE_DATABASE_URL": database_url})

    async def scenario() -> list[str | None]:
        pool = create_pool(settings, min_size=1, max_size=2, autocommit=True, name="test")
        blocker = await psycopg.AsyncConnection.connect(database_url)
        admin = await psycopg.AsyncConnection.connect(database_url, autocommit=True)
        await pool.open(wait=True)
        committer = GroupCommitter(pool)
        await committer.start()
        try:
            # The append waits behind this lock until its connection is ended.
            await blocker.execute("LOCK TABLE event_digests IN EXCLUSIVE MODE")
            append = asyncio.create_task(committer.append([record(42)]))
            pid = None
            for _ in range(200):
                cur = await admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND query LIKE '%event_digests%'"
                )
                row = await cur.fetchone()
                if row:
                    pid = row[0]
                    break
                await asyncio.sleep(0.05)
            assert pid is not None, "the append never waited for the lock"
            await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            await blocker.commit()
            return await asyncio.wait_for(append, 20)
        finally:
            await committer.stop()
            await pool.close()
            await blocker.close()
            await admin.close()

    assert asyncio.run(scenario()) == [None]
    with psycopg.connect(database_url) as conn:
        assert count(conn, "job_name = 'job-42'") == 1
