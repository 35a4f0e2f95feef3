"""Cheap polling (issue 45 item 5), through real `metastore api` and `metastore projector`
processes: a screen asks /changes whether anything changed since the position it holds
(an event ingested and folded moves it; nothing ingested, it stays), and a conditional
GET of an unchanged answer is a 304 that reads no read model: it answers while every
read-model table is locked, where the answer itself waits for the lock.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql

from tests.conftest import Server
from tests.support import run_event, running, wait_until_folded

SPARK = "https://github.com/OpenLineage/OpenLineage/tree/1.23.0/integration/spark"
JOB = ("spark-sales", "orders_etl")


def _event(when: str) -> dict[str, Any]:
    outputs = [{"namespace": "s3a://sales", "name": "orders_daily"}]
    return run_event("COMPLETE", when, SPARK, JOB, str(uuid.uuid4()), [], outputs)


@contextmanager
def _service(url: str, log_dir: Path) -> Iterator[httpx.Client]:
    """`metastore api` and `metastore projector` on `url` (reads time out after 2 s), one
    event folded."""
    env = {"METASTORE_AUTH": "disabled", "METASTORE_READ_TIMEOUT": "2"}
    with (
        running("api", url, log_dir, env=env) as api,
        running("projector", url, log_dir, env=env),
        httpx.Client(base_url=api.base_url, timeout=30) as client,
    ):
        answer = client.post("/api/v1/lineage", json=_event("2026-09-02T10:00:00Z"))
        assert answer.status_code == 200, answer.text
        wait_until_folded(client)
        yield client


@pytest.fixture
def service(
    pg_server: Server, template_db: str, tmp_path: Path
) -> Iterator[tuple[httpx.Client, str]]:
    with pg_server.database("polling", template_db) as url, _service(url, tmp_path) as client:
        yield client, url


def _changes(client: httpx.Client, since: str | None = None) -> dict[str, Any]:
    params = {"since": since} if since is not None else {}
    answer = client.get("/api/v1/changes", params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def test_changes_says_changed_only_after_an_event_is_folded(
    service: tuple[httpx.Client, str],
) -> None:
    client, _ = service
    first = _changes(client)
    assert first["changed"] is True  # no position given: reload
    # nothing ingested: unchanged, however often asked
    for _ in range(3):
        assert _changes(client, first["position"]) == {**first, "changed": False}
    answer = client.post("/api/v1/lineage", json=_event("2026-09-02T11:00:00Z"))
    assert answer.status_code == 200, answer.text
    wait_until_folded(client)
    moved = _changes(client, first["position"])
    assert moved["changed"] is True and moved["position"] != first["position"]
    assert _changes(client, moved["position"])["changed"] is False


def test_a_bad_position_is_a_problem_naming_since(service: tuple[httpx.Client, str]) -> None:
    client, _ = service
    answer = client.get("/api/v1/changes", params={"since": "not a position!"})
    assert answer.status_code == 400
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert [p["name"] for p in answer.json()["invalid-params"]] == ["since"]


def test_an_etag_from_the_position_moves_with_a_folded_event(
    service: tuple[httpx.Client, str],
) -> None:
    client, _ = service
    first = client.get("/api/v1/search", params={"q": "orders"})
    tag = first.headers["etag"]
    assert first.status_code == 200 and tag.startswith('W/"p')
    unchanged = client.get("/api/v1/search", params={"q": "orders"}, headers={"If-None-Match": tag})
    assert (unchanged.status_code, unchanged.content) == (304, b"")
    assert unchanged.headers["etag"] == tag
    # another request, another validator
    other = client.get("/api/v1/search", params={"q": "sales"}, headers={"If-None-Match": tag})
    assert other.status_code == 200
    answer = client.post("/api/v1/lineage", json=_event("2026-09-02T12:00:00Z"))
    assert answer.status_code == 200, answer.text
    wait_until_folded(client)
    moved = client.get("/api/v1/search", params={"q": "orders"}, headers={"If-None-Match": tag})
    assert moved.status_code == 200 and moved.headers["etag"] != tag
    assert moved.json() == first.json()  # (the same hits: the tag cannot know that)


@pytest.mark.parametrize("path", ["/search?q=orders", "/namespaces", "/runs?limit=5"])
def test_an_unchanged_answer_is_a_304_without_reading_the_read_models(
    service: tuple[httpx.Client, str], path: str
) -> None:
    client, url = service
    first = client.get("/api/v1" + path)
    assert first.status_code == 200, first.text
    tag = first.headers["etag"]
    since = _changes(client)["position"]
    with psycopg.connect(url) as locker:
        tables = locker.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'readmodel'"
        ).fetchall()
        assert len(tables) > 10
        locker.execute(
            sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(
                sql.SQL(", ").join(sql.Identifier("readmodel", t) for (t,) in tables)
            )
        )
        held = client.get("/api/v1" + path, headers={"If-None-Match": tag})
        assert (held.status_code, held.headers["etag"]) == (304, tag)
        assert _changes(client, since)["changed"] is False
        # the answer itself reads them: it waits for the lock until the read timeout
        waited = client.get("/api/v1" + path)
        assert waited.status_code == 503, waited.text
        locker.rollback()
    assert client.get("/api/v1" + path, headers={"If-None-Match": tag}).status_code == 304


def test_a_conditional_get_of_a_malformed_request_is_its_400_not_a_304(
    service: tuple[httpx.Client, str],
) -> None:
    """A tag that matches, or `*`, never stands for a request the handler would refuse (the
    position's 304 was answered before the parameters were checked: schemathesis found it)."""
    client, _ = service
    first = client.get("/api/v1/namespaces")
    tag = first.headers["etag"]
    for headers in ({"If-None-Match": tag}, {"If-None-Match": "*"}):
        bad = client.get(
            "/api/v1/namespaces", params={"cursor": "\x1b not a cursor"}, headers=headers
        )
        assert bad.status_code == 400, bad.text
        assert [p["name"] for p in bad.json()["invalid-params"]] == ["cursor"]
        deep = client.get(
            f"/api/v1/datasets/{uuid.uuid4()}/column-lineage",
            params=[("depth", "1"), ("depth", "2")],
            headers=headers,
        )
        assert deep.status_code == 400, deep.text
    unknown = client.get(
        f"/api/v1/datasets/{uuid.uuid4()}/column-lineage", headers={"If-None-Match": "*"}
    )
    assert unknown.status_code == 404, unknown.text
