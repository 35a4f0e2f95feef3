"""Cockpit's screens over the conformance scenarios, through a client that counts its calls.

Each screen must take at most two calls: the namespaces with their job and dataset counts,
a namespace's recent failures, a lineage graph with jobs coloured by the state of their
latest run that ends on datasets and marks what lies beyond, a dataset page (names,
schema, history, readers and writers with their latest runs, column lineage), now and as
of a past moment, and a job page (its parent and children with their latest runs, its
runs with their total). The rest checks the shapes those screens rely on: one rule for
`started_at`, one for `root`, embedded references, the display name, integration from the
producer URL, lifecycle changes, the standard facets surfaced, sorts and cursors bound to
their filters.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.apiserver import scenario_api
from tests.support import all_scenario_events, conformance_events

SPARK = ("s3a://warehouse", "sales.db/orders_daily")
HIVE = ("hive://hive-metastore:9083", "sales.orders_daily")
RAW_ORDERS = ("s3a://warehouse", "raw.db/orders")
ORDERS_ETL = ("prod-lineage", "orders_etl.execute_replace_table_as_select_command")
TRINO_QUERY = ("prod-lineage", "20260902_101500_00042_ab3kd")
ETL_RUN = "0191a3f2-7c1e-7a41-9b3e-3c6f0e1d01b8"
TBL1 = ("file", "/tmp/cll_test/tbl1")
T1 = ("hdfs://dataproc-producer-test-m", "/user/hive/warehouse/t1")
DROP_JOB = ("default", "cl_i_test_application.drop_table")
BQ_RUN = "01936893-9751-7a91-a2a0-a51101a3970c"
BQ_COPY_RUN = "01936893-9751-7b10-a4a7-cd7454722d0f"
NO_START_RUN = "0191a400-0000-7000-8000-000000000001"
FAILED_RUN = "0191a400-0000-7000-8000-000000000002"
CATALOGUED = ("s3a://warehouse", "sales.db/cockpit_catalogued")
ABORTED_RUN = "0191a400-0000-7000-8000-000000000003"
OTHER_FAILED_RUN = "0191a400-0000-7000-8000-000000000004"
BUSY_READS = 11  # more reader runs than the dataset page embeds (10)


def _facet(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "_producer": "https://github.com/OpenLineage/OpenLineage/tree/1.38.0/integration/spark",
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/Facet.json",
        **body,
    }


def extra_events() -> list[dict[str, Any]]:
    """Real Spark events of the brief's example, edited: a run whose START never arrives
    (its output carries the catalogue facets), and a run that failed long ago."""
    start, complete = conformance_events("scenarios/seed_spark_trino")[:2]
    running = copy.deepcopy(complete)
    running["eventType"] = "RUNNING"
    running["eventTime"] = "2026-09-03T08:00:05Z"
    running["run"]["runId"] = NO_START_RUN
    running["job"]["name"] = "cockpit.no_start"
    running["inputs"] = [{"namespace": "s3a://warehouse", "name": "raw.db/cockpit_input"}]
    output = running["outputs"][0]
    output["name"] = CATALOGUED[1]
    output["facets"] = {
        "documentation": _facet({"description": "Daily orders, one row a customer and day."}),
        "ownership": _facet({"owners": [{"name": "team:sales-analytics", "type": "MAINTAINER"}]}),
        "tags": _facet({"tags": [{"key": "pii", "value": "false", "source": "SPARK"}]}),
        "datasetType": _facet({"datasetType": "TABLE"}),
    }
    running["job"]["facets"] = {"documentation": _facet({"description": "Builds the table."})}
    done = copy.deepcopy(running)
    done["eventType"] = "COMPLETE"
    done["eventTime"] = "2026-09-03T08:01:00Z"
    failed_start = copy.deepcopy(start)
    failed_start["eventTime"] = "2020-01-01T00:00:00Z"
    failed_start["run"]["runId"] = FAILED_RUN
    failed_start["job"]["name"] = "cockpit.failing"
    failed_start["inputs"] = running["inputs"]
    failed_start["outputs"] = [{"namespace": "s3a://warehouse", "name": "sales.db/cockpit_failed"}]
    failed = copy.deepcopy(failed_start)
    failed["eventType"] = "FAIL"
    failed["eventTime"] = "2020-01-01T00:01:00Z"
    # An aborted run in the same namespace, and a failed one in another.
    aborted = copy.deepcopy(failed)
    aborted.update(eventType="ABORT", eventTime="2019-06-01T00:00:00Z")
    aborted["run"]["runId"] = ABORTED_RUN
    aborted["job"]["name"] = "cockpit.aborted"
    elsewhere = copy.deepcopy(failed)
    elsewhere.update(eventTime="2019-01-01T00:00:00Z")
    elsewhere["run"]["runId"] = OTHER_FAILED_RUN
    elsewhere["job"]["namespace"] = "cockpit-other"
    # A busy reader of the catalogued table: more runs than the dataset page embeds.
    reads = []
    for n in range(BUSY_READS):
        read = copy.deepcopy(done)
        read["eventTime"] = f"2026-09-04T08:{n:02d}:00Z"
        read["run"]["runId"] = f"0191a400-0000-7000-8000-0000000001{n:02d}"
        read["job"] = {"namespace": "prod-lineage", "name": "cockpit.busy_reader"}
        read["inputs"] = [{"namespace": CATALOGUED[0], "name": CATALOGUED[1]}]
        read["outputs"] = []
        reads.append(read)
    return [running, done, failed_start, failed, aborted, elsewhere, *reads]


class Counting(httpx.Client):
    """An HTTP client that counts the requests a screen makes."""

    calls = 0

    def get_json(self, path: str, **params: Any) -> Any:
        self.calls += 1
        response = self.get(path, params=params)
        assert response.status_code == 200, response.text
        return response.json()


@pytest.fixture(scope="module")
def base(
    pg_server: Any, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    events = all_scenario_events() + extra_events()
    with scenario_api(pg_server, template_db, tmp_path_factory.mktemp("screens"), events) as (
        url,
        _,
    ):
        yield url + "/api/v1"


@pytest.fixture
def api(base: str) -> Iterator[Counting]:
    with Counting(base_url=base, timeout=30) as client:
        yield client


@pytest.fixture
def helper(base: str) -> Iterator[Counting]:
    """Look-ups a test needs that are not part of the screen it counts."""
    with Counting(base_url=base, timeout=30) as client:
        yield client


def lookup(client: Counting, name: tuple[str, str]) -> dict[str, Any]:
    items = client.get_json("/datasets", namespace=name[0], name=name[1])["items"]
    assert len(items) == 1, (name, items)
    return items[0]  # type: ignore[no-any-return]


def job(client: Counting, name: tuple[str, str]) -> dict[str, Any]:
    items = client.get_json("/jobs", namespace=name[0], q=name[1], limit=500)["items"]
    return next(j for j in items if j["name"] == name[1])  # type: ignore[no-any-return]


def every(client: Counting, path: str, page_size: int = 500, **params: Any) -> list[dict[str, Any]]:
    """Every item of a list, page by page."""
    items, cursor = [], None
    while True:
        page = client.get_json(
            path, limit=page_size, **params, **({"cursor": cursor} if cursor else {})
        )
        items += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return items


# --- the three screens ----------------------------------------------------------------


def test_namespaces_screen_is_one_call_with_counts(api: Counting, helper: Counting) -> None:
    page = api.get_json("/namespaces", limit=500)
    assert api.calls == 1
    assert page["next_cursor"] is None and page["total"] == len(page["items"])
    for ns in page["items"]:
        jobs = every(helper, "/jobs", namespace=ns["name"])
        datasets = every(helper, "/datasets", namespace=ns["name"])
        assert (ns["job_count"], ns["dataset_count"]) == (len(jobs), len(datasets)), ns
        assert ns["has_jobs"] == (ns["job_count"] > 0)
    counts = {n["name"]: (n["job_count"], n["dataset_count"]) for n in page["items"]}
    assert counts["airflow"][0] == 16 and counts["prod-lineage"][0] == 6
    # A dataset counts in every namespace it has a name in: Spark's orders_daily in Hive's
    # (its TABLE symlink) and in s3a://warehouse (the name Spark used).
    assert counts[HIVE[0]] == (0, 1)
    spark = lookup(helper, SPARK)["id"]
    assert spark in {d["id"] for d in every(helper, "/datasets", namespace=SPARK[0])}
    # so the counts add up to the datasets' names in namespaces seen, not to the datasets
    names = sum(
        len({(n["namespace"], d["id"]) for n in helper.get_json(f"/datasets/{d['id']}")["names"]})
        for d in every(helper, "/datasets")
    )
    assert sum(n["dataset_count"] for n in page["items"]) <= names


def test_namespace_overview_with_recent_failures_is_one_call(
    api: Counting, helper: Counting
) -> None:
    failures = api.get_json("/runs", namespace="prod-lineage", state="FAIL,ABORT", sort="started")
    assert api.calls == 1
    assert [(r["id"], r["state"]) for r in failures["items"]] == [
        (FAILED_RUN, "FAIL"),
        (ABORTED_RUN, "ABORT"),
    ]
    assert (failures["total"], failures["total_is_exact"]) == (2, True)
    # the same runs a client would have filtered from every run
    expected = [
        r["id"]
        for r in every(helper, "/runs", sort="started")
        if r["job"]["namespace"] == "prod-lineage" and r["state"] in ("FAIL", "ABORT")
    ]
    assert [r["id"] for r in failures["items"]] == expected
    assert OTHER_FAILED_RUN not in expected
    # The same parameter twice is refused, naming the list form.
    twice = helper.get("/runs", params=[("state", "FAIL"), ("state", "ABORT")])
    assert twice.status_code == 400 and "state=A,B" in twice.json()["detail"]


def test_lineage_graph_with_coloured_jobs_is_one_call(api: Counting, helper: Counting) -> None:
    raw = lookup(helper, RAW_ORDERS)
    graph = api.get_json("/lineage", node=f"dataset:{raw['id']}", depth=3)
    assert api.calls == 1
    jobs = {(n["namespace"], n["name"]): n for n in graph["nodes"] if n["type"] == "job"}
    datasets = {(n["namespace"], n["name"]): n for n in graph["nodes"] if n["type"] == "dataset"}
    etl = jobs[ORDERS_ETL]
    assert etl["integration"] == "SPARK"  # from the producer URL: the events have no jobType
    run = etl["latest_run"]
    assert run["id"] == ETL_RUN and run["state"] == "COMPLETE"
    assert (run["started_at"], run["ended_at"]) == (
        "2026-09-02T10:00:00Z",
        "2026-09-02T10:04:12.345000Z",
    )
    assert run["duration_seconds"] == pytest.approx(252.345)
    # The written dataset under its display name (Hive's TABLE name), with its two names.
    daily = datasets[HIVE]
    assert daily["name_count"] == 2 and daily["last_write_at"] == "2026-09-02T10:04:12.345000Z"
    assert datasets[RAW_ORDERS]["last_write_at"] is None  # read, never written
    assert {(e["from"]["key"], e["to"]["key"]) for e in graph["edges"]} == {
        (f"dataset:{raw['id']}", etl["key"]),
        (etl["key"], daily["key"]),
    }
    # As of a moment mid-run, the same call colours the job by the state it had then.
    then = api.get_json("/lineage", node=f"dataset:{raw['id']}", as_of="2026-09-02T10:01:00Z")
    assert api.calls == 2
    (etl_then,) = [n for n in then["nodes"] if n["type"] == "job"]
    assert etl_then["latest_run"]["state"] == "START"
    assert etl_then["latest_run"]["ended_at"] is None
    assert etl_then["latest_run"]["duration_seconds"] is None


def test_trino_job_integration_comes_from_its_producer_url(helper: Counting) -> None:
    trino = job(helper, TRINO_QUERY)
    assert trino["integration"] == "TRINO"
    assert trino["latest_run"]["state"] == "COMPLETE"
    assert job(helper, ("airflow", "BQ"))["integration"] == "AIRFLOW"  # the jobType facet's


def test_dataset_page_with_its_writers_latest_states_is_two_calls(
    api: Counting, helper: Counting
) -> None:
    catalogued = lookup(helper, CATALOGUED)
    page = api.get_json(f"/datasets/{catalogued['id']}")
    api.get_json(f"/datasets/{catalogued['id']}/column-lineage")
    assert api.calls == 2
    (writer,) = page["producers"]
    assert writer["job"]["name"] == "cockpit.no_start"
    assert writer["job"]["latest_run"]["id"] == NO_START_RUN
    assert writer["job"]["latest_run"]["state"] == "COMPLETE"
    (reader,) = page["consumers"]
    assert reader["job"]["name"] == "cockpit.busy_reader"
    assert reader["job"]["latest_run"]["state"] == "COMPLETE"
    # Writers first on the embedded page: the busy reader's 11 newer runs do not push the
    # writer off it.
    runs = page["runs"]["items"]
    assert len(runs) == 10 and runs[0]["id"] == NO_START_RUN and runs[0]["role"] == "output"
    assert {r["role"] for r in runs[1:]} == {"input"}
    rest = helper.get_json(
        f"/datasets/{catalogued['id']}/runs",
        sort="outputs_first",
        cursor=page["runs"]["next_cursor"],
    )
    assert len(runs) + len(rest["items"]) == BUSY_READS + 1
    # role= keeps one side
    writers = helper.get_json(f"/datasets/{catalogued['id']}/runs", role="output")["items"]
    assert [(r["id"], r["role"]) for r in writers] == [(NO_START_RUN, "output")]
    readers = helper.get_json(f"/datasets/{catalogued['id']}/runs", role="input")["items"]
    assert len(readers) == BUSY_READS and {r["role"] for r in readers} == {"input"}


def test_job_page_with_parent_and_children_states_is_two_calls(
    api: Counting, helper: Counting
) -> None:
    bq = api.get_json(f"/jobs/{job(helper, ('airflow', 'BQ'))['id']}")
    runs = api.get_json("/runs", job_id=bq["id"], limit=10)
    assert api.calls == 2
    assert bq["parent"] is None
    children = {c["name"]: c for c in bq["children"]}
    assert set(children) == {"BQ.copy", "BQ.download", "BQ.upload"}
    for child in children.values():
        listed = job(helper, ("airflow", child["name"]))
        assert child["latest_run"] == listed["latest_run"] and child["latest_run"]["state"]
    assert (runs["total"], runs["total_is_exact"]) == (bq["run_count"], True)
    # A child's page: its parent with its latest run, in one call.
    copy_ = api.get_json(f"/jobs/{children['BQ.copy']['id']}")
    assert api.calls == 3
    assert copy_["parent"]["id"] == bq["id"]
    assert copy_["parent"]["latest_run"] == bq["latest_run"]


def neighbours(client: Counting, node: dict[str, Any]) -> dict[str, set[str]]:
    """A node's neighbours upstream and downstream (by node key), from the graph 1 hop
    around it (a job's datasets; a dataset's jobs)."""
    found: dict[str, set[str]] = {"upstream": set(), "downstream": set()}
    for direction in found:
        depth = 0 if node["type"] == "job" else 1
        graph = client.get_json("/lineage", node=node["key"], direction=direction, depth=depth)
        found[direction] = {n["key"] for n in graph["nodes"] if n["depth"] == 1}
    return found


def test_a_graph_around_a_dataset_ends_on_datasets_and_marks_what_lies_beyond(
    api: Counting, helper: Counting
) -> None:
    test_csv = lookup(helper, ("gs://mock-bucket", "test.csv"))
    for depth in (1, 2):
        graph = api.get_json("/lineage", node=f"dataset:{test_csv['id']}", depth=depth)
        deepest = max(n["depth"] for n in graph["nodes"])
        assert deepest == 2 * depth
        assert {n["type"] for n in graph["nodes"] if n["depth"] == deepest} == {"dataset"}
        shown = {n["key"] for n in graph["nodes"]}
        for node in graph["nodes"]:
            around = neighbours(helper, node)
            assert node["beyond"] == {side: len(keys - shown) for side, keys in around.items()}, (
                node
            )
    assert api.calls == 2
    # At depth 1 the BigQuery table at the edge says one job reads it beyond the answer.
    graph = helper.get_json("/lineage", node=f"dataset:{test_csv['id']}", depth=1)
    edge = next(n for n in graph["nodes"] if n["name"] == "mock-project.test.upload")
    assert edge["depth"] == 2 and edge["beyond"] == {"upstream": 0, "downstream": 1}


def test_dataset_page_is_two_calls_now_and_as_of(api: Counting, helper: Counting) -> None:
    tbl1 = lookup(helper, TBL1)
    page = api.get_json(f"/datasets/{tbl1['id']}")
    columns = api.get_json(f"/datasets/{tbl1['id']}/column-lineage")
    assert api.calls == 2
    names = {(n["namespace"], n["name"]): n["kind"] for n in page["names"]}
    assert names == {TBL1: "emitted", ("file:/tmp/cll_test", "default.tbl1"): "symlink"}
    assert (page["namespace"], page["name"]) == ("file:/tmp/cll_test", "default.tbl1")
    assert [f["name"] for f in page["fields"]] == ["ident", "trans", "agg"]
    assert page["lifecycle"]["state"] == "CREATE"
    versions = page["versions"]["items"]
    assert versions and versions[0]["fields"] == page["fields"]
    assert versions[-1]["run"]["job"]["name"].endswith("default_tbl1")
    runs = page["runs"]["items"]
    assert {r["role"] for r in runs} == {"output"} and runs[0]["id"] == versions[0]["run"]["id"]
    (writer,) = page["producers"]
    assert writer["job"]["name"] == runs[0]["job"]["name"] and writer["lifecycle_state"] == "CREATE"
    edges = columns["edges"]
    assert {e["to"]["field"] for e in edges} == {"ident", "trans", "agg"}
    assert all(e["job"]["name"] == writer["job"]["name"] for e in edges)
    assert all([j["id"] for j in e["jobs"]] == [writer["job"]["id"]] for e in edges)
    assert all(e["from"]["dataset"]["name"].startswith("default.cll_source") for e in edges)
    # As of before the table was written: its history and schema as they were, two calls.
    before = runs[-1]["started_at"]
    then = api.get_json(f"/datasets/{tbl1['id']}", as_of=before)
    api.get_json(f"/datasets/{tbl1['id']}/column-lineage", as_of=before)
    assert api.calls == 4
    assert len(then["runs"]["items"]) <= len(runs)
    assert all(r["started_at"] <= before for r in then["runs"]["items"])
    assert all(v["event_time"] <= before for v in then["versions"]["items"])


# --- shapes the screens rely on ---------------------------------------------------------


def test_started_at_is_one_rule_everywhere(helper: Counting) -> None:
    """A run whose START never arrived starts at its earliest eventTime in every answer."""
    run = helper.get_json(f"/runs/{NO_START_RUN}")
    assert run["started_at"] == "2026-09-03T08:00:05Z" == run["first_seen"]
    assert run["duration_seconds"] == pytest.approx(55)
    dataset = lookup(helper, CATALOGUED)
    (of_dataset,) = helper.get_json(f"/datasets/{dataset['id']}/runs", role="output")["items"]
    assert of_dataset["id"] == NO_START_RUN and of_dataset["started_at"] == run["started_at"]
    listed = [r for r in every(helper, "/runs", job_id=run["job"]["id"])]
    assert [r["started_at"] for r in listed] == [run["started_at"]]
    assert (
        job(helper, ("prod-lineage", "cockpit.no_start"))["latest_run"]["started_at"]
        == (run["started_at"])
    )


def test_root_and_parent_are_embedded_and_mean_the_same_everywhere(helper: Counting) -> None:
    dag = helper.get_json(f"/runs/{BQ_RUN}")
    task = helper.get_json(f"/runs/{BQ_COPY_RUN}")
    listed = {r["id"]: r for r in every(helper, "/runs", job_id=task["job"]["id"])}
    listed.update({r["id"]: r for r in every(helper, "/runs", job_id=dag["job"]["id"])})
    assert dag["root"] is None and listed[BQ_RUN]["root"] is None
    for answer in (task, listed[BQ_COPY_RUN]):
        assert (
            answer["parent"]
            == answer["root"]
            == {
                "id": BQ_RUN,
                "job": dag["job"],
                "state": "COMPLETE",
            }
        )


def test_display_name_and_matched_names(helper: Counting) -> None:
    spark = lookup(helper, SPARK)
    assert (spark["namespace"], spark["name"]) == HIVE and spark["name_count"] == 2
    assert spark["matched_name"] == {
        "namespace": SPARK[0],
        "name": SPARK[1],
        "kind": "emitted",
        "symlink_type": None,
        "joined_by": None,
    }
    # It counts in each namespace it has a name in, under that name there.
    in_hive = {d["id"]: d for d in every(helper, "/datasets", namespace=HIVE[0])}
    assert in_hive[spark["id"]]["matched_name"]["name"] == HIVE[1]
    in_spark = {d["id"]: d for d in every(helper, "/datasets", namespace=SPARK[0])}
    assert in_spark[spark["id"]]["matched_name"]["name"] == SPARK[1]
    assert in_spark[spark["id"]]["namespace"] == HIVE[0]  # shown under its display name
    hits = helper.get_json("/search", q="sales.db/orders_daily")["items"]
    (hit,) = [h for h in hits if h["id"] == spark["id"]]
    assert (hit["namespace"], hit["name"]) == HIVE
    assert hit["matched_name"] == {"namespace": SPARK[0], "name": SPARK[1]}


def test_lifecycle_changes_and_a_dropped_table_is_no_ordinary_writer(
    api: Counting, helper: Counting
) -> None:
    t1 = lookup(helper, T1)
    page = api.get_json(f"/datasets/{t1['id']}")
    # The drop job's latest run dropped t2: now it writes t1 no more (as of the drop, it did).
    writers = {w["job"]["name"]: w["lifecycle_state"] for w in page["producers"]}
    assert DROP_JOB[1] not in writers
    assert page["lifecycle"]["state"] == "CREATE"  # dropped, then created again
    history = [(r["job"]["name"], r["lifecycle_state"]) for r in page["runs"]["items"]]
    assert (DROP_JOB[1], "DROP") in history
    assert any(state == "CREATE" for _, state in history)
    # As of just after the drop, the dataset's lifecycle state is DROP.
    dropped = next(r for r in page["runs"]["items"] if r["lifecycle_state"] == "DROP")
    then = api.get_json(f"/datasets/{t1['id']}", as_of=dropped["ended_at"])
    assert then["lifecycle"]["state"] == "DROP"
    writers = {w["job"]["name"]: w["lifecycle_state"] for w in then["producers"]}
    assert writers[DROP_JOB[1]] == "DROP"
    graph = api.get_json("/lineage", node=f"dataset:{t1['id']}", depth=1, as_of=dropped["ended_at"])
    drop_job = next(n for n in graph["nodes"] if n["name"] == DROP_JOB[1])
    key = f"dataset:{t1['id']}"
    ends = (drop_job["key"], key)
    (edge,) = [e for e in graph["edges"] if (e["from"]["key"], e["to"]["key"]) == ends]
    assert edge["lifecycle_state"] == "DROP"


def test_catalogue_facets_surface_as_fields(helper: Counting) -> None:
    dataset = helper.get_json(f"/datasets/{lookup(helper, CATALOGUED)['id']}")
    assert dataset["description"] == "Daily orders, one row a customer and day."
    assert dataset["owners"] == [{"name": "team:sales-analytics", "type": "MAINTAINER"}]
    assert dataset["tags"] == [{"key": "pii", "value": "false", "source": "SPARK"}]
    assert dataset["dataset_type"] == "TABLE"
    assert dataset["facets"]["documentation"]["description"] == dataset["description"]
    spark_job = helper.get_json(f"/jobs/{job(helper, ('prod-lineage', 'cockpit.no_start'))['id']}")
    assert spark_job["description"] == "Builds the table." and spark_job["run_count"] == 1
    bq = helper.get_json(f"/jobs/{job(helper, ('airflow', 'BQ'))['id']}")
    assert bq["owners"] == [{"name": "***", "type": None}]


def test_sorts(helper: Counting) -> None:
    by_run = helper.get_json("/jobs", sort="latest_run", limit=500)["items"]
    starts = [j["latest_run"]["started_at"] for j in by_run if j["latest_run"]]
    assert starts == sorted(starts, reverse=True) and len(starts) == len(by_run)
    assert by_run[0]["name"] == "cockpit.busy_reader"
    failed = helper.get_json("/jobs", sort="failed_first", limit=4)["items"]
    assert [(j["name"], j["latest_run"]["state"]) for j in failed[:3]] == [
        ("cockpit.failing", "FAIL"),
        ("cockpit.aborted", "ABORT"),
        ("cockpit.failing", "FAIL"),  # (cockpit-other's)
    ]
    assert failed[3]["name"] == by_run[0]["name"]
    runs = helper.get_json("/runs", sort="failed_first", limit=500)["items"]
    assert runs[0]["id"] == FAILED_RUN
    started = [
        r["started_at"] for r in helper.get_json("/runs", sort="started", limit=500)["items"]
    ]
    assert started == sorted(started, reverse=True)
    # Page by page, a sorted list is the same list.
    paged = every(helper, "/jobs", page_size=3, sort="failed_first")
    assert [j["id"] for j in paged] == [
        j["id"] for j in helper.get_json("/jobs", sort="failed_first", limit=500)["items"]
    ]


def test_a_cursor_is_bound_to_its_filters_and_sort(helper: Counting) -> None:
    cursor = helper.get_json("/jobs", limit=1)["next_cursor"]
    for other in ({"namespace": "airflow"}, {"sort": "latest_run"}, {"state": "COMPLETE"}):
        answer = helper.get("/jobs", params={"limit": 1, "cursor": cursor, **other})
        assert answer.status_code == 400, other
        problem = answer.json()
        assert problem["type"] == "https://stackable.tech/metastore/problems/invalid-cursor"
        assert problem["invalid-params"][0]["name"] == "cursor"
    assert helper.get("/jobs", params={"limit": 1, "cursor": cursor}).status_code == 200
    events = helper.get_json(f"/runs/{ETL_RUN}/events", limit=1)["next_cursor"]
    other_run = helper.get(f"/runs/{BQ_RUN}/events", params={"limit": 1, "cursor": events})
    assert other_run.status_code == 400  # a cursor of one run's events is not another's
    datasets = helper.get_json("/datasets", limit=1)["next_cursor"]
    answer = helper.get("/datasets", params={"limit": 1, "cursor": datasets, "q": "orders"})
    assert answer.status_code == 400


def test_not_found_and_not_yet_are_told_apart(helper: Counting) -> None:
    unknown = helper.get(f"/jobs/{uuid.uuid4()}")
    assert unknown.status_code == 404
    assert unknown.json()["type"] == "https://stackable.tech/metastore/problems/not-found"
    etl = job(helper, ORDERS_ETL)
    early = helper.get(f"/jobs/{etl['id']}", params={"as_of": "2026-01-01T00:00:00Z"})
    assert early.status_code == 404
    assert early.json()["type"] == "https://stackable.tech/metastore/problems/not-yet"


def test_job_inputs_and_outputs_come_with_their_counts(helper: Counting) -> None:
    etl = helper.get_json(f"/jobs/{job(helper, ORDERS_ETL)['id']}")
    assert (etl["input_count"], etl["output_count"]) == (1, 1)
    assert [(d["namespace"], d["name"]) for d in etl["outputs"]] == [HIVE]
    run = helper.get_json(f"/runs/{ETL_RUN}")
    assert (run["input_count"], run["output_count"], run["inputs"]) == (1, 1, etl["inputs"])


def test_the_whole_list_behind_the_capped_inputs_and_outputs(helper: Counting) -> None:
    etl = helper.get_json(f"/jobs/{job(helper, ORDERS_ETL)['id']}")
    for direction in ("input", "output"):
        listed = every(helper, f"/jobs/{etl['id']}/datasets", page_size=3, direction=direction)
        assert listed == etl[f"{direction}s"]
        of_run = every(helper, f"/runs/{ETL_RUN}/datasets", page_size=3, direction=direction)
        assert of_run == listed
    airflow = every(helper, "/jobs", namespace="airflow")
    outputs = {
        j["name"]: every(helper, f"/jobs/{j['id']}/datasets", page_size=3, direction="output")
        for j in airflow
    }
    assert sum(len(o) for o in outputs.values()) >= 3
    assert (
        helper.get(f"/jobs/{uuid.uuid4()}/datasets", params={"direction": "input"}).status_code
        == 404
    )
