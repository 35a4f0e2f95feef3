"""A schema version no run carried (a DatasetEvent's, or a run's input's) reads as `run: null`.

Found by the real Airflow emitter: its SQL task's input tables carry their schema, and the
dataset page answered 500. Against a real `metastore api` and `metastore projector`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import Server
from tests.support import open_service

PRODUCER = "https://example.com/a-hand-written-producer"
NAMESPACE = "postgres://db:5432"


def schema(*fields: str) -> dict[str, Any]:
    return {
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json",
        "fields": [{"name": f, "type": "text"} for f in fields],
    }


@pytest.fixture(scope="module")
def api(
    pg_server: Server, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[httpx.Client]:
    with open_service(pg_server, template_db, tmp_path_factory.mktemp("versions"), "versions") as (
        _,
        client,
    ):
        yield client


def dataset_page(api: httpx.Client, name: str) -> dict[str, Any]:
    """The dataset page of `name` once folded (the projector runs beside the API)."""
    deadline = time.monotonic() + 60
    while True:
        found = api.get("/api/v1/datasets", params={"namespace": NAMESPACE, "name": name})
        assert found.status_code == 200, found.text
        if found.json()["items"]:
            break
        assert time.monotonic() < deadline, f"{name} was never folded"
        time.sleep(0.2)
    page = api.get(f"/api/v1/datasets/{found.json()['items'][0]['id']}")
    assert page.status_code == 200, page.text
    return page.json()  # type: ignore[no-any-return]


def test_schema_versions_no_run_carried_read_as_run_null(api: httpx.Client) -> None:
    dataset_event = {
        "eventTime": "2026-12-01T10:00:00Z",
        "producer": PRODUCER,
        "dataset": {
            "namespace": NAMESPACE,
            "name": "shop.public.a",
            "facets": {"schema": schema("id")},
        },
    }
    run_id = str(uuid.uuid4())
    run_event = {
        "eventType": "COMPLETE",
        "eventTime": "2026-12-01T11:00:00Z",
        "producer": PRODUCER,
        "run": {"runId": run_id},
        "job": {"namespace": "shop", "name": "copy_a_to_b"},
        "inputs": [
            {"namespace": NAMESPACE, "name": "shop.public.c", "facets": {"schema": schema("x")}}
        ],
        "outputs": [
            {"namespace": NAMESPACE, "name": "shop.public.b", "facets": {"schema": schema("id")}}
        ],
    }
    for event in (dataset_event, run_event):
        assert api.post("/ingest/openlineage", json=event).status_code == 200

    a = dataset_page(api, "shop.public.a")
    assert [v["run"] for v in a["versions"]["items"]] == [None]
    c = dataset_page(api, "shop.public.c")
    assert c["versions"]["items"] == [], "an input's schema is a reader's view, no version"
    (seen,) = c["reader_schemas"]
    assert (seen["run"]["id"], seen["version"]) == (run_id, None)
    b = dataset_page(api, "shop.public.b")
    (version,) = b["versions"]["items"]
    assert version["run"]["id"] == run_id
    assert version["run"]["job"]["name"] == "copy_a_to_b"
    versions = api.get(f"/api/v1/datasets/{a['id']}/versions")
    assert versions.status_code == 200 and versions.json()["items"][0]["run"] is None
