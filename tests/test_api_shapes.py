"""One shape for one thing, over HTTP against the conformance scenarios: a run node in
run lineage carries the same times as a run elsewhere, a stored event is typed, roles
have one vocabulary, and so on (issue 48, item 5)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import pytest
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tests.apiserver import get, scenario_client

COMPOSE_RUN = "01936898-5bd1-7511-9abf-a140907e6cb3"  # Airflow gcs_hook.compose_task: 5 runs


@pytest.fixture(scope="module")
def api(
    pg_server: Any, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[httpx.Client]:
    with scenario_client(pg_server, template_db, tmp_path_factory.mktemp("shapes")) as client:
        yield client


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def served_validator(api: httpx.Client, schema: dict[str, Any]) -> jsonschema.Validator:
    """A validator of `schema` that resolves references into the served OpenAPI document."""
    document = get(api, "/openapi.json")
    resource = Resource.from_contents(document, default_specification=DRAFT202012)
    registry = Registry().with_resource("urn:openapi", resource)
    return jsonschema.Draft202012Validator(schema, registry=registry)


def test_a_runs_events_are_typed_stored_events(api: httpx.Client) -> None:
    """The served document types a run's events (their envelope), and the events a run
    answers with (as the producers sent them) are of that type."""
    document = get(api, "/openapi.json")
    page = document["components"]["schemas"]["RunEventPage"]["properties"]["items"]
    assert page["items"] == {"$ref": "#/components/schemas/StoredEvent"}
    stored = document["components"]["schemas"]["StoredEvent"]
    assert {"eventTime", "producer", "run", "job"} <= set(stored["required"])
    validate = served_validator(api, {"$ref": "urn:openapi#/components/schemas/StoredEvent"})
    events = get(api, f"/runs/{COMPOSE_RUN}/events")["items"]
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    for event in events:
        validate.validate(event)
        assert event["run"]["runId"] == COMPOSE_RUN
    with pytest.raises(jsonschema.ValidationError):
        validate.validate({**events[0], "run": {"facets": {}}})


def test_a_run_node_has_the_times_of_the_run(api: httpx.Client) -> None:
    """A run in run lineage carries its state time and duration, the same as /runs/{id}."""
    graph = get(api, "/lineage/runs", run_id=COMPOSE_RUN, direction="both", depth=3)
    assert len(graph["nodes"]) > 1, graph["nodes"]
    for node in graph["nodes"]:
        run = get(api, f"/runs/{node['id']}")
        shared = ("state", "state_time", "started_at", "ended_at", "duration_seconds")
        assert {k: node[k] for k in shared} == {k: run[k] for k in shared}
    assert any(node["duration_seconds"] is not None for node in graph["nodes"])


def test_a_role_is_input_or_output_in_the_filter_as_in_the_items(api: httpx.Client) -> None:
    """The runs of a dataset filter by the words their items' `role` says."""
    graph = get(api, "/lineage/runs", run_id=COMPOSE_RUN, direction="both", depth=3)
    read_and_written = {
        e["dataset"]["id"] for e in graph["dataset_edges"] if e["role"] == "input"
    } & {e["dataset"]["id"] for e in graph["dataset_edges"] if e["role"] == "output"}
    dataset = sorted(read_and_written)[0]
    everything = get(api, f"/datasets/{dataset}/runs", limit=500)["items"]
    by_role = {
        role: get(api, f"/datasets/{dataset}/runs", role=role, limit=500)["items"]
        for role in ("input", "output")
    }
    for role, items in by_role.items():
        assert items and {r["role"] for r in items} == {role}
    assert sorted((r["id"], r["role"]) for r in everything) == sorted(
        (r["id"], r["role"]) for items in by_role.values() for r in items
    )
    first = get(api, f"/datasets/{dataset}/runs", sort="outputs_first", limit=500)["items"]
    assert [r["role"] for r in first] == sorted((r["role"] for r in first), reverse=True)
    refused = api.get(f"/datasets/{dataset}/runs", params={"role": "writer"})
    assert refused.status_code == 400
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert "role" in refused.json()["detail"]


T1 = ("hdfs://dataproc-producer-test-m", "/user/hive/warehouse/t1")  # dropped, created again


def test_lifecycle_is_one_object_on_a_dataset_its_list_item_and_its_graph_node(
    api: httpx.Client,
) -> None:
    (item,) = get(api, "/datasets", namespace=T1[0], name=T1[1])["items"]
    page = get(api, f"/datasets/{item['id']}")
    assert page["lifecycle"]["state"] == "CREATE"
    key = f"dataset:{item['id']}"
    node = next(n for n in get(api, "/lineage", node=key, depth=1)["nodes"] if n["key"] == key)
    assert item["lifecycle"] == node["lifecycle"] == page["lifecycle"]
    dropped = next(r for r in page["runs"]["items"] if r["lifecycle_state"] == "DROP")
    then = get(api, f"/datasets/{item['id']}", as_of=dropped["ended_at"])
    graph = get(api, "/lineage", node=key, depth=1, as_of=dropped["ended_at"])
    node_then = next(n for n in graph["nodes"] if n["key"] == key)
    assert node_then["lifecycle"] == then["lifecycle"]
    assert then["lifecycle"]["state"] == "DROP"


def test_producers_and_consumers_are_one_shape(api: httpx.Client) -> None:
    """A dataset's writers and readers are each {job (with its latest run), its time}."""
    graph = get(api, "/lineage/runs", run_id=COMPOSE_RUN, direction="both", depth=3)
    roles = {(e["dataset"]["id"], e["role"]) for e in graph["dataset_edges"]}
    dataset = sorted(d for d, role in roles if role == "input" and (d, "output") in roles)[0]
    page = get(api, f"/datasets/{dataset}")
    assert page["producers"] and page["consumers"]
    job_keys = {"id", "namespace", "name", "latest_run"}
    for writer in page["producers"]:
        assert set(writer["job"]) == job_keys and writer["last_write_at"] is not None
    reads = get(api, f"/datasets/{dataset}/runs", role="input", limit=500)["items"]
    for reader in page["consumers"]:
        assert set(reader["job"]) == job_keys and set(reader) == {"job", "last_read_at"}
        job = reader["job"]["id"]
        runs = [get(api, f"/runs/{r['id']}") for r in reads if r["job"]["id"] == job]
        read_at = at(reader["last_read_at"])
        assert max(at(r["started_at"]) for r in runs) <= read_at
        assert read_at <= max(at(r["last_seen"]) for r in runs)


TBL1 = ("file", "/tmp/cll_test/tbl1")  # displayed as its table, default.tbl1


def test_a_column_names_its_dataset_as_the_answer_does(api: httpx.Client) -> None:
    """One table, one name in a column lineage answer: its display name, and the name the
    facet used beside it as `reported_as`."""
    (item,) = get(api, "/datasets", namespace=TBL1[0], name=TBL1[1])["items"]
    assert (item["namespace"], item["name"]) != TBL1
    lineage = get(api, f"/datasets/{item['id']}/column-lineage")
    assert (lineage["dataset"]["namespace"], lineage["dataset"]["name"]) == (
        item["namespace"],
        item["name"],
    )
    columns = [c for e in lineage["edges"] for c in (e["from"], e["to"])]
    assert columns
    for column in columns:
        shown = column["dataset"] or column["reported_as"]
        assert (column["namespace"], column["name"]) == (shown["namespace"], shown["name"])
    ours = [c for c in columns if c["dataset"] and c["dataset"]["id"] == item["id"]]
    assert {(c["namespace"], c["name"]) for c in ours} == {(item["namespace"], item["name"])}
    assert TBL1 in {(c["reported_as"]["namespace"], c["reported_as"]["name"]) for c in ours}
