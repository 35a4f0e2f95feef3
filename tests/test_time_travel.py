"""Time travel over real HTTP: `as_of` on lineage, jobs, datasets and column lineage, the
runs of a dataset, and run-level lineage, for Marquez-style evolving pipelines.

The pipeline (namespace `tt`, datasets in `s3://tt`), by eventTime:

    Dec 31 22:00  load_a   writes raw_a
    Jan  1 00:00  etl run1 reads raw_a, writes clean {id}            (until 01:00)
    Jan  2 00:00  report   reads clean (carries no schema)
    Jan  2 06:00  etl_static declares (JobEvent) raw_a -> clean_copy
    Jan  2 22:00  load_b   writes raw_b
    Jan  3 00:00  etl run2 reads raw_b, writes clean {id, amount}    (until 01:00)
    Jan  4 00:00  report   reads clean

so "before" (Dec 31 23:30), "between" (Jan 2 12:00) and "after" (Jan 5) the change give
three different answers.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from projections.runner import catch_up
from tests.apiserver import scenario_api

NS, DS_NS = "tt", "s3://tt"
PRODUCER = "https://github.com/stackabletech/metastore/tests"
SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent"
BEFORE, BETWEEN, AFTER = "2025-12-31T23:30:00Z", "2026-01-02T12:00:00Z", "2026-01-05T00:00:00Z"
DURING_RUN1 = "2026-01-01T00:30:00+00:00"


def run_id(label: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"metastore-tests/{label}"))


def dataset(name: str, fields: list[str] | None = None, lineage: Any = None) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    if fields is not None:
        facets["schema"] = {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json",
            "fields": [{"name": f, "type": "BIGINT"} for f in fields],
        }
    if lineage is not None:
        facets["columnLineage"] = {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json",
            "fields": {
                out: {"inputFields": [{"namespace": DS_NS, "name": src, "field": f}]}
                for out, (src, f) in lineage.items()
            },
        }
    return {"namespace": DS_NS, "name": name, "facets": facets}


def run_events(
    job: str, label: str, start: str, end: str, inputs: list[Any], outputs: list[Any]
) -> list[dict[str, Any]]:
    """START (naming the inputs) and COMPLETE (naming inputs and outputs) of one run."""

    def event(kind: str, when: str, outs: list[Any]) -> dict[str, Any]:
        return {
            "eventType": kind,
            "eventTime": when,
            "producer": PRODUCER,
            "schemaURL": SCHEMA_URL,
            "run": {"runId": run_id(label)},
            "job": {"namespace": NS, "name": job},
            "inputs": inputs,
            "outputs": outs,
        }

    return [event("START", start, []), event("COMPLETE", end, outputs)]


def job_event(job: str, when: str, inputs: list[Any], outputs: list[Any]) -> dict[str, Any]:
    return {
        "eventTime": when,
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/JobEvent",
        "job": {"namespace": NS, "name": job},
        "inputs": inputs,
        "outputs": outputs,
    }


PIPELINE = [
    *run_events(
        "load_a", "load_a", "2025-12-31T22:00:00Z", "2025-12-31T23:00:00Z",
        [], [dataset("raw_a", ["id"])],
    ),
    *run_events(
        "etl", "run1", "2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z",
        [dataset("raw_a")], [dataset("clean", ["id"], {"id": ("raw_a", "id")})],
    ),
    *run_events(
        "report", "report1", "2026-01-02T00:00:00Z", "2026-01-02T00:10:00Z",
        [dataset("clean")], [],
    ),
    job_event("etl_static", "2026-01-02T06:00:00Z", [dataset("raw_a")], [dataset("clean_copy")]),
    *run_events(
        "load_b", "load_b", "2026-01-02T22:00:00Z", "2026-01-02T23:00:00Z",
        [], [dataset("raw_b", ["id", "amount"])],
    ),
    *run_events(
        "etl", "run2", "2026-01-03T00:00:00Z", "2026-01-03T01:00:00Z",
        [dataset("raw_b")],
        [dataset("clean", ["id", "amount"], {"id": ("raw_b", "id"),
                                             "amount": ("raw_b", "amount")})],
    ),
    *run_events(
        "report", "report2", "2026-01-04T00:00:00Z", "2026-01-04T00:10:00Z",
        [dataset("clean")], [],
    ),
]  # fmt: skip


@pytest.fixture(scope="module")
def served(
    pg_server: Any, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[httpx.Client, str, str]]:
    with (
        scenario_api(pg_server, template_db, tmp_path_factory.mktemp("tt"), PIPELINE) as (
            url,
            database_url,
        ),
        httpx.Client(base_url=url, timeout=10) as client,
    ):
        yield client, url, database_url


@pytest.fixture(scope="module")
def api(served: tuple[httpx.Client, str, str]) -> httpx.Client:
    return served[0]


def get(api: httpx.Client, path: str, **params: Any) -> Any:
    response = api.get("/api/v1" + path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def dataset_id(api: httpx.Client, name: str) -> str:
    (item,) = get(api, "/datasets", namespace=DS_NS, name=name)["items"]
    return item["id"]  # type: ignore[no-any-return]


def job_id(api: httpx.Client, name: str) -> str:
    items = get(api, "/jobs", namespace=NS)["items"]
    return next(j["id"] for j in items if j["name"] == name)  # type: ignore[no-any-return]


def names(refs: list[dict[str, Any]]) -> list[str]:
    """The names of references (a dataset's writers are {job, ...}: their job's)."""
    return sorted(r["job"]["name"] if "job" in r else r["name"] for r in refs)


def field_edges(api: httpx.Client, dataset: str, **params: Any) -> set[tuple[str, str, str]]:
    """(out field, in dataset name, in field) of a dataset's field edges, one hop up."""
    found = get(api, f"/datasets/{dataset}/column-lineage", depth=1, **params)
    return {(e["to"]["field"], e["from"]["name"], e["from"]["field"]) for e in found["edges"]}


def graph(api: httpx.Client, node: str, **params: Any) -> set[str]:
    found = get(api, "/lineage", node=node, **params)
    return {n["name"] for n in found["nodes"]}


# --- jobs ---------------------------------------------------------------------------------


def test_a_job_reads_what_its_latest_run_then_read(api: httpx.Client) -> None:
    etl = job_id(api, "etl")
    between = get(api, f"/jobs/{etl}", as_of=BETWEEN)
    after = get(api, f"/jobs/{etl}", as_of=AFTER)
    now = get(api, f"/jobs/{etl}")
    assert (names(between["inputs"]), names(between["outputs"])) == (["raw_a"], ["clean"])
    assert (names(after["inputs"]), names(after["outputs"])) == (["raw_b"], ["clean"])
    # without as_of: as of now, its latest run's (issue 48)
    assert (names(now["inputs"]), names(now["outputs"])) == (["raw_b"], ["clean"])
    assert between["latest_run"]["id"] == run_id("run1")
    assert after["latest_run"]["id"] == now["latest_run"]["id"] == run_id("run2")
    assert between["last_seen"] == "2026-01-01T01:00:00Z"


def test_a_job_before_its_first_event_is_404(api: httpx.Client) -> None:
    response = api.get(f"/api/v1/jobs/{job_id(api, 'etl')}", params={"as_of": BEFORE})
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "did not exist as of" in response.json()["detail"]


def test_a_run_in_progress_then_has_no_end(api: httpx.Client) -> None:
    job = get(api, f"/jobs/{job_id(api, 'etl')}", as_of=DURING_RUN1)
    run = job["latest_run"]
    assert (run["id"], run["state"], run["ended_at"]) == (run_id("run1"), "START", None)
    assert run["started_at"] == "2026-01-01T00:00:00Z"
    # the datasets its run reported (outputs come with COMPLETE, after the moment)
    assert names(job["inputs"]) == ["raw_a"]


def test_static_lineage_counts_from_its_job_event(api: httpx.Client) -> None:
    static = job_id(api, "etl_static")
    assert api.get(f"/api/v1/jobs/{static}", params={"as_of": BETWEEN}).status_code == 200
    before = api.get(f"/api/v1/jobs/{static}", params={"as_of": "2026-01-02T05:00:00Z"})
    assert before.status_code == 404
    job = get(api, f"/jobs/{static}", as_of=AFTER)
    assert (names(job["inputs"]), names(job["outputs"])) == (["raw_a"], ["clean_copy"])
    # raw_a's consumers: etl_static (static, from Jan 2 06:00), not etl after run2
    consumers = get(api, f"/datasets/{dataset_id(api, 'raw_a')}", as_of=AFTER)["consumers"]
    assert names(consumers) == ["etl_static"]


# --- datasets -----------------------------------------------------------------------------


def test_a_schema_as_of_before_between_and_after_its_change(api: httpx.Client) -> None:
    clean = dataset_id(api, "clean")
    assert api.get(f"/api/v1/datasets/{clean}", params={"as_of": BEFORE}).status_code == 404
    between = get(api, f"/datasets/{clean}", as_of=BETWEEN)
    after = get(api, f"/datasets/{clean}", as_of=AFTER)
    now = get(api, f"/datasets/{clean}")
    assert [f["name"] for f in between["fields"]] == ["id"]
    assert [f["name"] for f in after["fields"]] == ["id", "amount"]
    assert after["fields"] == now["fields"]
    assert names(between["producers"]) == names(after["producers"]) == ["etl"]
    assert names(between["consumers"]) == names(after["consumers"]) == ["report"]
    assert between["last_seen"] == "2026-01-02T00:10:00Z"  # report1 named it last then


def test_writers_and_readers_carry_their_latest_run_as_of_then(api: httpx.Client) -> None:
    clean = dataset_id(api, "clean")
    during = get(api, f"/datasets/{dataset_id(api, 'raw_a')}", as_of=DURING_RUN1)
    (reader,) = during["consumers"]
    run = reader["job"]["latest_run"]
    assert (run["id"], run["state"], run["ended_at"]) == (run_id("run1"), "START", None)
    between = get(api, f"/datasets/{clean}", as_of=BETWEEN)
    assert between["producers"][0]["job"]["latest_run"]["id"] == run_id("run1")
    assert between["producers"][0]["job"]["latest_run"]["state"] == "COMPLETE"
    (reader,) = between["consumers"]
    assert reader["job"]["latest_run"]["id"] == run_id("report1")
    now = get(api, f"/datasets/{clean}")
    assert now["producers"][0]["job"]["latest_run"]["id"] == run_id("run2")
    assert now["consumers"][0]["job"]["latest_run"]["id"] == run_id("report2")


def test_the_runs_of_a_dataset_newest_first_with_the_schema_they_met(api: httpx.Client) -> None:
    clean = dataset_id(api, "clean")
    items = get(api, f"/datasets/{clean}/runs")["items"]
    assert [(i["id"], i["role"], i["schema_version"]) for i in items] == [
        (run_id("report2"), "input", 2),  # carried no schema: the one current at its start
        (run_id("run2"), "output", 2),
        (run_id("report1"), "input", 1),
        (run_id("run1"), "output", 1),
    ]
    assert items[1]["job"]["name"] == "etl" and items[1]["state"] == "COMPLETE"
    versions = get(api, f"/datasets/{clean}/versions")["items"]
    assert [(v["version"], len(v["fields"])) for v in versions] == [(2, 2), (1, 1)]
    # pages of one walk the same list
    first = get(api, f"/datasets/{clean}/runs", limit=3)
    rest = get(api, f"/datasets/{clean}/runs", limit=3, cursor=first["next_cursor"])
    assert first["items"] + rest["items"] == items and rest["next_cursor"] is None


# --- lineage ------------------------------------------------------------------------------


def test_the_lineage_graph_as_of_three_moments(api: httpx.Client) -> None:
    clean = f"dataset:{dataset_id(api, 'clean')}"
    raw_a = f"dataset:{dataset_id(api, 'raw_a')}"
    upstream = {"direction": "upstream", "depth": 4}
    assert graph(api, clean, as_of=BETWEEN, **upstream) == {"clean", "etl", "raw_a", "load_a"}
    assert graph(api, clean, as_of=AFTER, **upstream) == {"clean", "etl", "raw_b", "load_b"}
    assert graph(api, clean, **upstream) == graph(api, clean, as_of=AFTER, **upstream)
    # raw_a existed before etl: nothing downstream of it yet
    assert graph(api, raw_a, as_of=BEFORE, direction="downstream") == {"raw_a"}
    assert api.get("/api/v1/lineage", params={"node": clean, "as_of": BEFORE}).status_code == 404
    found = get(api, "/lineage", node=clean, as_of=AFTER, direction="upstream", depth=1)
    etl = f"job:{job_id(api, 'etl')}"
    assert {(e["from"]["key"], e["to"]["key"]) for e in found["edges"]} == {
        (etl, clean),
        (f"dataset:{dataset_id(api, 'raw_b')}", etl),
    }


def test_column_lineage_as_of(api: httpx.Client) -> None:
    clean = dataset_id(api, "clean")

    between = field_edges(api, clean, as_of=BETWEEN)
    after = field_edges(api, clean, as_of=AFTER)
    assert between == {("id", "raw_a", "id")}
    assert after == {("id", "raw_b", "id"), ("amount", "raw_b", "amount")}
    assert field_edges(api, clean) == after  # now: as of now


def test_run_lineage_finds_the_run_that_wrote_what_a_run_read(api: httpx.Client) -> None:
    found = get(api, "/lineage/runs", run_id=run_id("report2"), direction="upstream", depth=5)
    assert {(n["id"], n["depth"]) for n in found["nodes"]} == {
        (run_id("report2"), 0),
        (run_id("run2"), 1),
        (run_id("load_b"), 2),
    }
    assert {(e["from"]["id"], e["to"]["id"], e["dataset"]["name"]) for e in found["edges"]} == {
        (run_id("run2"), run_id("report2"), "clean"),
        (run_id("load_b"), run_id("run2"), "raw_b"),
    }
    older = get(api, "/lineage/runs", run_id=run_id("report1"), depth=5)
    assert {n["id"] for n in older["nodes"]} == {
        run_id("report1"), run_id("run1"), run_id("load_a"),
    }  # fmt: skip
    # downstream: load_a's write fed run1, and run1's write fed report1 (not report2)
    down = get(api, "/lineage/runs", run_id=run_id("load_a"), direction="downstream", depth=5)
    assert {n["id"] for n in down["nodes"]} == {
        run_id("load_a"), run_id("run1"), run_id("report1"),
    }  # fmt: skip
    one = get(api, "/lineage/runs", run_id=run_id("report2"), depth=1)
    assert {n["id"] for n in one["nodes"]} == {run_id("report2"), run_id("run2")}


def test_a_late_old_event_changes_only_the_past(served: tuple[httpx.Client, str, str]) -> None:
    api, _, database_url = served
    late = [
        *run_events(
            "late_etl", "late10", "2026-02-10T00:00:00Z", "2026-02-10T01:00:00Z",
            [dataset("src_x")], [dataset("late_out")],
        ),
        *run_events(
            "late_etl", "late12", "2026-02-12T00:00:00Z", "2026-02-12T01:00:00Z",
            [dataset("src_y")], [dataset("late_out")],
        ),
    ]  # fmt: skip
    for event in late:
        assert api.post("/ingest/openlineage", json=event).status_code in (200, 201)
    catch_up(database_url)
    job = job_id(api, "late_etl")

    def inputs(as_of: str | None) -> Any:
        params = {"as_of": as_of} if as_of else {}
        response = api.get(f"/api/v1/jobs/{job}", params=params)
        return names(response.json()["inputs"]) if response.status_code == 200 else 404

    moments = ["2026-02-09T00:00:00Z", "2026-02-11T00:00:00Z", "2026-02-13T00:00:00Z", None]
    assert [inputs(m) for m in moments] == [404, ["src_x"], ["src_y"], ["src_y"]]

    # a run from Feb 8 arrives late, through ingest like any other event
    for event in run_events(
        "late_etl", "late08", "2026-02-08T00:00:00Z", "2026-02-08T01:00:00Z",
        [dataset("src_w")], [dataset("late_out")],
    ):  # fmt: skip
        assert api.post("/ingest/openlineage", json=event).status_code in (200, 201)
    catch_up(database_url)
    assert [inputs(m) for m in moments] == [["src_w"], ["src_x"], ["src_y"], ["src_y"]]
    assert get(api, f"/jobs/{job}")["latest_run"]["id"] == run_id("late12")
    with psycopg.connect(database_url) as conn:
        (count,) = conn.execute(
            "SELECT count(*) FROM event_log WHERE job_name = 'late_etl'"
        ).fetchone() or (0,)
    assert count == 6  # the log only grew


@pytest.mark.parametrize(
    "path",
    [
        "/lineage?node=job:{job}",
        "/jobs/{job}",
        "/datasets/{dataset}",
        "/datasets/{dataset}/column-lineage",
    ],
)
@pytest.mark.parametrize(
    "value", ["yesterday", "1767225600", "2026-01-02T12:00:00", "2026-13-02T12:00:00Z"]
)
def test_a_bad_as_of_is_400_naming_it(api: httpx.Client, path: str, value: str) -> None:
    url = path.format(job=job_id(api, "etl"), dataset=dataset_id(api, "clean"))
    sep = "&" if "?" in url else "?"
    response = api.get(f"/api/v1{url}{sep}as_of={value}")
    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert [p["name"] for p in problem["invalid-params"]] == ["as_of"]
    assert "as_of" in problem["detail"]


def test_run_lineage_of_an_unknown_run_is_404_and_a_bad_one_400(api: httpx.Client) -> None:
    unknown = api.get("/api/v1/lineage/runs", params={"run_id": str(uuid.uuid4())})
    assert unknown.status_code == 404
    bad = api.get("/api/v1/lineage/runs", params={"run_id": "nope"})
    assert bad.status_code == 400
    assert [p["name"] for p in bad.json()["invalid-params"]] == ["run_id"]


def test_the_openapi_document_shows_as_of_with_an_example(api: httpx.Client) -> None:
    document = get(api, "/openapi.json")
    for path in (
        "/api/v1/lineage",
        "/api/v1/jobs/{job_id}",
        "/api/v1/datasets/{dataset_id}",
        "/api/v1/datasets/{dataset_id}/column-lineage",
    ):
        (as_of,) = [p for p in document["paths"][path]["get"]["parameters"] if p["name"] == "as_of"]
        assert as_of["schema"]["format"] == "date-time"
        assert as_of["example"].endswith("Z")
    assert "/api/v1/lineage/runs" in document["paths"]
    assert "/api/v1/datasets/{dataset_id}/runs" in document["paths"]


def test_a_runs_column_lineage_as_of_is_its_latest_report(
    served: tuple[httpx.Client, str, str],
) -> None:
    """A run that revised its columnLineage facet: as of a moment after it, the field
    edges are those of its latest report (by eventTime, whatever the arrival order), the
    way a later facet replaces an earlier one; and now, as of now."""
    api, _, database_url = served
    first = {"id": ("raw_a", "id"), "note": ("raw_a", "id")}
    revised = {"id": ("raw_b", "id")}
    start, complete = run_events(
        "revising", "revising1", "2026-03-01T00:00:00Z", "2026-03-01T02:00:00Z",
        [dataset("raw_a"), dataset("raw_b")], [dataset("revised", None, revised)],
    )  # fmt: skip
    running = {
        **complete,
        "eventType": "RUNNING",
        "eventTime": "2026-03-01T01:00:00Z",
        "outputs": [dataset("revised", None, first)],
    }
    for event in (complete, start, running):  # the latest report arrives first
        assert api.post("/ingest/openlineage", json=event).status_code == 200
    catch_up(database_url)
    revised_id = dataset_id(api, "revised")

    latest = {("id", "raw_b", "id")}
    assert field_edges(api, revised_id, as_of="2026-03-02T00:00:00Z") == latest
    assert field_edges(api, revised_id, as_of="2026-03-01T01:30:00Z") == latest  # mid-run too
    assert field_edges(api, revised_id) == latest


def test_static_column_lineage_counts_from_its_job_event(
    served: tuple[httpx.Client, str, str],
) -> None:
    api, _, database_url = served
    events = [
        *run_events(
            "feeds_shared", "feeds_shared1", "2026-03-20T00:00:00Z", "2026-03-20T01:00:00Z",
            [], [dataset("shared_out", ["id"])],
        ),
        job_event(
            "declares_shared", "2026-04-01T00:00:00Z",
            [dataset("raw_a")], [dataset("shared_out", None, {"id": ("raw_a", "id")})],
        ),
    ]  # fmt: skip
    for event in events:
        assert api.post("/ingest/openlineage", json=event).status_code == 200
    catch_up(database_url)
    shared = dataset_id(api, "shared_out")

    assert field_edges(api, shared, as_of="2026-03-25T00:00:00Z") == set()
    assert (
        field_edges(api, shared, as_of="2026-04-02T00:00:00Z")
        == {("id", "raw_a", "id")}
        == field_edges(api, shared)
    )


def test_the_diff_between_two_moments(api: httpx.Client) -> None:
    """Between Jan 2 and Jan 5 etl's run2 replaced run1: clean's graph trades raw_a and
    load_a for raw_b and load_b, and its schema gained `amount`, in one call."""
    clean = dataset_id(api, "clean")
    diff = get(
        api, "/lineage/diff", node=f"dataset:{clean}", direction="upstream", depth=4,
        **{"from": BETWEEN, "to": AFTER},
    )  # fmt: skip
    assert sorted(n["name"] for n in diff["nodes_added"]) == ["load_b", "raw_b"]
    assert sorted(n["name"] for n in diff["nodes_removed"]) == ["load_a", "raw_a"]
    assert (len(diff["edges_added"]), len(diff["edges_removed"])) == (2, 2)
    (change,) = diff["schema_changes"]
    assert change["dataset"] == {"id": clean, "namespace": DS_NS, "name": "clean"}
    assert (change["from_version"], change["to_version"]) == (1, 2)
    assert change["added"] == [{"name": "amount", "type": "BIGINT"}]
    assert change["removed"] == change["type_changed"] == []
    # the other way round, and a moment with itself
    back = get(api, "/lineage/diff", node=f"dataset:{clean}", **{"from": AFTER, "to": BETWEEN})
    assert back["schema_changes"][0]["removed"] == [{"name": "amount", "type": "BIGINT"}]
    same = get(api, "/lineage/diff", node=f"dataset:{clean}", **{"from": AFTER, "to": AFTER})
    assert same["nodes_added"] == same["nodes_removed"] == same["schema_changes"] == []
    # before clean existed: everything is new; after `to` too: 404 not-yet
    born = get(api, "/lineage/diff", node=f"dataset:{clean}", **{"from": BEFORE, "to": BETWEEN})
    assert "clean" in {n["name"] for n in born["nodes_added"]} and born["nodes_removed"] == []
    late = api.get(
        "/api/v1/lineage/diff", params={"node": f"dataset:{clean}", "from": BEFORE, "to": BEFORE}
    )
    assert late.status_code == 404 and late.json()["type"].endswith("/not-yet")


def test_a_schema_change_lists_nested_fields_and_type_changes() -> None:
    from metastore.api.lineage_diff import schema_change

    def fields(*pairs: Any) -> str:
        return json.dumps(
            [{"name": n, "type": t, **({"fields": f} if f else {})} for n, t, f in pairs]
        )

    before = fields(("id", "int", None), ("address", "struct", [{"name": "zip", "type": "int"}]))
    after = fields(
        ("id", "bigint", None),
        ("address", "struct", [{"name": "zip", "type": "string"}, {"name": "city"}]),
        ("note", None, None),
    )
    ident = str(uuid.uuid4())
    change = schema_change((ident, "ns", "t", 1, before, 3, after))
    assert [(f.name, f.type) for f in change.added] == [("address.city", None), ("note", None)]
    assert change.removed == []
    assert [(t.name, t.from_type, t.to_type, t.breaking) for t in change.type_changed] == [
        ("id", "int", "bigint", False),  # (widened)
        ("address.zip", "int", "string", True),
    ]
    assert [(b.field, b.change) for b in change.breaking] == [("address.zip", "type_changed")]


def test_names_as_of_a_moment(served: tuple[httpx.Client, str, str]) -> None:
    """A name first seen after the moment is not shown, counted or used as the display name
    as of that moment; now, the TABLE symlink is the display name."""
    api, _, database_url = served
    hive = {
        "symlinks": {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json",
            "identifiers": [
                {"namespace": "hive://hms:9083", "name": "db.aliased", "type": "TABLE"}
            ],
        }
    }
    events = [
        *run_events(
            "alias_w", "alias1", "2026-05-01T00:00:00Z", "2026-05-01T01:00:00Z",
            [], [dataset("aliased")],
        ),
        *run_events(
            "alias_r", "alias_read", "2026-05-03T00:00:00Z", "2026-05-03T01:00:00Z",
            [dataset("aliased")], [],
        ),
        *run_events(
            "alias_w", "alias2", "2026-05-10T00:00:00Z", "2026-05-10T01:00:00Z",
            [], [{**dataset("aliased"), "facets": hive}],
        ),
    ]  # fmt: skip
    for event in events:
        assert api.post("/ingest/openlineage", json=event).status_code == 200
    catch_up(database_url)
    aliased = dataset_id(api, "aliased")
    then, later = "2026-05-05T00:00:00Z", "2026-05-11T00:00:00Z"
    page = get(api, f"/datasets/{aliased}", as_of=then)
    assert (page["namespace"], page["name"]) == (DS_NS, "aliased")
    assert ([n["name"] for n in page["names"]], page["name_count"]) == (["aliased"], 1)
    column = get(api, f"/datasets/{aliased}/column-lineage", as_of=then)["dataset"]
    assert column["name"] == "aliased"
    (node,) = get(api, "/lineage", node=f"dataset:{aliased}", depth=0, as_of=then)["nodes"]
    assert (node["name"], node["name_count"]) == ("aliased", 1)
    outputs = get(api, f"/jobs/{job_id(api, 'alias_w')}", as_of=then)["outputs"]
    assert [o["name"] for o in outputs] == ["aliased"]
    # an edge the diff adds names the dataset as it was then, as the graph then does
    diff = get(
        api, "/lineage/diff", node=f"dataset:{aliased}", depth=1,
        **{"from": "2026-05-02T00:00:00Z", "to": then},
    )  # fmt: skip
    assert [(e["from"]["name"], e["to"]["name"]) for e in diff["edges_added"]] == [
        ("aliased", "alias_r")
    ]
    for moment in (later, None):
        params = {"as_of": moment} if moment else {}
        page = get(api, f"/datasets/{aliased}", **params)
        assert (page["namespace"], page["name"], len(page["names"]), page["name_count"]) == (
            "hive://hms:9083",
            "db.aliased",
            2,
            2,
        )
        column = get(api, f"/datasets/{aliased}/column-lineage", **params)["dataset"]
        assert column["name"] == "db.aliased"
        (node,) = get(api, "/lineage", node=f"dataset:{aliased}", depth=0, **params)["nodes"]
        assert (node["name"], node["name_count"]) == ("db.aliased", 2)
