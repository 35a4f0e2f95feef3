"""As-of reads of a dataset written by many jobs stay bounded whatever the statistics
(issue 46): real `metastore api` and `metastore projector` processes, a read timeout of
4 s, and one table written by 10,000 Trino queries (each a job of its own), next to two
runs writing 2,000 tables each; with statistics taken before most writers came (stale),
just taken (ANALYZE), and none.

Whether each job's edge held at T was an EXISTS on run_edges that PostgreSQL could answer
through run_edges_dataset (every run that ever wrote the table, filtered on run_id) instead
of the one primary-key row: /datasets/{id}?as_of= and /lineage?node=dataset:{id}&as_of=
took 43 s at 20,000 queries, or 0.38 s, depending on when statistics were last taken
(here, before the fix: 9-13 s each, 0.3-0.8 s after, in all three states).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from bench.hard_cases import TRINO_TARGET, trino
from bench.hostile import many_outputs
from tests.conftest import Server
from tests.logdata import append
from tests.support import running

QUERIES = 10_000
FIRST = 50
READ_TIMEOUT = 4
AS_OF = "2030-01-01T00:00:00Z"


def count(url: str, query: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute(query).fetchone()
    return int(found[0]) if found else 0


def folded(url: str, jobs: int) -> None:
    deadline = time.monotonic() + 120
    edges = (
        "SELECT count(*) FROM readmodel.job_edges WHERE direction = 'output' "
        f"AND name = '{TRINO_TARGET[1]}'"
    )
    while count(url, edges) < jobs:
        assert time.monotonic() < deadline, "not folded after 120 s"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def store(
    pg_server: Server, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, httpx.Client]]:
    # Only the COMPLETEs: each makes the job, its run and its edges (half the fold).
    events = [e for e in trino(QUERIES) if e["eventType"] == "COMPLETE"]
    env = {"METASTORE_READ_TIMEOUT": str(READ_TIMEOUT)}
    log_dir = tmp_path_factory.mktemp("asof_many_writers")
    with (
        pg_server.database("asof_writers", template_db) as url,
        psycopg.connect(url, autocommit=True) as conn,
        running("projector", url, log_dir, env=env),
        running("api", url, log_dir, env=env) as api,
        httpx.Client(base_url=api.base_url + "/api/v1/", timeout=30) as client,
    ):
        # Statistics taken while the table had a few writers among many other names (two
        # runs writing 2,000 tables each), kept (no autovacuum) while the rest arrive:
        # stale, as on a store that grew since its last ANALYZE.
        append(conn, [*many_outputs(2_000, events=2), *events[:FIRST]])
        folded(url, FIRST)
        for table in ("run_edges", "job_edges", "lineage_runs", "dataset_names"):
            conn.execute(f"ALTER TABLE readmodel.{table} SET (autovacuum_enabled = false)")
            conn.execute(f"ANALYZE readmodel.{table}")
        append(conn, events[FIRST:])
        folded(url, QUERIES)
        yield url, client


def statistics(url: str, state: str) -> None:
    """Statistics as the fixture left them (stale), just taken (ANALYZE), or none at all."""
    with psycopg.connect(url, autocommit=True) as conn:
        if state == "analyzed":
            conn.execute("ANALYZE")
        elif state == "none":
            conn.execute(
                "DELETE FROM pg_statistic WHERE starelid IN (SELECT c.oid FROM pg_class c "
                "JOIN pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = 'readmodel')"
            )
            conn.execute(
                "UPDATE pg_class SET reltuples = -1, relpages = 0 WHERE relnamespace = "
                "'readmodel'::regnamespace"
            )


def timed(client: httpx.Client, path: str, **params: Any) -> Any:
    started = time.monotonic()
    answer = client.get(path, params=params)
    took = time.monotonic() - started
    assert answer.status_code == 200, (path, took, answer.text)
    return answer.json()


@pytest.mark.parametrize("state", ["stale", "analyzed", "none"])
def test_the_as_of_page_and_lineage_of_a_table_written_by_many_jobs_answer_in_time(
    store: tuple[str, httpx.Client], state: str
) -> None:
    url, client = store
    statistics(url, state)
    found = client.get("datasets", params={"namespace": TRINO_TARGET[0], "name": TRINO_TARGET[1]})
    (item,) = found.json()["items"]
    dataset = item["id"]

    page = timed(client, f"datasets/{dataset}", as_of=AS_OF)
    assert page["producer_count"] == QUERIES
    assert len(page["producers"]) == 100
    graph = timed(client, "lineage", node=f"dataset:{dataset}", as_of=AS_OF, depth=1)
    (node,) = [n for n in graph["nodes"] if n["id"] == dataset]
    writers = [n for n in graph["nodes"] if n["type"] == "job"]
    # every writer held its edge then: those drawn and those beyond the node cap
    assert writers and all(w["latest_run"]["state"] == "COMPLETE" for w in writers)
    assert len(writers) + node["beyond"]["upstream"] == QUERIES
