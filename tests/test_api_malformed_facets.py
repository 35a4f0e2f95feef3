"""A facet that breaks its schema is left out of the read API's answers, which always match
the OpenAPI document a client generated its types from; the log keeps it as sent.

The corpus's `facet_invalid` events and hand-made ones, through a real `metastore api` and
`metastore projector`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import pytest
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from bench.hard_cases import MALFORMED, malformed_parts
from metastore.api.openapi import build_document
from tests.conftest import Server
from tests.support import conformance_events, open_service
from tests.test_metrics import scrape, value

PRODUCER = "https://example.com/a-careless-producer"
RUN_ID = str(uuid.uuid4())
GOOD = {"_producer": PRODUCER, "_schemaURL": "https://example.com/facet.json"}
HAND_MADE = {
    "eventType": "COMPLETE",
    "eventTime": "2026-12-01T10:00:00Z",
    "producer": PRODUCER,
    "run": {
        "runId": RUN_ID,
        "facets": {
            "errorMessage": {**GOOD, "message": 42},  # not a string
            "nominalTime": {**GOOD, "nominalStartTime": "2026-12-01T09:00:00Z"},
            "custom": 5,  # not an object
        },
    },
    "job": {
        "namespace": "careless",
        "name": "job",
        "facets": {
            "ownership": {**GOOD, "owners": [{"no-name": "x"}]},
            "documentation": {**GOOD, "description": "kept"},
            "sql": {"_producer": 7, "query": "SELECT 1"},  # _producer not a string
        },
    },
    "outputs": [
        {
            "namespace": "careless",
            "name": "table",
            "facets": {
                "tags": {**GOOD, "tags": "not-a-list"},
                "documentation": {**GOOD, "description": "kept too"},
            },
        }
    ],
}


@pytest.fixture(scope="module")
def api(
    pg_server: Server, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[httpx.Client]:
    log_dir = tmp_path_factory.mktemp("facets")
    with open_service(pg_server, template_db, log_dir, "facets") as (_, client):
        for event in [*conformance_events("facet_invalid"), HAND_MADE, *malformed_parts()]:
            posted = client.post("/ingest/openlineage", json=event)
            assert posted.status_code == 200, posted.text
        client.base_url = client.base_url.join("/api/v1/")
        deadline = time.monotonic() + 60
        while (
            client.get("/status").json()["projections"][0]["lag_seconds"] > 0
            or not (client.get("/datasets", params={"namespace": "careless"}).json()["items"])
            or not client.get("/datasets", params={"name": MALFORMED[1]}).json()["items"]
        ):
            assert time.monotonic() < deadline, "not folded"
            time.sleep(0.2)
        yield client


def validator(schema_name: str) -> jsonschema.Draft202012Validator:
    components = build_document()["components"]["schemas"]
    resource = Resource.from_contents(
        {"components": {"schemas": components}}, default_specification=DRAFT202012
    )
    registry = Registry().with_resource("urn:openapi", resource)
    ref = {"$ref": f"urn:openapi#/components/schemas/{schema_name}"}
    return jsonschema.Draft202012Validator(ref, registry=registry)


def answer(api: httpx.Client, path: str, **params: Any) -> Any:
    got = api.get(path, params=params)
    assert got.status_code == 200, got.text
    return got.json()


def one_id(api: httpx.Client, path: str, **params: Any) -> str:
    (item,) = answer(api, path, **params)["items"]
    return str(item["id"])


def test_answers_match_the_document_and_leave_out_malformed_facets(api: httpx.Client) -> None:
    corpus_output = one_id(
        api, "/datasets", namespace="my-datasource-namespace", name="instance.schema.output-1"
    )
    dataset = answer(api, f"/datasets/{corpus_output}")
    validator("Dataset").validate(dataset)
    assert "ownership" not in dataset["facets"]  # owners without a name

    table = answer(api, f"/datasets/{one_id(api, '/datasets', namespace='careless')}")
    validator("Dataset").validate(table)
    assert set(table["facets"]) == {"documentation"}
    assert table["description"] == "kept too"

    job = answer(api, f"/jobs/{one_id(api, '/jobs', namespace='careless')}")
    validator("Job").validate(job)
    assert set(job["facets"]) == {"documentation"}
    corpus_job = answer(api, f"/jobs/{one_id(api, '/jobs', namespace='my-scheduler-namespace')}")
    validator("Job").validate(corpus_job)
    assert "ownership" not in corpus_job["facets"]

    run = answer(api, f"/runs/{RUN_ID}")
    validator("Run").validate(run)
    assert set(run["facets"]) == {"nominalTime"}
    corpus_run = answer(api, "/runs/41fb5137-f0fd-4ee5-ba5c-56f8571d1bd7")
    validator("Run").validate(corpus_run)
    assert "parent" not in corpus_run["facets"]


def test_the_log_keeps_the_malformed_facets_as_sent(api: httpx.Client) -> None:
    (event,) = answer(api, f"/runs/{RUN_ID}/events")["items"]
    facets = event["event"]["run"]["facets"] if "event" in event else event["run"]["facets"]
    assert facets["custom"] == 5 and facets["errorMessage"]["message"] == 42


# What tests/../bench/hard_cases.malformed_parts sent, as served: members that are not
# objects, or fields without a string name, left out; properties of the wrong type nulled.
SERVED_FIELDS = [
    {"name": "ok", "type": "string"},
    {"name": "nested", "type": "struct", "fields": [{"name": "inner"}]},
    {"name": "bad_type", "type": None, "description": None},
]
SERVED_TRANSFORMATIONS = [
    {"type": None, "description": None, "masking": None},
    {"type": "DIRECT", "subtype": "IDENTITY", "masking": False},
]


def test_schema_fields_and_transformations_that_break_their_schema_are_mended_and_counted(
    api: httpx.Client,
) -> None:
    metrics = str(api.base_url.join("/metrics"))
    before = scrape(metrics.removesuffix("/metrics"))
    parts = one_id(api, "/datasets", namespace=MALFORMED[0], name=MALFORMED[1])
    dataset = answer(api, f"/datasets/{parts}")
    validator("Dataset").validate(dataset)
    assert dataset["fields"] == SERVED_FIELDS
    assert dataset["versions"]["items"][0]["fields"] == SERVED_FIELDS
    versions = answer(api, f"/datasets/{parts}/versions")
    validator("DatasetVersionPage").validate(versions)
    assert versions["items"][0]["fields"] == SERVED_FIELDS
    for params in ({}, {"as_of": "2030-01-01T00:00:00Z"}):
        lineage = answer(api, f"/datasets/{parts}/column-lineage", **params)
        validator("ColumnLineage").validate(lineage)
        (edge,) = lineage["edges"]
        assert edge["transformations"] == SERVED_TRANSFORMATIONS
    after = scrape(metrics.removesuffix("/metrics"))

    def counted(part: str) -> float:
        name = "metastore_api_malformed_parts_total"
        return value(after, name, part=part) - value(before, name, part=part)

    # 4 + 2 nested fields left out and 2 properties nulled, in three answers' fields
    assert counted("schema.fields") == 3 * 8
    assert counted("columnLineage.transformations") == 2 * 3  # nulled, in two answers


def test_the_log_keeps_malformed_parts_as_sent(api: httpx.Client) -> None:
    (sent,) = malformed_parts()
    (event,) = answer(api, f"/runs/{sent['run']['runId']}/events")["items"]
    stored = event["outputs"][0]["facets"]
    assert stored["schema"]["fields"] == sent["outputs"][0]["facets"]["schema"]["fields"]
    lineage = stored["columnLineage"]["fields"]["ok"]["inputFields"][0]
    assert lineage["transformations"][0] == {"type": 1, "description": {"a": 1}, "masking": "yes"}
