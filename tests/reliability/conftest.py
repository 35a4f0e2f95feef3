"""Fixtures for the reliability tests: events to send, a PostgreSQL a test may stop, probes.

Every test here runs the real processes (`metastore api`, `metastore projector`, PostgreSQL)
and counts what it sent, what was acknowledged and what the log holds afterwards.
"""

from __future__ import annotations

import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest

from metastore.embedded_pg import EmbeddedPostgres
from metastore.migrations import apply_migrations
from projections.schema import create_readmodel_tables

PRODUCER = "https://example.com/metastore-reliability"
RUN_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
T = TypeVar("T")


def run_event(
    run_id: str | None = None, event_type: str = "START", job: str = "job", padding: int = 0
) -> dict[str, Any]:
    """A RunEvent told apart by its runId; `padding` bytes of facet make it bigger."""
    event: dict[str, Any] = {
        "eventType": event_type,
        "eventTime": "2024-05-01T10:00:00.000Z",
        "run": {"runId": run_id or str(uuid.uuid4()), "facets": {}},
        "job": {"namespace": "reliability", "name": job},
        "inputs": [{"namespace": "s3://in", "name": f"{job}/input"}],
        "outputs": [{"namespace": "s3://out", "name": f"{job}/output"}],
        "producer": PRODUCER,
        "schemaURL": RUN_SCHEMA,
    }
    if padding:
        event["run"]["facets"]["padding"] = {
            "_producer": PRODUCER,
            "_schemaURL": "https://example.com/padding.json",
            "data": "x" * padding,
        }
    return event


COUNT_RUN_EVENTS = """
SELECT run_id::text, event_type, count(*) FROM event_log WHERE run_id IS NOT NULL
GROUP BY run_id, event_type
"""


def run_event_counts(database_url: str) -> Counter[tuple[str, str]]:
    """How often each (runId, eventType) is in the log."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        return Counter({(r, t): n for r, t, n in conn.execute(COUNT_RUN_EVENTS).fetchall()})


def log_size(database_url: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM event_log").fetchone()
    assert row is not None
    return int(row[0])


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


@contextmanager
def sampled(sample: Callable[[], T], every: float) -> Iterator[list[T]]:
    """`sample()` every `every` seconds on a thread of its own while the block runs; the
    list the samples go into."""
    samples: list[T] = []
    done = threading.Event()

    def sampler() -> None:
        while not done.is_set():
            samples.append(sample())
            time.sleep(every)

    watcher = threading.Thread(target=sampler)
    watcher.start()
    try:
        yield samples
    finally:
        done.set()
        watcher.join()


def all_at_once(target: Callable[[], None], count: int) -> None:
    """`count` threads running `target`, started together; returns when all have ended."""
    threads = [threading.Thread(target=target) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


@contextmanager
def migrated_cluster() -> Iterator[tuple[EmbeddedPostgres, str]]:
    """A PostgreSQL of its own, migrated, which a test may stop, restart or freeze."""
    # Not under tmp_path: when we are root the server's user cannot enter pytest's folder.
    pg = EmbeddedPostgres(
        Path(tempfile.mkdtemp(prefix="metastore-reliability-", dir="/tmp")), fast_unsafe=True
    )
    url = pg.start()
    try:
        apply_migrations(url)
        with psycopg.connect(url) as conn:
            create_readmodel_tables(conn)
        yield pg, url
    finally:
        pg.destroy()


@pytest.fixture
def stoppable_postgres() -> Iterator[tuple[EmbeddedPostgres, str]]:
    """A PostgreSQL of this test's own, migrated, which the test may stop and restart."""
    with migrated_cluster() as cluster:
        yield cluster
