"""Reads from a real streaming replica: METASTORE_READ_DATABASE_URL.

A second PostgreSQL cluster is cloned from the first with pg_basebackup and follows it by
streaming replication. The API reads /api/v1 and the export feed from it while ingest and
the projector write to the primary: with the replica's replay paused, a new event is
folded on the primary but the API does not show it yet, and its /status says how far
behind the replica is; once replay resumes, the event appears, and a waiting export
long-poll receives it.
"""

from __future__ import annotations

import datetime as dt
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from metastore.embedded_pg import (
    EmbeddedPostgres,
    EmbeddedPostgresError,
    find_bindir,
    free_port,
)
from tests.conftest import prepare_template
from tests.support import running
from tests.test_metrics import scrape, value

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python"
NAMESPACE = "replica-test"
TIMEOUT_S = 60.0


def clone(primary: EmbeddedPostgres) -> EmbeddedPostgres:
    """A streaming replica of `primary`: pg_basebackup with -R (standby.signal and
    primary_conninfo), run as the same OS user as the primary."""
    replica = EmbeddedPostgres(
        Path(tempfile.mkdtemp(prefix="metastore-replica-", dir="/tmp")), fast_unsafe=True
    )
    replica._prepare_dirs()
    replica._run(
        "pg_basebackup",
        "-h", "127.0.0.1", "-p", str(primary.port), "-U", "metastore",
        "-D", str(replica.pgdata), "-R", "-X", "stream", "-c", "fast",
    )  # fmt: skip
    replica.start()
    return replica


@pytest.fixture(scope="module")
def primary_and_replica() -> Iterator[tuple[str, str]]:
    try:
        find_bindir()
    except EmbeddedPostgresError as exc:  # a suite pointed at an external server only
        pytest.skip(f"a replica needs the PostgreSQL server binaries here: {exc}")
    primary = EmbeddedPostgres(
        Path(tempfile.mkdtemp(prefix="metastore-primary-", dir="/tmp")), fast_unsafe=True
    )
    replica: EmbeddedPostgres | None = None
    try:
        primary_url = primary.start()
        prepare_template(primary_url)
        replica = clone(primary)
        with psycopg.connect(replica.url, autocommit=True) as conn:
            row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
            assert row == (True,), "the clone is not a standby"
        yield primary_url, replica.url
    finally:
        if replica is not None:
            replica.destroy()
        primary.destroy()


def event(job: str) -> dict[str, Any]:
    return {
        "eventType": "COMPLETE",
        "eventTime": dt.datetime.now(dt.UTC).isoformat(),
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": NAMESPACE, "name": job},
        "inputs": [],
        "outputs": [],
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }


def job_names(base_url: str) -> list[str]:
    answer = httpx.get(f"{base_url}/api/v1/jobs", params={"namespace": NAMESPACE}, timeout=10)
    assert answer.status_code == 200, answer.text
    return sorted(j["name"] for j in answer.json()["items"])


def eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.1)


def status(base_url: str) -> dict[str, Any]:
    answer = httpx.get(f"{base_url}/api/v1/status", timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_reads_come_from_the_replica_and_writes_go_to_the_primary(
    primary_and_replica: tuple[str, str], tmp_path: Path
) -> None:
    primary_url, replica_url = primary_and_replica
    read_from_replica = {"METASTORE_READ_DATABASE_URL": replica_url}
    with (
        running("projector", primary_url, tmp_path),
        running("api", primary_url, tmp_path, env=read_from_replica) as api,
        running("api", primary_url, tmp_path) as primary_api,
        psycopg.connect(replica_url, autocommit=True) as replica,
    ):
        ready = httpx.get(f"{api.base_url}/readyz", timeout=10).json()
        assert ready == {"status": "ok", "read_database": "ok"}
        first = httpx.post(f"{api.base_url}/ingest/openlineage", json=event("first"), timeout=10)
        assert first.status_code == 200, first.text
        eventually(lambda: job_names(api.base_url) == ["first"], "the replica shows 'first'")
        freshness = status(api.base_url)["freshness"]
        assert freshness["source"] == "replica"
        assert status(primary_api.base_url)["freshness"] == {
            "source": "primary",
            "replication_lag_seconds": 0.0,
            "lag_seconds": pytest.approx(0.0, abs=5.0),
        }
        feed = httpx.get(f"{api.base_url}/export/openlineage/events", timeout=10).json()
        assert [e["job"]["name"] for e in feed["events"]] == ["first"]

        # Replay paused: the primary takes and folds the next event, the replica lags.
        replica.execute("SELECT pg_wal_replay_pause()")
        eventually(
            lambda: (
                replica.execute("SELECT pg_get_wal_replay_pause_state()").fetchone() == ("paused",)
            ),
            "the replica's replay is paused",
        )
        second = httpx.post(f"{api.base_url}/ingest/openlineage", json=event("second"), timeout=10)
        assert second.status_code == 200, second.text
        eventually(
            lambda: job_names(primary_api.base_url) == ["first", "second"],
            "the primary has folded 'second'",
        )
        assert job_names(api.base_url) == ["first"]  # answered by the paused replica
        # Its /metrics read the projections and the lease from the primary (the replica's
        # pg_locks shows none of the primary's locks, its cursors are behind).
        samples = scrape(api.base_url)
        assert value(samples, "metastore_projector_lease_held") == 1
        assert value(samples, "metastore_projection_lag_events", projection="runs") == 0
        assert value(samples, "metastore_projection_position_seq", projection="runs") == 2
        after_first = httpx.get(
            f"{api.base_url}/export/openlineage/events",
            params={"cursor": feed["next_cursor"]},
            timeout=10,
        ).json()
        assert after_first["events"] == []
        time.sleep(1.1)  # the replica's lag is counted from its last replayed commit
        freshness = status(api.base_url)["freshness"]
        assert freshness["source"] == "replica"
        assert freshness["replication_lag_seconds"] >= 1.0
        assert freshness["lag_seconds"] >= freshness["replication_lag_seconds"]

        # A long-poll on the replica is woken (LISTEN is on the primary) once replay resumes.
        polled: list[httpx.Response] = []
        poll = threading.Thread(
            target=lambda: polled.append(
                httpx.get(
                    f"{api.base_url}/export/openlineage/events",
                    params={"cursor": after_first["next_cursor"], "wait": "30"},
                    timeout=40,
                )
            )
        )
        poll.start()
        time.sleep(0.5)
        replica.execute("SELECT pg_wal_replay_resume()")
        poll.join(timeout=40)
        assert polled and polled[0].status_code == 200, polled
        # Answered once replayed, not at the end of its wait: the NOTIFY of 'second' came
        # from the primary before this request began waiting.
        assert polled[0].elapsed.total_seconds() < 15
        assert [e["job"]["name"] for e in polled[0].json()["events"]] == ["second"]
        eventually(
            lambda: job_names(api.base_url) == ["first", "second"], "the replica shows 'second'"
        )
        eventually(
            lambda: status(api.base_url)["freshness"]["replication_lag_seconds"] == 0.0,
            "the replica has caught up",
        )


def test_a_replica_that_is_down_fails_reads_not_ingest(database_url: str, tmp_path: Path) -> None:
    down = f"postgresql://metastore@127.0.0.1:{free_port()}/metastore"
    with running("api", database_url, tmp_path, env={"METASTORE_READ_DATABASE_URL": down}) as api:
        ready = httpx.get(f"{api.base_url}/readyz", timeout=10)
        assert ready.status_code == 200, ready.text
        assert ready.json() == {"status": "ok", "read_database": "unreachable"}
        posted = httpx.post(f"{api.base_url}/ingest/openlineage", json=event("still"), timeout=10)
        assert posted.status_code == 200, posted.text
        read = httpx.get(f"{api.base_url}/api/v1/status", timeout=15)
        assert read.status_code == 503 and read.headers["retry-after"]
        assert read.headers["content-type"] == "application/problem+json"
        feed = httpx.get(f"{api.base_url}/export/openlineage/events", timeout=15)
        assert feed.status_code == 503
