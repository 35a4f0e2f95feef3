"""Answers stay bounded however many objects feed them (issue 35, point 3).

Trino names each job after its query id, so every query that reports the same column
lineage is a job of its own: 20,000 of them made one /datasets/{id}/column-lineage answer
45 MB (every edge embedded every job) and /datasets/{id} 3.6 MB. Here 150 queries, then
150 more: the answers must not grow. Embedded lists are capped with counts; graph walks
stop at the nodes and edges they may visit and say `truncated`.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from bench.hard_cases import (
    MANY_NAMES,
    TRINO_SOURCE,
    TRINO_TARGET,
    many_names,
    trino,
)
from metastore.api.asof import NOW
from metastore.api.lineage import LINEAGE
from projections.runner import catch_up
from tests.conftest import Server
from tests.logdata import append
from tests.support import running

QUERIES = 150
NAMES = 150
# The documented caps (metastore/api/limits.py): the jobs of an edge, an embedded list.
EDGE_JOBS = 20
EMBEDDED_REFS = 100


@pytest.fixture(scope="module")
def store(
    pg_server: Server, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, httpx.Client]]:
    events = list(trino(2 * QUERIES))
    with pg_server.database("bounded", template_db) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            append(conn, [*events[: 2 * QUERIES], *many_names(NAMES, runs=2)])
        catch_up(url)
        log_dir: Path = tmp_path_factory.mktemp("bounded")
        with (
            running("api", url, log_dir) as api,
            httpx.Client(base_url=api.base_url + "/api/v1/", timeout=30) as client,
        ):
            yield url, client


def dataset_id(client: httpx.Client, name: tuple[str, str]) -> str:
    found = client.get("datasets", params={"namespace": name[0], "name": name[1]}).json()
    (item,) = found["items"]
    return str(item["id"])


def get(client: httpx.Client, path: str, **params: Any) -> httpx.Response:
    answer = client.get(path, params=params)
    assert answer.status_code == 200, answer.text
    return answer


def test_more_trino_queries_do_not_grow_the_answers(store: tuple[str, httpx.Client]) -> None:
    url, client = store
    target, source = dataset_id(client, TRINO_TARGET), dataset_id(client, TRINO_SOURCE)
    paths = {
        f"datasets/{target}/column-lineage": {},
        f"datasets/{target}/column-lineage?as_of=2030-01-01T00:00:00Z": {},
        f"datasets/{source}/column-lineage?direction=downstream": {},
        f"datasets/{target}": {},
        f"datasets/{source}": {},
    }
    before = {path: len(get(client, path).content) for path in paths}
    lineage = get(client, f"datasets/{target}/column-lineage").json()
    assert len(lineage["edges"]) == 20
    for edge in lineage["edges"]:
        assert len(edge["jobs"]) == EDGE_JOBS
        assert edge["job_count"] == QUERIES

    with psycopg.connect(url, autocommit=True) as conn:
        append(conn, list(trino(2 * QUERIES))[2 * QUERIES :])
    catch_up(url)

    after = {path: len(get(client, path).content) for path in paths}
    for path in paths:
        # (a job's name and a count may differ by a digit, nothing grows with the queries)
        assert abs(after[path] - before[path]) < 64, (path, before[path], after[path])
    lineage = get(client, f"datasets/{target}/column-lineage").json()
    assert {edge["job_count"] for edge in lineage["edges"]} == {2 * QUERIES}
    page = get(client, f"datasets/{target}").json()
    assert len(page["producers"]) == EMBEDDED_REFS
    assert page["producer_count"] == 2 * QUERIES
    names = [(p["job"]["namespace"], p["job"]["name"]) for p in page["producers"]]
    assert names == sorted(names)
    source_page = get(client, f"datasets/{source}").json()
    assert len(source_page["consumers"]) == EMBEDDED_REFS
    assert source_page["consumer_count"] == 2 * QUERIES


def test_a_datasets_names_are_capped_and_counted(store: tuple[str, httpx.Client]) -> None:
    _, client = store
    page = get(client, f"datasets/{dataset_id(client, MANY_NAMES)}").json()
    assert page["name_count"] == NAMES + 1
    assert len(page["names"]) == EMBEDDED_REFS


def test_the_graph_walk_stops_at_the_edges_it_may_visit(store: tuple[str, httpx.Client]) -> None:
    url, client = store
    source = uuid.UUID(dataset_id(client, TRINO_SOURCE))
    args = {
        "down": True,
        "up": True,
        "kind": "dataset",
        "id": source,
        "depth": 5,
        "max_nodes": 1000,
        "visit_limit": 50,
        "as_of": NOW,
    }
    with psycopg.connect(url) as conn:
        found = conn.execute(LINEAGE, args).fetchall()
        everything = conn.execute(LINEAGE, {**args, "visit_limit": 10**6}).fetchall()
    # 2 x 150 readers: the walk looked at 50 of them and stopped, short of its depth
    assert found[0][6] is True and len(found) <= 1 + 50
    assert everything[0][6] is False and len(everything) == 1 + 2 * QUERIES + 1


def test_the_column_walk_stops_at_the_edges_it_may_visit(
    store: tuple[str, httpx.Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    from metastore.api import asof, column_lineage, limits

    url, client = store
    target = uuid.UUID(dataset_id(client, TRINO_TARGET))
    monkeypatch.setattr(limits, "VISIT_LIMIT", 7)

    async def walk() -> Any:
        found = column_lineage.Walk()
        async with await psycopg.AsyncConnection.connect(url) as conn:
            await column_lineage.walk_fields(conn, [(target, None)], "up", 3, asof.NOW, found)
        return found

    walked = asyncio.run(walk())
    assert walked.truncated and len(walked.edges) == 7
    # The answer says so too, at the real limit: 20 edges, nothing cut.
    assert get(client, f"datasets/{target}/column-lineage").json()["truncated"] is False
