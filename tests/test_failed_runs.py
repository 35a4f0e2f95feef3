"""When a run fails, through the real processes (`metastore api` and `metastore projector`,
events posted to the clients' default path `/api/v1/lineage`).

The scenario (namespace `fw`, datasets in `s3://fw`), by eventTime:

    T0  May 1 00:00  nothing yet
        May 1 01:00  load_src writes src
    T1  May 2 00:10  build_orders COMPLETEs: reads src, writes orders with schema v1
    Tm  May 2 12:00  (between T1 and T2)
    T2  May 3 00:05  build_orders FAILs, reporting orders with schema v2
    T3  May 4 00:10  report COMPLETEs: reads orders, writes orders_report

The failed run only attempted its output: orders was last written at T1, v2 is no
version, the reader's data came from the T1 run, and orders is stale because its writer
failed; and the answers as of Tm are those given before T2 happened.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import (
    BRIEF_CATALOGS,
    DBT_RUN,
    FAILED_TRINO_RUN,
    TRINO,
    Api,
    failed_trino_events,
    open_service,
    ownership_facet,
    run_event,
    schema_facet,
)

NS, DS_NS = "fw", "s3://fw"
PRODUCER = "https://github.com/stackabletech/metastore/tests"
T0, TM = "2026-05-01T00:00:00Z", "2026-05-02T12:00:00Z"
T1_END, T2_END, T3_END = "2026-05-02T00:10:00Z", "2026-05-03T00:05:00Z", "2026-05-04T00:10:00Z"
V1 = [("id", "BIGINT"), ("amount", "DOUBLE")]
V2 = [("id", "BIGINT"), ("amount", "DECIMAL(12,2)"), ("currency", "VARCHAR")]


def run_id(label: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"metastore-tests/failed-runs/{label}"))


def dataset(
    name: str, fields: list[tuple[str, str]] | None = None, owner: str | None = None
) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    if fields is not None:
        facets["schema"] = schema_facet(PRODUCER, fields)
    if owner is not None:
        facets["ownership"] = ownership_facet(PRODUCER, owner)
    return {"namespace": DS_NS, "name": name, "facets": facets}


def event(
    kind: str, when: str, job: str, label: str, inputs: list[Any], outputs: list[Any]
) -> dict[str, Any]:
    return run_event(kind, when, PRODUCER, (NS, job), run_id(label), inputs, outputs)


BEFORE_T2 = [
    event("START", "2026-05-01T00:50:00Z", "load_src", "load", [], [dataset("src")]),
    event("COMPLETE", "2026-05-01T01:00:00Z", "load_src", "load", [], [dataset("src", V1)]),
    event("START", "2026-05-02T00:00:00Z", "build_orders", "t1", [dataset("src")], []),
    event(
        "COMPLETE", T1_END, "build_orders", "t1",
        [dataset("src")], [dataset("orders", V1, "team:orders")],
    ),
]  # fmt: skip
FROM_T2 = [
    event(
        "START", "2026-05-03T00:00:00Z", "build_orders", "t2",
        [dataset("src")], [dataset("orders", V2, "team:someone-else")],
    ),
    event(
        "FAIL", T2_END, "build_orders", "t2",
        [dataset("src")], [dataset("orders", V2, "team:someone-else")],
    ),
    event("START", "2026-05-04T00:00:00Z", "report", "t3", [dataset("orders")], []),
    event(
        "COMPLETE", T3_END, "report", "t3",
        [dataset("orders")], [dataset("orders_report", [("total", "DOUBLE")], "team:finance")],
    ),
]  # fmt: skip


def keys(nodes: list[dict[str, Any]]) -> dict[str, tuple[str, int]]:
    return {n["name"]: (n["type"], n["depth"]) for n in nodes}


def as_of_answers(api: Api, orders: str) -> dict[str, Any]:
    """Every answer about orders as of Tm (a moment between T1 and T2)."""
    node = f"dataset:{orders}"
    return {
        "dataset": api.get(f"/datasets/{orders}", as_of=TM),
        "versions": api.get(f"/datasets/{orders}/versions", as_of=TM),
        "lineage": api.get("/lineage", node=node, as_of=TM),
        "impact": api.get("/impact", node=f"run:{run_id('t1')}", as_of=TM),
        "diff": api.get("/lineage/diff", node=node, **{"from": T0, "to": TM}),
    }


@pytest.fixture(scope="module")
def scenario(
    pg_server: Any, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Api, dict[str, Any], dict[str, Any]]]:
    """The service after the whole scenario, with what it answered before T2 happened:
    the answers as of Tm and the freshness of orders then."""
    log_dir = tmp_path_factory.mktemp("failed-runs")
    with open_service(pg_server, template_db, log_dir, "failed") as (_, client):
        api = Api(client, NS, DS_NS)
        api.post(BEFORE_T2)
        orders = api.dataset_id("orders")
        before = as_of_answers(api, orders)
        now_before = api.get(f"/datasets/{orders}")
        api.post(FROM_T2)
        yield api, before, now_before


@pytest.fixture(scope="module")
def api(scenario: tuple[Api, dict[str, Any], dict[str, Any]]) -> Api:
    return scenario[0]


def test_a_failed_run_does_not_move_the_last_write(api: Api) -> None:
    orders = api.get(f"/datasets/{api.dataset_id('orders')}")
    assert orders["last_write_at"] == T1_END
    fresh = orders["freshness"]
    assert fresh["last_write"]["at"] == T1_END
    assert fresh["last_write"]["run"] == {
        "id": run_id("t1"),
        "job": {
            "id": fresh["last_write"]["run"]["job"]["id"],
            "namespace": NS,
            "name": "build_orders",
        },
        "state": "COMPLETE",
    }
    assert fresh["failed_attempt"]["run"]["id"] == run_id("t2")
    assert (fresh["failed_attempt"]["state"], fresh["failed_attempt"]["at"]) == ("FAIL", T2_END)
    (writer,) = orders["producers"]
    assert (writer["job"]["name"], writer["last_write_at"]) == ("build_orders", T1_END)
    # the graph node says the same
    node = api.get("/lineage", node=f"dataset:{orders['id']}", depth=1)["nodes"][0]
    assert (node["name"], node["last_write_at"]) == ("orders", T1_END)
    assert node["freshness"] == fresh


def test_a_failed_runs_schema_is_no_version(api: Api) -> None:
    orders = api.dataset_id("orders")
    versions = api.get(f"/datasets/{orders}/versions")["items"]
    assert [(v["version"], [f["name"] for f in v["fields"]]) for v in versions] == [
        (1, ["id", "amount"])
    ]
    assert versions[0]["run"]["id"] == run_id("t1")
    page = api.get(f"/datasets/{orders}")
    assert [(f["name"], f["type"]) for f in page["fields"]] == V1
    assert page["facets"]["schema"]["fields"] == [{"name": n, "type": t} for n, t in V1]
    assert [o["name"] for o in page["owners"]] == ["team:orders"]  # not the attempt's
    assert [f["name"] for f in api.get(f"/datasets/{orders}", as_of=T3_END)["fields"]] == [
        "id",
        "amount",
    ]
    runs = api.get(f"/datasets/{orders}/runs")["items"]
    failed = next(r for r in runs if r["id"] == run_id("t2"))
    assert (failed["role"], failed["state"], failed["schema_version"]) == ("output", "FAIL", None)


def test_run_lineage_names_the_run_that_wrote_the_data(api: Api) -> None:
    found = api.get("/lineage/runs", run_id=run_id("t3"), direction="upstream", depth=2)
    assert {(e["from"]["id"], e["to"]["id"], e["dataset"]["name"]) for e in found["edges"]} == {
        (run_id("t1"), run_id("t3"), "orders"),
        (run_id("load"), run_id("t1"), "src"),
    }
    assert run_id("t2") not in {n["id"] for n in found["nodes"]}
    # downstream of the failed run: it wrote nothing, so nothing read its write
    down = api.get("/lineage/runs", run_id=run_id("t2"), direction="downstream")
    assert [n["id"] for n in down["nodes"]] == [run_id("t2")] and down["edges"] == []
    # the datasets of the start run and of the leaf run, as nodes, and who read or wrote them
    datasets = {d["name"]: d for d in found["datasets"]}
    assert set(datasets) == {"orders", "orders_report", "src"}
    assert datasets["orders"]["freshness"]["stale"] is True
    assert {
        (e["run"]["id"], e["dataset"]["name"], e["role"], e["written"])
        for e in found["dataset_edges"]
    } == {
        (run_id("t3"), "orders", "input", False),
        (run_id("t3"), "orders_report", "output", True),
        (run_id("load"), "src", "output", True),
    }
    attempt = api.get("/lineage/runs", run_id=run_id("t2"), direction="upstream", depth=1)
    assert {(e["dataset"]["name"], e["role"], e["written"])
            for e in attempt["dataset_edges"] if e["run"]["id"] == run_id("t2")} == {
        ("src", "input", False),
        ("orders", "output", False),  # attempted only
    }  # fmt: skip


EDGE_LISTS = ("edges", "edges_added", "edges_removed", "dataset_edges")


def named_ends(answer: dict[str, Any]) -> list[tuple[str, ...]]:
    """Every edge of an answer as drawn from the edge alone, each end and its run by name
    (a KeyError or TypeError: an end given as a bare id or not at all)."""

    def name(ref: dict[str, Any]) -> str:
        if "state" in ref:  # a run: its job and state
            return f"run {ref['job']['namespace']}/{ref['job']['name']} {ref['state']}"
        assert uuid.UUID(ref["id"]) and ref["namespace"] and ref["name"], ref
        return f"{ref.get('type', 'dataset')} {ref['name']}"

    drawn = []
    for edges in (answer.get(k, []) for k in EDGE_LISTS):
        for e in edges:
            ends = (e["from"], e["to"]) if "from" in e else (e["run"], e["dataset"])
            last_run = e.get("last_run")
            drawn.append(
                (
                    *map(name, ends),
                    *([name(e["dataset"])] if "from" in e and "dataset" in e else []),
                    *([name(last_run)] if last_run else []),
                )
            )
    return drawn


def test_every_edge_names_both_ends_and_its_run(api: Api) -> None:
    """The graph, impact, run lineage and diff answers: every edge names both its ends
    (and the run that made it, with its job and state then), no bare ids to look up."""
    orders = f"dataset:{api.dataset_id('orders')}"
    graph = api.get("/lineage", node=orders, depth=2)
    assert sorted(named_ends(graph)) == [
        ("dataset orders", "job report", "run fw/report COMPLETE"),
        ("dataset src", "job build_orders", "run fw/build_orders FAIL"),
        ("job build_orders", "dataset orders", "run fw/build_orders FAIL"),
        ("job load_src", "dataset src", "run fw/load_src COMPLETE"),
        ("job report", "dataset orders_report", "run fw/report COMPLETE"),
    ]
    # each end is the node of the answer under the same key and name
    nodes = {n["key"]: n for n in graph["nodes"]}
    for e in graph["edges"]:
        for end in (e["from"], e["to"]):
            node = nodes[end["key"]]
            assert end == {k: node[k] for k in ("key", "type", "id", "namespace", "name")}
    # as of Tm, the run holding build_orders' edges is t1, COMPLETE then
    then = api.get("/lineage", node=orders, depth=1, as_of=TM)
    assert sorted(named_ends(then)) == [
        ("dataset src", "job build_orders", "run fw/build_orders COMPLETE"),
        ("job build_orders", "dataset orders", "run fw/build_orders COMPLETE"),
    ]
    assert {e["last_run"]["id"] for e in then["edges"]} == {run_id("t1")}
    impact = api.get("/impact", node=f"run:{run_id('t2')}")
    assert ("job build_orders", "dataset orders", "run fw/build_orders FAIL") in named_ends(impact)
    runs = api.get("/lineage/runs", run_id=run_id("t3"), direction="upstream", depth=2)
    assert sorted(named_ends(runs)) == [
        ("run fw/build_orders COMPLETE", "run fw/report COMPLETE", "dataset orders"),
        ("run fw/load_src COMPLETE", "dataset src"),  # (the start's and leaf runs' data)
        ("run fw/load_src COMPLETE", "run fw/build_orders COMPLETE", "dataset src"),
        ("run fw/report COMPLETE", "dataset orders"),
        ("run fw/report COMPLETE", "dataset orders_report"),
    ]
    diff = api.get("/lineage/diff", node=orders, depth=2, **{"from": TM, "to": T3_END})
    assert sorted(named_ends(diff)) == [
        ("dataset orders", "job report", "run fw/report COMPLETE"),
        ("job report", "dataset orders_report", "run fw/report COMPLETE"),
    ]


def test_a_dataset_is_stale_because_its_writer_failed(api: Api) -> None:
    fresh = api.get(f"/datasets/{api.dataset_id('orders')}")["freshness"]
    assert fresh["stale"] is True
    (reason,) = fresh["stale_reasons"]
    assert (reason["reason"], reason["at"], reason["run"]["id"], reason["dataset"]) == (
        "writer_failed",
        T2_END,
        run_id("t2"),
        None,
    )
    # what was built from it is at risk: the root failed run, through orders
    orders = api.dataset_id("orders")
    report = api.get(f"/datasets/{api.dataset_id('orders_report')}")["freshness"]
    assert (report["last_write"]["at"], report["stale"], report["failed_attempt"]) == (
        T3_END,
        True,
        None,
    )
    assert [
        (r["reason"], r["at"], r["run"]["id"], r["dataset"]["id"]) for r in report["stale_reasons"]
    ] == [("upstream_failed", T2_END, run_id("t2"), orders)]


def test_the_dataset_list_says_which_datasets_are_stale(api: Api) -> None:
    listed = {i["name"]: i for i in api.get("/datasets", namespace=DS_NS)["items"]}
    fresh = listed["orders"]["freshness"]
    assert (fresh["stale"], fresh["last_write"]["at"]) == (True, T1_END)
    assert [(r["reason"], r["at"], r["run"]["id"]) for r in fresh["stale_reasons"]] == [
        ("writer_failed", T2_END, run_id("t2"))
    ]
    assert fresh == api.get(f"/datasets/{listed['orders']['id']}")["freshness"]
    report = listed["orders_report"]["freshness"]
    assert (report["stale"], report["last_write"]["at"]) == (True, T3_END)
    assert report == api.get(f"/datasets/{listed['orders_report']['id']}")["freshness"]
    # every list of datasets says the same: all of them, a filter, the exact lookup
    everything = {i["name"]: i for i in api.get("/datasets")["items"]}
    assert everything["orders"]["freshness"] == fresh
    assert api.get("/datasets", q="orde")["items"][0]["freshness"] == fresh
    (found,) = api.get("/datasets", namespace=DS_NS, name="orders")["items"]
    assert found["freshness"] == fresh


def test_impact_of_the_failed_run_in_one_call(api: Api) -> None:
    impact = api.get("/impact", node=f"run:{run_id('t2')}")
    assert impact["run"]["id"] == run_id("t2") and impact["run"]["state"] == "FAIL"
    assert keys(impact["nodes"]) == {
        "build_orders": ("job", 0),
        "orders": ("dataset", 1),
        "report": ("job", 2),
        "orders_report": ("dataset", 3),
    }
    nodes = {n["name"]: n for n in impact["nodes"]}
    assert [o["name"] for o in nodes["orders"]["owners"]] == ["team:orders"]
    assert [o["name"] for o in nodes["orders_report"]["owners"]] == ["team:finance"]
    assert nodes["orders"]["freshness"]["stale"] is True
    assert nodes["report"]["latest_run"]["id"] == run_id("t3")
    assert nodes["build_orders"]["latest_run"]["state"] == "FAIL"
    build = nodes["build_orders"]["key"]
    # from the run: its job's edges to what the run wrote or attempted, not its inputs
    assert {(e["from"]["key"], e["to"]["key"]) for e in impact["edges"]} == {
        (build, nodes["orders"]["key"]),
        (nodes["orders"]["key"], nodes["report"]["key"]),
        (nodes["report"]["key"], nodes["orders_report"]["key"]),
    }
    assert impact["truncated"] is False
    one = api.get("/impact", node=f"run:{run_id('t2')}", depth=0)  # the job and its outputs
    assert keys(one["nodes"]) == {"build_orders": ("job", 0), "orders": ("dataset", 1)}
    assert one["truncated"] is False
    limited = api.get("/impact", node=f"dataset:{nodes['orders']['id']}", max_nodes=2)
    assert limited["truncated"] is True and len(limited["nodes"]) == 2


def test_the_diff_shows_the_added_nodes_and_no_schema_change(api: Api) -> None:
    orders = api.dataset_id("orders")
    diff = api.get("/lineage/diff", node=f"dataset:{orders}", **{"from": T0, "to": T3_END})
    assert {n["name"] for n in diff["nodes_added"]} == {
        "orders", "build_orders", "src", "load_src", "report", "orders_report",
    }  # fmt: skip
    assert diff["nodes_removed"] == [] and diff["edges_removed"] == []
    assert len(diff["edges_added"]) == 5
    assert diff["schema_changes"] == []
    assert (diff["from"], diff["to"]) == (T0, T3_END)
    # from between T1 and T2: the reader is new, the failed run changed nothing
    later = api.get("/lineage/diff", node=f"dataset:{orders}", **{"from": TM, "to": T3_END})
    assert {n["name"] for n in later["nodes_added"]} == {"report", "orders_report"}
    assert later["schema_changes"] == []


def test_the_answers_as_of_tm_are_those_before_t2_happened(
    scenario: tuple[Api, dict[str, Any], dict[str, Any]],
) -> None:
    api, before, now_before = scenario
    orders = api.dataset_id("orders")
    assert as_of_answers(api, orders) == before
    then = before["dataset"]["freshness"]
    assert then == now_before["freshness"]
    assert (then["last_write"]["at"], then["failed_attempt"], then["stale"]) == (
        T1_END,
        None,
        False,
    )
    assert before["dataset"]["last_write_at"] == now_before["last_write_at"] == T1_END


def test_an_input_written_after_the_last_write_makes_it_stale(api: Api) -> None:
    api.post(
        [
            event("START", "2026-05-05T00:00:00Z", "load_src", "load2", [], [dataset("src")]),
            event("COMPLETE", "2026-05-05T00:30:00Z", "load_src", "load2", [], [dataset("src")]),
        ]
    )
    src = api.dataset_id("src")
    fresh = api.get(f"/datasets/{api.dataset_id('orders')}")["freshness"]
    assert [
        (r["reason"], r["at"], r["dataset"] and r["dataset"]["id"]) for r in fresh["stale_reasons"]
    ] == [
        ("input_rewritten", "2026-05-05T00:30:00Z", src),
        ("writer_failed", T2_END, None),
    ]
    report = api.get(f"/datasets/{api.dataset_id('orders_report')}")["freshness"]
    # a rewritten input does not travel (one hop: src is not what report reads); the
    # failure upstream does
    assert [r["reason"] for r in report["stale_reasons"]] == ["upstream_failed"]
    # as of before the load, it was not
    earlier = api.get(f"/datasets/{api.dataset_id('orders')}", as_of="2026-05-04T12:00:00Z")
    assert [r["reason"] for r in earlier["freshness"]["stale_reasons"]] == ["writer_failed"]


# --- the brief's example after a failed Trino run -----------------------------------------


@pytest.fixture(scope="module")
def brief(
    pg_server: Any, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Api]:
    log_dir = tmp_path_factory.mktemp("brief-failed")
    with open_service(pg_server, template_db, log_dir, "brief", catalogs=BRIEF_CATALOGS) as (
        _,
        client,
    ):
        api = Api(client, NS, DS_NS)
        api.post(failed_trino_events())
        yield api


def test_the_briefs_example_after_a_failed_trino_run(brief: Api) -> None:
    impact = brief.get("/impact", node=f"run:{FAILED_TRINO_RUN}")
    nodes = {n["name"]: n for n in impact["nodes"]}
    assert keys(impact["nodes"]) == {
        "20260903_101500_00051_cm7qz": ("job", 0),
        "sales.orders_summary": ("dataset", 1),  # the Hive name: one dataset
        "analytics.revenue_by_region": ("job", 2),
        "marts.revenue_by_region": ("dataset", 3),
    }
    summary = nodes["sales.orders_summary"]
    assert summary["name_count"] == 2
    assert summary["last_write_at"] == "2026-09-02T10:15:03.870000Z"
    assert summary["freshness"]["failed_attempt"]["run"]["id"] == FAILED_TRINO_RUN
    assert [r["reason"] for r in summary["freshness"]["stale_reasons"]] == ["writer_failed"]
    assert [o["name"] for o in summary["owners"]] == ["team:sales-analytics"]
    revenue = nodes["marts.revenue_by_region"]
    assert [o["name"] for o in revenue["owners"]] == ["team:finance"]
    # built from the summary: at risk, naming the failed run (one call: no second one
    # from the summary's freshness)
    assert [
        (r["reason"], r["run"]["id"], r["run"]["job"]["name"], r["dataset"]["id"])
        for r in revenue["freshness"]["stale_reasons"]
    ] == [("upstream_failed", FAILED_TRINO_RUN, "20260903_101500_00051_cm7qz", summary["id"])]
    assert nodes["analytics.revenue_by_region"]["latest_run"]["state"] == "COMPLETE"

    node = f"dataset:{summary['id']}"
    diff = brief.get(
        "/lineage/diff", node=node, **{"from": "2026-09-02T12:00:00Z", "to": "2026-09-04T00:00:00Z"}
    )
    assert {n["name"] for n in diff["nodes_added"]} == {"20260903_101500_00051_cm7qz"}
    assert diff["nodes_removed"] == [] and diff["schema_changes"] == []
    assert len(diff["edges_added"]) == 2
    # the summary's schema: v1, read by dbt (an observation, no write reported it); the
    # failed run's v2 is no version either
    page = brief.get(f"/datasets/{summary['id']}")
    assert page["versions"]["items"] == [] and page["fields"] is None
    assert [len(s["fields"]) for s in page["reader_schemas"]] == [3]
    assert page["reader_schemas"][0]["run"]["id"] == DBT_RUN
    assert brief.dataset_id("lakehouse.sales.orders_summary", TRINO) == summary["id"]


def test_a_failure_upstream_of_a_dataset_never_written_travels_too(
    pg_server: Any, template_db: str, tmp_path: Path
) -> None:
    """`seed` was only ever attempted (its one writer FAILed: no write, so no inputs of a
    write to follow); `mart`, built from it, and `report`, built from `mart`, are at risk."""
    events = [
        event("START", "2026-06-01T00:00:00Z", "load_seed", "seed", [], [dataset("seed")]),
        event("FAIL", "2026-06-01T00:01:00Z", "load_seed", "seed", [], [dataset("seed")]),
        event("START", "2026-06-01T01:00:00Z", "build_mart", "mart", [dataset("seed")], []),
        event(
            "COMPLETE", "2026-06-01T01:01:00Z", "build_mart", "mart",
            [dataset("seed")], [dataset("mart")],
        ),
        event("START", "2026-06-01T02:00:00Z", "build_report", "rep", [dataset("mart")], []),
        event(
            "COMPLETE", "2026-06-01T02:01:00Z", "build_report", "rep",
            [dataset("mart")], [dataset("report")],
        ),
    ]  # fmt: skip
    with open_service(pg_server, template_db, tmp_path, "never-written") as (_, client):
        api = Api(client, NS, DS_NS)
        api.post(events)
        for name, via in (("mart", "seed"), ("report", "mart")):
            fresh = api.get(f"/datasets/{api.dataset_id(name)}")["freshness"]
            assert [
                (r["reason"], r["run"]["id"], r["dataset"]["name"]) for r in fresh["stale_reasons"]
            ] == [("upstream_failed", run_id("seed"), via)]
