"""POST /ingest/openlineage (+ /batch) against a real `metastore api` and a real PostgreSQL."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from metastore.embedded_pg import EmbeddedPostgres
from metastore.migrations import apply_migrations
from tests.support import CONFORMANCE, Process, conformance_files, running, start_process

MAX_BYTES = 2 * 1024 * 1024  # the server's METASTORE_MAX_EVENT_BYTES in this module
JSON = {"Content-Type": "application/json"}
PROBLEM = "application/problem+json"


def run_event(**changes: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "eventType": "START",
        "eventTime": "2024-05-01T10:00:00.123Z",
        "run": {"runId": str(uuid.uuid4()), "facets": {}},
        "job": {"namespace": "tests", "name": "ingest"},
        "inputs": [],
        "outputs": [],
        "producer": "https://example.com/tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }
    event.update(changes)
    return event


@pytest.fixture(scope="module")
def api(module_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    env = {"METASTORE_MAX_EVENT_BYTES": str(MAX_BYTES), "METASTORE_REQUEST_TIMEOUT": "2"}
    log_dir = tmp_path_factory.mktemp("ingest")
    with running("api", module_database, log_dir, env=env) as process:
        yield process


@pytest.fixture(scope="module")
def client(api: Process) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api.base_url, timeout=30) as http:
        yield http


@pytest.fixture(scope="module")
def db(module_database: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(module_database, autocommit=True) as conn:
        yield conn


def stored(db: psycopg.Connection[Any], document: Any) -> list[Any]:
    """The stored events equal (as JSON) to the document."""
    rows = db.execute(
        "SELECT event FROM event_log WHERE event::jsonb = %s::jsonb", (json.dumps(document),)
    ).fetchall()
    return [row[0] for row in rows]


def runs_stored(db: psycopg.Connection[Any], run_id: str) -> int:
    row = db.execute("SELECT count(*) FROM event_log WHERE run_id = %s", (run_id,)).fetchone()
    assert row is not None
    return int(row[0])


def assert_problem(response: httpx.Response, status: int, pointer: str | None = None) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    assert problem["status"] == status
    assert problem["detail"]
    if pointer is not None:
        assert problem["pointer"] == pointer


ACCEPTED = [
    *[
        path
        for folder in sorted((CONFORMANCE / "scenarios").iterdir())
        for path in conformance_files(f"scenarios/{folder.name}")
    ],
    *conformance_files("valid"),
    *conformance_files("facet_invalid"),
]


def test_every_valid_conformance_event_is_accepted_and_read_back_unchanged(
    client: httpx.Client, db: psycopg.Connection[Any]
) -> None:
    for path in ACCEPTED:
        response = client.post("/ingest/openlineage", content=path.read_bytes(), headers=JSON)
        assert response.status_code == 200, (path, response.text)
    for path in ACCEPTED:
        document = json.loads(path.read_bytes())
        assert stored(db, document) == [document], path


@pytest.mark.parametrize("path", conformance_files("invalid"), ids=lambda p: p.name)
def test_invalid_conformance_events_are_refused_naming_the_field(
    client: httpx.Client, db: psycopg.Connection[Any], path: Path
) -> None:
    response = client.post("/ingest/openlineage", content=path.read_bytes(), headers=JSON)
    assert_problem(response, 422, "/run/runId")
    assert response.json()["invalid-params"][0]["name"] == "/run/runId"
    assert stored(db, json.loads(path.read_bytes())) == []


def test_a_partly_invalid_batch_stores_its_valid_events(
    client: httpx.Client, db: psycopg.Connection[Any]
) -> None:
    good, also_good = run_event(), run_event(eventType="COMPLETE")
    bad = run_event(run={"runId": "nope"})
    no_job = {k: v for k, v in run_event().items() if k != "job"}
    response = client.post("/ingest/openlineage/batch", json=[good, bad, also_good, no_job])
    assert response.status_code == 200
    assert response.json() == {
        "status": "partial_success",
        "summary": {
            "received": 4,
            "successful": 2,
            "failed": 2,
            "retriable": 0,
            "non_retriable": 2,
        },
        "failed_events": [
            {
                "index": 1,
                "reason": "/run/runId: Invalid UUID",
                "retriable": False,
                "pointer": "/run/runId",
            },
            {
                "index": 3,
                "reason": "/job: a run event needs a `job`",
                "retriable": False,
                "pointer": "/job",
            },
        ],
    }
    assert stored(db, good) == [good]
    assert stored(db, also_good) == [also_good]
    assert stored(db, bad) == []


def test_a_valid_batch_is_a_success(client: httpx.Client, db: psycopg.Connection[Any]) -> None:
    events = [run_event() for _ in range(50)]
    response = client.post("/ingest/openlineage/batch", json=events)
    assert response.json()["status"] == "success"
    assert response.json()["summary"]["successful"] == 50
    assert all(stored(db, e) == [e] for e in events)


def test_an_empty_batch_is_a_success(client: httpx.Client) -> None:
    response = client.post("/ingest/openlineage/batch", json=[])
    assert response.json()["summary"] == {
        "received": 0,
        "successful": 0,
        "failed": 0,
        "retriable": 0,
        "non_retriable": 0,
    }


def test_an_exact_retry_is_stored_once_and_answered_alike(
    client: httpx.Client, db: psycopg.Connection[Any]
) -> None:
    event = run_event()
    body = json.dumps(event).encode()
    reordered = json.dumps(dict(reversed(list(event.items()))), indent=2).encode()
    answers = [
        client.post("/ingest/openlineage", content=content, headers=JSON)
        for content in (body, body, reordered)
    ]
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert len({a.content for a in answers}) == 1
    batch = client.post("/ingest/openlineage/batch", json=[event, event])
    assert batch.json()["summary"]["successful"] == 2
    assert runs_stored(db, event["run"]["runId"]) == 1


def test_duplicates_inside_one_batch_are_stored_once(
    client: httpx.Client, db: psycopg.Connection[Any]
) -> None:
    event = run_event()
    response = client.post("/ingest/openlineage/batch", json=[event, event, event])
    assert response.json()["status"] == "success"
    assert runs_stored(db, event["run"]["runId"]) == 1


def test_concurrent_requests_are_all_committed(api: Process, db: psycopg.Connection[Any]) -> None:
    """Many clients at once: group commit shares transactions, and loses or mixes nothing."""
    events = [run_event() for _ in range(200)]

    async def post_all() -> list[int]:
        limits = httpx.Limits(max_connections=32)
        async with httpx.AsyncClient(base_url=api.base_url, timeout=30, limits=limits) as http:
            answers = await asyncio.gather(
                *(http.post("/ingest/openlineage", json=e) for e in events),
                http.post("/ingest/openlineage/batch", json=events[:20]),
            )
            return [a.status_code for a in answers]

    before = group_commits(api)
    assert set(asyncio.run(post_all())) == {200}
    after = group_commits(api)
    for event in events:
        assert runs_stored(db, event["run"]["runId"]) == 1
    assert after[1] - before[1] == len(events) + 20  # every event went through a group ...
    assert after[0] - before[0] < len(events)  # ... and groups held several requests


def group_commits(api: Process) -> tuple[float, float]:
    """(transactions, events) of the group committer so far, from /metrics."""
    metrics = httpx.get(api.base_url + "/metrics").text.splitlines()
    values = dict(line.rsplit(" ", 1) for line in metrics if line.startswith("metastore_group"))
    return (
        float(values.get("metastore_group_commit_events_count", 0)),
        float(values.get("metastore_group_commit_events_sum", 0)),
    )


def test_gzip_bodies_are_accepted(client: httpx.Client, db: psycopg.Connection[Any]) -> None:
    event, batch = run_event(), [run_event(), run_event()]
    headers = {**JSON, "Content-Encoding": "gzip"}
    single = client.post(
        "/ingest/openlineage", content=gzip.compress(json.dumps(event).encode()), headers=headers
    )
    many = client.post(
        "/ingest/openlineage/batch",
        content=gzip.compress(json.dumps(batch).encode()),
        headers=headers,
    )
    assert (single.status_code, many.json()["status"]) == (200, "success")
    assert [stored(db, e) for e in (event, *batch)] == [[event], *[[e] for e in batch]]


def test_a_body_of_concatenated_gzip_members_is_read_whole(
    client: httpx.Client, db: psycopg.Connection[Any]
) -> None:
    event = run_event()
    text = json.dumps(event).encode()
    body = gzip.compress(text[:100]) + gzip.compress(text[100:])
    response = client.post(
        "/ingest/openlineage", content=body, headers={**JSON, "Content-Encoding": "gzip"}
    )
    assert response.status_code == 200
    assert stored(db, event) == [event]


def test_a_large_event_within_the_limit_is_stored(
    client: httpx.Client, db: psycopg.Connection[Any]
) -> None:
    event = run_event()
    event["run"]["facets"]["spark.logicalPlan"] = {"plan": ["x" * 1000] * 1500}  # ~1.5 MB
    body = gzip.compress(json.dumps(event).encode())
    response = client.post(
        "/ingest/openlineage", content=body, headers={**JSON, "Content-Encoding": "gzip"}
    )
    assert response.status_code == 200
    assert runs_stored(db, event["run"]["runId"]) == 1


def test_a_gzip_bomb_is_refused_without_inflating_it(client: httpx.Client) -> None:
    bomb = gzip.compress(b"[" + b" " * (200 * 1024 * 1024) + b"]", compresslevel=9)
    assert len(bomb) < MAX_BYTES
    started = time.monotonic()
    response = client.post(
        "/ingest/openlineage", content=bomb, headers={**JSON, "Content-Encoding": "gzip"}
    )
    assert_problem(response, 413)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("endpoint", ["/ingest/openlineage", "/ingest/openlineage/batch"])
def test_a_body_over_the_limit_is_refused(client: httpx.Client, endpoint: str) -> None:
    assert_problem(client.post(endpoint, content=b" " * (MAX_BYTES + 1), headers=JSON), 413)

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit applies while reading
        for _ in range(MAX_BYTES // 65536 + 2):
            yield b" " * 65536

    assert_problem(client.post(endpoint, content=chunks(), headers=JSON), 413)


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Content-Type": "text/plain"}, 415),
        ({"Content-Type": "application/xml"}, 415),
        ({**JSON, "Content-Encoding": "br"}, 415),
        ({**JSON, "Content-Encoding": "gzip"}, 400),  # says gzip, is not
        ({"Content-Type": "application/json; charset=utf-8"}, 200),
        ({"Content-Type": ""}, 200),  # clients that omit it: read as JSON
    ],
)
def test_content_type_and_encoding(
    client: httpx.Client, headers: dict[str, str], status: int
) -> None:
    body = json.dumps(run_event()).encode()
    response = client.post("/ingest/openlineage", content=body, headers=headers)
    assert response.status_code == status
    if status != 200:
        assert_problem(response, status)


def test_a_truncated_gzip_body_is_refused(client: httpx.Client) -> None:
    body = gzip.compress(json.dumps(run_event()).encode())[:-20]
    response = client.post(
        "/ingest/openlineage", content=body, headers={**JSON, "Content-Encoding": "gzip"}
    )
    assert_problem(response, 400)


@pytest.mark.parametrize(
    ("body", "status", "pointer"),
    [
        (b"", 400, None),
        (b"{not json", 400, None),
        (b'{"eventTime": "\xff\xfe"}', 400, None),  # invalid UTF-8
        (b"[" * 1000 + b"]" * 1000, 400, None),
        (b"null", 422, ""),
        (b"[]", 422, ""),
        (b'"just a string"', 422, ""),
        (
            json.dumps(run_event(job={"namespace": "tests", "name": "a\u0000b"})).encode(),
            422,
            "/job/name",
        ),
        (
            b'{"x": 1e200000, ' + json.dumps(run_event()).encode()[1:],  # beyond numeric
            422,
            "/x",
        ),
    ],
    ids=["empty", "not-json", "utf8", "deep", "null", "array", "string", "nul", "huge-number"],
)
def test_hostile_bodies_get_a_clear_4xx(
    client: httpx.Client, body: bytes, status: int, pointer: str | None
) -> None:
    response = client.post("/ingest/openlineage", content=body, headers=JSON)
    assert_problem(response, status, pointer)


def test_an_event_is_stored_as_the_text_sent_and_compressed_with_lz4(
    client: httpx.Client, db: psycopg.Connection[Any]
) -> None:
    event = run_event()
    event["run"]["facets"]["spark_logicalPlan"] = {
        "plan": [{"node": f"Project {i}"} for i in range(200)]
    }
    body = json.dumps(event, indent=1).encode()  # whitespace and key order are kept
    assert client.post("/ingest/openlineage", content=body, headers=JSON).status_code == 200
    row = db.execute(
        "SELECT event::text, pg_column_compression(event) FROM event_log WHERE run_id = %s",
        (event["run"]["runId"],),
    ).fetchone()
    assert row is not None
    assert row[0] == body.decode()
    assert row[1] == "lz4"  # the test server is built with lz4, as Debian's and most are


def test_deep_nesting_and_long_numbers_are_stored_faithfully_or_refused(
    client: httpx.Client, db: psycopg.Connection[Any]
) -> None:
    event = run_event()
    event["run"]["facets"]["deep"] = json.loads("[" * 900 + "]" * 900)
    event["run"]["facets"]["long"] = int("9" * 400)
    response = client.post("/ingest/openlineage", json=event)
    assert response.status_code == 200
    assert stored(db, event) == [event]


def test_a_batch_element_beyond_what_postgresql_holds_fails_alone(
    client: httpx.Client, db: psycopg.Connection[Any]
) -> None:
    good = run_event()
    huge = b'{"x": 1e200000, ' + json.dumps(run_event()).encode()[1:]
    body = b"[" + json.dumps(good).encode() + b"," + huge + b"]"
    response = client.post("/ingest/openlineage/batch", content=body, headers=JSON)
    result = response.json()
    assert result["summary"]["successful"] == 1
    assert [(f["index"], f["pointer"]) for f in result["failed_events"]] == [(1, "/x")]
    assert stored(db, good) == [good]


def test_other_methods_get_a_problem(client: httpx.Client) -> None:
    assert_problem(client.get("/ingest/openlineage"), 405)


def test_a_client_that_stops_sending_gets_408(api: Process) -> None:
    host, port = api.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /ingest/openlineage HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 1000\r\n\r\n{"eventTime":'
        )
        started = time.monotonic()
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 408")
    assert time.monotonic() - started < 8


def test_partitions_are_created_ahead_at_start(database_url: str, tmp_path: Path) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        partitions = "SELECT count(*) FROM pg_inherits WHERE inhparent = 'event_log'::regclass"
        before = conn.execute(partitions).fetchone()
        last = conn.execute(
            "SELECT max(inhrelid::regclass::text) FROM pg_inherits"
            " WHERE inhparent = 'event_log'::regclass AND inhrelid::regclass::text ~ '_\\d'"
        ).fetchone()
        assert last is not None
        conn.execute(f"DROP TABLE {last[0]}")
        with running("api", database_url, tmp_path):
            deadline = time.monotonic() + 10
            while conn.execute(partitions).fetchone() != before:
                assert time.monotonic() < deadline, "the API did not create the partition"
                time.sleep(0.1)


@pytest.mark.reliability
def test_an_outage_gets_503_with_retry_after_and_ingest_recovers(tmp_path: Path) -> None:
    # Not under tmp_path: when we are root, the server's user cannot enter pytest's folder.
    pg = EmbeddedPostgres(Path(tempfile.mkdtemp(prefix="metastore-outage-", dir="/tmp")))
    url = pg.start()
    try:
        apply_migrations(url)
        api = start_process("api", url, tmp_path)
        try:
            with httpx.Client(base_url=api.base_url, timeout=30) as http:
                assert http.post("/ingest/openlineage", json=run_event()).status_code == 200
                pg.stop()
                for _ in range(3):  # the first after the outage, then the fast-failing ones
                    started = time.monotonic()
                    response = http.post("/ingest/openlineage", json=run_event())
                    assert_problem(response, 503)
                    assert int(response.headers["Retry-After"]) > 0
                    assert time.monotonic() - started < 6.5
                pg.restart_stopped()
                after = run_event()
                deadline = time.monotonic() + 20
                while (code := http.post("/ingest/openlineage", json=after).status_code) != 200:
                    assert code == 503
                    assert time.monotonic() < deadline, "ingest did not recover"
                    time.sleep(0.2)
            with psycopg.connect(url) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM event_log WHERE run_id = %s", (after["run"]["runId"],)
                ).fetchone()
                assert row == (1,)
        finally:
            api.stop()
    finally:
        pg.destroy()
