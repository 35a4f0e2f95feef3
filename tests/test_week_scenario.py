"""A generated week of a platform (tests/week.py) through the real processes: the events
posted to ingest, folded by `metastore projector`, answered by `metastore api` over HTTP.

The answers a user acts on after the last day's failures agree with each other: staleness
travels from the failed runs to everything built from their outputs, and `/impact` names
the cause upstream in the same answer (issue 48, item 3); the namespace filter matches any
of a dataset's names, so it finds what is shown under a namespace, and /namespaces counts
what the filter lists (item 4);
job nodes carry their owners (item 7).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support import open_service, wait_until_folded
from tests.week import CATALOGS, HIVE, OWNERS, TRINO, Week, week

BATCH = 500


class Api:
    def __init__(self, client: httpx.Client, scenario: Week) -> None:
        self.client = client
        self.week = scenario

    def get(self, path: str, **params: Any) -> Any:
        answer = self.client.get("/api/v1" + path, params=params)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def dataset_id(self, handle: str) -> str:
        namespace, name = self.week.datasets[handle]
        (item,) = self.get("/datasets", namespace=namespace, name=name)["items"]
        return item["id"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def api(
    pg_server: Any, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Api]:
    scenario = week()
    log_dir = tmp_path_factory.mktemp("week")
    with open_service(pg_server, template_db, log_dir, "week", catalogs=CATALOGS) as (_, client):
        for start in range(0, len(scenario.events), BATCH):
            batch = scenario.events[start : start + BATCH]
            answer = client.post("/ingest/openlineage/batch", json=batch)
            assert answer.status_code == 200, answer.text
        wait_until_folded(client, timeout=120)
        yield Api(client, scenario)


def _reasons(freshness: dict[str, Any]) -> set[tuple[str, str | None, str | None]]:
    """(reason, run id, dataset name) of each stale reason."""
    return {
        (r["reason"], r["run"] and r["run"]["id"], r["dataset"] and r["dataset"]["name"])
        for r in freshness["stale_reasons"]
    }


# --- item 3: staleness that travels --------------------------------------------------------


def test_everything_built_from_a_failed_runs_output_is_at_risk(api: Api) -> None:
    failed = api.week.runs["failed_trino_run"]
    impact = api.get("/impact", node=f"run:{failed}", depth=5)
    nodes = {n["name"]: n for n in impact["nodes"] if n["type"] == "dataset"}
    summary = nodes["sales.orders_summary"]  # (shown under its Hive name)
    assert ("writer_failed", failed, None) in _reasons(summary["freshness"])
    # the dbt model built from it, the KPIs built from that, the report published from
    # those: each at risk, naming the root failed run and the input it came through
    came_through = {
        "analytics.fct_revenue": "sales.orders_summary",
        "analytics.rpt_daily_kpis": "analytics.fct_revenue",
        "daily_kpis.csv": "analytics.rpt_daily_kpis",
    }
    for name, via in came_through.items():
        freshness = nodes[name]["freshness"]
        assert freshness["stale"] is True
        (reason,) = [r for r in freshness["stale_reasons"] if r["run"] and r["run"]["id"] == failed]
        assert reason["reason"] == "upstream_failed"
        assert reason["run"]["job"]["name"] == api.week.jobs["failed_trino_query"][1]
        assert reason["run"]["state"] == "FAIL"
        assert reason["dataset"]["id"] == nodes[via]["id"]
    # the failed run itself is what broke: nothing upstream of what it read failed
    assert impact["causes"] == []


def test_the_dataset_page_and_list_say_the_same(api: Api) -> None:
    failed = api.week.runs["failed_trino_run"]
    kpis = api.dataset_id("rpt_daily_kpis")
    page = api.get(f"/datasets/{kpis}")["freshness"]
    runs = {r["run"]["id"] for r in page["stale_reasons"] if r["reason"] == "upstream_failed"}
    # both of the last day's failures reach the KPIs: the Trino query and the Spark job
    assert runs == {failed, api.week.runs["failed_spark_run"]}
    namespace, name = api.week.datasets["rpt_daily_kpis"]
    (item,) = api.get("/datasets", namespace=namespace, name=name)["items"]
    assert item["freshness"] == page
    # and as of the week's end, the same reasons
    end = api.week.end.isoformat().replace("+00:00", "Z")
    then = api.get(f"/datasets/{kpis}", as_of=end)["freshness"]
    assert {(r["reason"], r["run"] and r["run"]["id"]) for r in then["stale_reasons"]} == {
        (r["reason"], r["run"] and r["run"]["id"]) for r in page["stale_reasons"]
    }


def test_impact_names_the_cause_upstream_in_the_same_answer(api: Api) -> None:
    kpis = api.dataset_id("rpt_daily_kpis")
    impact = api.get("/impact", node=f"dataset:{kpis}")
    causes = {c["run"]["id"]: c for c in impact["causes"]}
    assert set(causes) == {api.week.runs["failed_trino_run"], api.week.runs["failed_spark_run"]}
    spark = causes[api.week.runs["failed_spark_run"]]
    assert spark["run"]["job"]["name"] == api.week.jobs["customers_etl"][1]
    assert spark["via"]["id"] == kpis
    # from the publishing job: the datasets it read
    job = api.get("/lineage", node=f"dataset:{kpis}", depth=1, direction="downstream")
    (publish,) = [n for n in job["nodes"] if n["name"] == api.week.jobs["publish_report"][1]]
    impact = api.get("/impact", node=f"job:{publish['id']}")
    assert {c["run"]["id"] for c in impact["causes"]} == set(causes)
    assert {c["via"]["id"] for c in impact["causes"]} == {kpis}


def test_as_of_before_the_failures_nothing_is_at_risk(api: Api) -> None:
    kpis = api.dataset_id("rpt_daily_kpis")
    before = "2026-09-13T20:00:00Z"  # the last cycle starts
    then = api.get(f"/datasets/{kpis}", as_of=before)["freshness"]
    assert not [r for r in then["stale_reasons"] if r["reason"] == "upstream_failed"]


# --- item 4: the namespace filter uses the namespace the user sees -------------------------


def _pages(api: Api, path: str, **params: Any) -> tuple[list[dict[str, Any]], int]:
    """Every item of a list, page by page, and the total its first page states."""
    items: list[dict[str, Any]] = []
    first = page = api.get(path, limit=20, **params)
    while True:
        assert page["total_is_exact"] is True
        items += page["items"]
        if page["next_cursor"] is None:
            return items, first["total"]
        page = api.get(path, limit=20, cursor=page["next_cursor"], **params)


def test_the_namespace_filter_finds_what_is_shown_under_it(api: Api) -> None:
    hits, total = _pages(api, "/search", q="stg", type="dataset")
    assert total == len(hits) == 3  # the three staging models, shown under their Hive names
    assert {h["namespace"] for h in hits} == {HIVE}
    in_hive, in_hive_total = _pages(api, "/search", q="stg", type="dataset", namespace=HIVE)
    assert [h["id"] for h in in_hive] == [h["id"] for h in hits] and in_hive_total == 3
    # the Trino names they were emitted under find them too
    in_trino, _ = _pages(api, "/search", q="stg", type="dataset", namespace=TRINO)
    assert {h["id"] for h in in_trino} == {h["id"] for h in hits}


def test_namespace_counts_agree_with_the_lists(api: Api) -> None:
    everything, _ = _pages(api, "/datasets")
    namespaces = {n["name"]: n for n in api.get("/namespaces", limit=100)["items"]}
    for name, namespace in namespaces.items():
        listed, total = _pages(api, "/datasets", namespace=name)
        assert total == len(listed) == namespace["dataset_count"], name
        assert len({i["id"] for i in listed}) == len(listed)  # each dataset once
        # each item says which of its names counts it there
        assert {i["matched_name"]["namespace"] for i in listed} <= {name}
        # everything shown under a namespace is listed there
        shown = {i["id"] for i in everything if i["namespace"] == name}
        assert shown <= {i["id"] for i in listed}, name
    # the Hive namespace: the 3 Spark tables' symlinks, the Trino and 8 dbt tables' Hive names
    assert namespaces[HIVE]["dataset_count"] == 12
    hive_shown = [i for i in everything if i["namespace"] == HIVE]
    assert len(hive_shown) == 12
    # a dataset emitted under Trino and shown under Hive is in both lists
    summary = api.dataset_id("orders_summary")
    trino, _ = _pages(api, "/datasets", namespace=TRINO)
    (item,) = [i for i in trino if i["id"] == summary]
    assert item["namespace"] == HIVE
    assert item["matched_name"]["namespace"] == TRINO
    assert item["matched_name"]["name"] == "lakehouse.sales.orders_summary"


# --- item 7: owners on job nodes -----------------------------------------------------------


def test_job_nodes_carry_their_owners(api: Api) -> None:
    revenue = api.dataset_id("fct_revenue")
    graph = api.get("/lineage", node=f"dataset:{revenue}", depth=2)
    jobs = [n for n in graph["nodes"] if n["type"] == "job"]
    assert len(jobs) >= 4
    for job in jobs:
        assert job["owners"] == [{"name": OWNERS[job["namespace"]], "type": "MAINTAINER"}], job
    impact = api.get("/impact", node=f"run:{api.week.runs['failed_spark_run']}")
    owners = {n["name"]: n["owners"] for n in impact["nodes"] if n["type"] == "job"}
    assert owners[api.week.jobs["stg_customers"][1]] == [
        {"name": "team:analytics-engineering", "type": "MAINTAINER"}
    ]
    assert owners[api.week.jobs["customers_etl"][1]] == [
        {"name": "team:data-platform", "type": "MAINTAINER"}
    ]
