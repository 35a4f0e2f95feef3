"""The read pool kept for the cheap reads when expensive ones pile up (issue 46), through
the real `metastore api` and `metastore projector`: graph walks held up by a lock on a
table they need fill their share of the pool and its queue, the overflow answers 503
`reads-busy` at once, and a namespace list still finds a connection.
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psycopg

from metastore.api.bulkhead import shares
from tests.support import Api, run_event, running

NS = "airflow://pool"
PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.38.0/integration/airflow"
POOL_SIZE = 4
SLOTS, QUEUE = shares(POOL_SIZE)
WALKS = 10  # more than the share and its queue


def _events() -> list[dict[str, Any]]:
    run = str(uuid.uuid4())
    table = {"namespace": "s3://pool", "name": "orders"}
    return [
        run_event("START", "2026-12-01T00:00:00Z", PRODUCER, (NS, "load"), run, [], [table]),
        run_event("COMPLETE", "2026-12-01T00:01:00Z", PRODUCER, (NS, "load"), run, [], [table]),
    ]


def _waiting_on_the_lock(conn: psycopg.Connection[Any]) -> int:
    """How many graph walks wait on a lock."""
    found = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND query LIKE '%%WITH RECURSIVE start%%'"
    ).fetchone()
    return int(found[0]) if found else 0


def _until(check: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_expensive_reads_piling_up_leave_the_cheap_reads_their_connections(
    pg_server: Any, template_db: str, tmp_path: Path
) -> None:
    env = {
        "METASTORE_AUTH": "disabled",
        "METASTORE_POOL_SIZE": str(POOL_SIZE),
        "METASTORE_READ_TIMEOUT": "60",  # (the walks wait on the lock, not on a limit)
    }
    with (
        pg_server.database("pool", template_db) as url,
        running("api", url, tmp_path, env=env) as api_process,
        running("projector", url, tmp_path, env=env),
        httpx.Client(base_url=api_process.base_url, timeout=60) as client,
    ):
        api = Api(client, NS, "s3://pool")
        api.post(_events())
        job = api.job_id("load")
        with psycopg.connect(url) as other, psycopg.connect(url, autocommit=True) as watcher:
            # every walk reads the job edges: they wait for this lock, holding what they took
            other.execute("LOCK TABLE readmodel.job_edges IN ACCESS EXCLUSIVE MODE")
            with ThreadPoolExecutor(WALKS) as pool:
                walks: list[Future[httpx.Response]] = [
                    pool.submit(
                        httpx.get,
                        f"{api_process.base_url}/api/v1/lineage",
                        params={"node": f"job:{job}", "depth": 1},
                        timeout=60,
                    )
                    for _ in range(WALKS)
                ]
                _until(
                    lambda: _waiting_on_the_lock(watcher) == SLOTS,
                    "the walks of the expensive share wait on the lock",
                )
                _until(
                    lambda: sum(w.done() for w in walks) == WALKS - SLOTS - QUEUE,
                    "the walks past the share and its queue are answered",
                )
                # the cheap read finds a connection of its own while the walks wait
                namespaces = client.get("/api/v1/namespaces")
                assert namespaces.status_code == 200, namespaces.text
                assert NS in {n["name"] for n in namespaces.json()["items"]}
                assert _waiting_on_the_lock(watcher) == SLOTS  # (no walk took another)
                refused = [w.result() for w in walks if w.done()]
                other.rollback()  # the walks go on
                answered = [w.result() for w in walks]
        for answer in refused:
            assert answer.status_code == 503
            assert answer.headers["content-type"] == "application/problem+json"
            assert answer.headers["retry-after"] == "2"
            problem = answer.json()
            assert problem["type"] == "https://stackable.tech/metastore/problems/reads-busy"
            assert f"share {SLOTS} of the read connections" in problem["detail"]
        statuses = sorted(a.status_code for a in answered)
        assert statuses == [200] * (SLOTS + QUEUE) + [503] * (WALKS - SLOTS - QUEUE)
        metrics = client.get("/metrics").text
        assert 'metastore_reads_busy_total{route="/lineage"} 4.0' in metrics
