"""Every read has a time budget, and reads cannot take the connections that /readyz,
/api/v1/status, ingest and the projector need: real `metastore api` and `projector`
processes, and reads held up by a lock in PostgreSQL (ten of them, more than the pool).

Without the budget, ten slow reads held every connection of the pool for as long as they
ran (129 s each, one was seen nine minutes later), and /readyz, /status and the other
reads answered 503 "database is unavailable" after five seconds in the queue.
"""

from __future__ import annotations

import concurrent.futures
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from metastore.problems import type_uri
from tests.conftest import Server
from tests.support import Process, running
from tests.test_metrics import scrape, value

READ_TIMEOUT = 2
POOL_SIZE = 8
PRODUCER = "https://example.com/read-budget-test"
RUN_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"


def event(job: str, outputs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "eventType": "COMPLETE",
        "eventTime": "2026-12-01T10:00:00Z",
        "run": {"runId": str(uuid.uuid4()), "facets": {}},
        "job": {"namespace": "budget", "name": job},
        "inputs": [],
        "outputs": outputs,
        "producer": PRODUCER,
        "schemaURL": RUN_SCHEMA,
    }


def schema(*fields: str) -> dict[str, Any]:
    return {
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json",
        "fields": [{"name": f, "type": "string"} for f in fields],
    }


# The API's reads of the dataset page's versions, still running in PostgreSQL.
STILL_READING = """
SELECT count(*) FROM pg_stat_activity
WHERE state = 'active' AND query LIKE '%%AS version,%%' AND pid <> pg_backend_pid()
"""


def wait_until(check: Any, what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"not {what} after {timeout} s"
        time.sleep(0.1)
    return found


def one(url: str, query: str, params: Any = None) -> Any:
    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute(query, params).fetchone()
    return found[0] if found else None


@pytest.fixture(scope="module")
def service(
    pg_server: Server, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Process, Process]]:
    env = {"METASTORE_READ_TIMEOUT": str(READ_TIMEOUT), "METASTORE_POOL_SIZE": str(POOL_SIZE)}
    log_dir = tmp_path_factory.mktemp("budget")
    with (
        pg_server.database("budget", template_db) as url,
        running("api", url, log_dir, env=env) as api,
        running("projector", url, log_dir, env=env) as projector,
    ):
        table = {"namespace": "s3://budget", "name": "orders", "facets": {"schema": schema("a")}}
        posted = httpx.post(api.base_url + "/ingest/openlineage", json=event("writer", [table]))
        assert posted.status_code == 200, posted.text
        wait_until(lambda: one(url, "SELECT count(*) FROM readmodel.dataset_versions"), "folded")
        yield url, api, projector


def test_slow_reads_stop_at_the_limit_and_leave_probes_status_ingest_and_projector_working(
    service: tuple[str, Process, Process],
) -> None:
    url, api, projector = service
    dataset = one(url, "SELECT id FROM readmodel.datasets")
    page = f"{api.base_url}/api/v1/datasets/{dataset}"
    with (
        psycopg.connect(url) as locker,
        concurrent.futures.ThreadPoolExecutor(10) as pool,
        httpx.Client(timeout=30) as client,
    ):
        # Every dataset page reads dataset_versions: under this lock, each read waits.
        locker.execute("LOCK TABLE readmodel.dataset_versions IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        reads = [pool.submit(httpx.get, page, timeout=30) for _ in range(10)]
        waiting = (
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        )
        wait_until(lambda: one(url, waiting) >= POOL_SIZE, "holding the read pool", timeout=10)

        # The pool is held: the probes, /status and ingest still answer at once.
        assert client.get(api.base_url + "/readyz").status_code == 200
        status = client.get(api.base_url + "/api/v1/status")
        assert status.status_code == 200, status.text
        job_only = event("bystander", [])
        posted = client.post(api.base_url + "/ingest/openlineage", json=job_only)
        assert posted.status_code == 200, posted.text
        # The projector has connections of its own (its folds wait for the lock too).
        assert client.get(projector.base_url + "/readyz").status_code == 200
        # (still waiting: none has reached its limit; a time bound from `started` also
        # counted the reads' way to the lock, over 2 s on a loaded machine)
        assert not any(r.done() for r in reads), "not answered while reads waited"

        # Each read stops at the time limit: a 503 of its own type, naming the limit.
        answers = [r.result() for r in reads]
        for answer in answers:
            assert answer.status_code == 503, answer.text
            assert answer.headers["content-type"] == "application/problem+json"
            problem = answer.json()
            assert problem["type"] == type_uri(503, "read-timeout")
            assert "METASTORE_READ_TIMEOUT" in problem["detail"]
            assert f"{READ_TIMEOUT} s" in problem["detail"]
        # (two waited for a connection first: they ran after the first eight stopped)
        assert time.monotonic() - started < 3 * READ_TIMEOUT + 5
        # Nothing is left running in PostgreSQL.
        assert one(url, STILL_READING) == 0
        locker.rollback()
    run = job_only["run"]["runId"]
    wait_until(
        lambda: one(url, "SELECT count(*) FROM readmodel.runs WHERE id = %s", (run,)),
        "folded once the lock is gone",
    )

    samples = scrape(api.base_url)
    assert value(samples, "metastore_read_timeouts_total", route="/datasets/{dataset_id}") == 10
    assert httpx.get(page).status_code == 200


def test_the_read_timeout_is_in_the_document() -> None:
    from metastore.api.openapi import build_document

    problem_type = build_document()["components"]["schemas"]["Problem"]["properties"]["type"]
    assert type_uri(503, "read-timeout") in problem_type["description"]
