"""Emitters left at their defaults: the clients' default path (POST /api/v1/lineage), events
without schemaURL (Marquez's own fixtures), and clear answers for wrong paths and tokens.

Against a real `metastore api` and `metastore projector` with tokens enforced.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState

from tests.emitter import openlineage_client
from tests.support import Process, running, wait_until_folded

MARQUEZ = Path(__file__).resolve().parent / "fixtures" / "marquez"
APPLES = sorted((MARQUEZ / "apples").glob("*.json"))
OTHERS = sorted((MARQUEZ / "open_lineage").rglob("*.json"))
INGEST, READ, EXPORT = "paths-ingest-token", "paths-read-token", "paths-export-token"
WAY_IN = "/ingest/openlineage"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def run_event(**changes: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "eventType": "COMPLETE",
        "eventTime": "2024-05-01T10:00:00Z",
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": "hand-written", "name": "curl"},
        "producer": "https://example.com/a-curl-script",
    }
    event.update(changes)
    return event


@pytest.fixture(scope="module")
def api(module_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    env = {
        "METASTORE_AUTH": "enabled",
        "METASTORE_INGEST_TOKENS": INGEST,
        "METASTORE_READ_TOKENS": READ,
        "METASTORE_EXPORT_TOKENS": EXPORT,
    }
    log_dir = tmp_path_factory.mktemp("paths")
    with (
        running("api", module_database, log_dir, env=env) as api,
        running("projector", module_database, log_dir),
    ):
        yield api


@pytest.fixture(scope="module")
def client(api: Process) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api.base_url, timeout=30) as http:
        yield http


def stored(url: str, document: Any) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM event_log WHERE event::jsonb = %s::jsonb", (json.dumps(document),)
        ).fetchone()
    assert row is not None
    return int(row[0])


def read(client: httpx.Client, path: str, **params: Any) -> Any:
    answer = client.get("/api/v1" + path, params=params, headers=bearer(READ))
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_marquez_fixtures_without_schema_url_are_stored_and_folded(
    client: httpx.Client, module_database: str
) -> None:
    documents = [json.loads(p.read_bytes()) for p in (*APPLES, *OTHERS)]
    assert documents and not any("schemaURL" in d for d in documents)
    for path in APPLES:  # one at a time, to the clients' default path
        answer = client.post("/api/v1/lineage", content=path.read_bytes(), headers=bearer(INGEST))
        assert answer.json() == {"status": "success"}, path
    batch = b"[" + b",".join(p.read_bytes() for p in OTHERS) + b"]"
    answer = client.post("/api/v1/lineage/batch", content=batch, headers=bearer(INGEST))
    assert answer.json()["summary"]["successful"] == len(OTHERS), answer.text
    for document in documents:
        assert stored(module_database, document) == 1, document["run"]["runId"]
    wait_until_folded(client, bearer(READ))

    jobs = read(client, "/jobs", namespace="grandmas.kitchen")["items"]
    assert {j["name"] for j in jobs} == {
        "gather_apples",
        "prepare_apple_filling",
        "prepare_apple_cider",
        "prepare_vinegar",
        "prepare_apple_pie",
    }
    gather = next(j for j in jobs if j["name"] == "gather_apples")
    assert len(read(client, "/runs", job_id=gather["id"])["items"]) == 2  # picked twice
    (pie,) = read(client, "/datasets", namespace="grandmas.kitchen", name="apple.pie")["items"]
    node = f"dataset:{pie['id']}"

    def upstream(**view: str) -> set[tuple[str, str]]:
        graph = read(client, "/lineage", node=node, direction="upstream", depth=10, **view)
        return {(n["namespace"], n["name"]) for n in graph["nodes"] if n["type"] == "dataset"}

    # The orchards of both pickings: every run's edges (the cumulative view) ...
    orchards = {("laurents-orchard", "red.delicious"), ("backyard", "crab.apples")}
    kitchen = {
        ("grandmas.kitchen", "apples"),
        ("grandmas.kitchen", "cinnamon"),
        ("cupboard", "sugar"),
        ("grandmas.kitchen", "apple.filling"),
    }
    assert orchards | kitchen <= upstream(view="cumulative")
    # ... and the graph now: each job's latest run, so the last picking's orchard only.
    now = upstream()
    assert kitchen <= now and len(orchards & now) == 1
    # Marquez's listener fixtures: one run that changed its datasets between two events.
    (listener,) = read(client, "/jobs", namespace="my-scheduler-namespace", q="myjob")["items"]
    assert listener["latest_run"]["state"] == "COMPLETE"


def test_the_default_path_is_the_same_ingest(client: httpx.Client, module_database: str) -> None:
    event = run_event()
    for path in ("/api/v1/lineage", "/ingest/openlineage"):  # a retry at the other path
        answer = client.post(path, json=event, headers=bearer(INGEST))
        assert answer.json() == {"status": "success"}, answer.text
    assert stored(module_database, event) == 1
    for path in ("/api/v1/lineage", "/api/v1/lineage/batch"):
        refused = client.post(path, content=b"{", headers=bearer(INGEST))
        assert refused.status_code == 400
        assert refused.headers["content-type"] == "application/problem+json"
    missing = client.post(
        "/api/v1/lineage", json=run_event(run={"facets": {}}), headers=bearer(INGEST)
    )
    assert (missing.status_code, missing.json()["pointer"]) == (422, "/run/runId")


def test_get_on_the_default_path_is_still_the_read_api(client: httpx.Client) -> None:
    answer = client.get(
        "/api/v1/lineage", params={"node": f"job:{uuid.uuid4()}"}, headers=bearer(READ)
    )
    assert answer.status_code == 404  # the read API's graph: no such job
    assert "job" in answer.json()["detail"]


def client_event(state: RunState, run_id: str, job: str) -> RunEvent:
    return RunEvent(
        eventType=state,
        eventTime="2024-05-01T10:00:00Z",
        run=Run(runId=run_id),
        job=Job(namespace="python-client", name=job),
        producer="https://example.com/metastore-tests",
    )


def logged(url: str, run_id: str) -> int:
    """How many events of the run the log holds."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM event_log WHERE run_id = %s", (run_id,)).fetchone()
    assert row is not None
    return int(row[0])


def test_the_python_client_at_its_defaults_delivers(api: Process, module_database: str) -> None:
    """openlineage-python with nothing but the URL and the API key: it posts to
    api/v1/lineage."""
    client = openlineage_client(api.base_url, INGEST)
    run_id = str(uuid.uuid4())
    client.emit(client_event(RunState.COMPLETE, run_id, "defaults"))
    assert logged(module_database, run_id) == 1
    assert "path=/api/v1/lineage status=200" in api.output()


def test_the_async_client_with_gzip_at_its_defaults_delivers(
    api: Process, module_database: str
) -> None:
    client = openlineage_client(api.base_url, INGEST, "async_http", compression="gzip")
    run_id = str(uuid.uuid4())
    for state in (RunState.START, RunState.COMPLETE):
        client.emit(client_event(state, run_id, "async-defaults"))
    transport = client.transport
    assert transport.wait_for_completion(30)
    stats = transport.get_stats()  # type: ignore[attr-defined]
    transport.close(10)
    assert (stats["failed"], stats["success"]) == (0, 2), stats
    assert logged(module_database, run_id) == 2


# (method, token, status, paths)
WRONG_WAYS: list[tuple[str, str | None, int, list[str]]] = [
    ("POST", None, 404, ["/lineage", "/api/lineage", "/v1/lineage", "/", "/openlineage"]),
    ("POST", INGEST, 404, ["/ingest/openlineage/events", "/ingest"]),
    ("POST", READ, 405, ["/api/v1/jobs", "/api/v1/lineage/runs"]),
    ("POST", READ, 404, ["/api/v1/namespaces/x/jobs/y/runs"]),
    ("GET", INGEST, 405, ["/ingest/openlineage", "/ingest/openlineage/batch"]),
]


@pytest.mark.parametrize(
    ("method", "path", "token", "status"),
    [
        (method, path, token, status)
        for method, token, status, paths in WRONG_WAYS
        for path in paths
    ],
)
def test_a_wrong_path_answers_with_the_way_in(
    client: httpx.Client, method: str, path: str, token: str | None, status: int
) -> None:
    headers = bearer(token) if token else {}
    answer = client.request(method, path, json=run_event(), headers=headers)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert WAY_IN in answer.json()["detail"] or "POST" in answer.headers.get("allow", "")
    if method == "POST":
        assert WAY_IN in answer.json()["detail"]


@pytest.mark.parametrize(
    ("method", "path", "token", "token_is_for"),
    [
        ("POST", "/api/v1/lineage", READ, "GET /api/v1/"),
        ("POST", "/ingest/openlineage", EXPORT, "GET /export/openlineage/events"),
        ("GET", "/api/v1/jobs", INGEST, "POST /ingest/openlineage or /api/v1/lineage"),
        ("GET", "/api/v1/lineage", INGEST, "POST /ingest/openlineage or /api/v1/lineage"),
        ("GET", "/export/openlineage/events", READ, "GET /api/v1/"),
    ],
)
def test_a_token_of_another_scope_is_told_where_it_belongs(
    client: httpx.Client,
    module_database: str,
    method: str,
    path: str,
    token: str,
    token_is_for: str,
) -> None:
    event = run_event()
    body = event if method == "POST" else None
    answer = client.request(method, path, json=body, headers=bearer(token))
    assert answer.status_code == 403, answer.text
    detail = answer.json()["detail"]
    assert token_is_for in detail, detail
    assert f"{method} {path} needs a token of scope" in detail, detail
    assert 'error="insufficient_scope"' in answer.headers["www-authenticate"]
    assert stored(module_database, event) == 0
