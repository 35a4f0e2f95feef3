"""Reads over the namespaces a caller may read (issue 44 item 3, lists and pages).

Two teams through a real `metastore api` with METASTORE_TOKENS_FILE and
METASTORE_POLICY_FILE: sales (a Spark job in `spark-sales` writing `s3a://sales`) and
finance (a Trino query in `trino-finance` over `trino://finance`), one dataset with a
name on each side (the Spark output's `symlinks` facet names the table Trino reads), an
auditor who reads everything but no sensitive facet, and an admin. The Spark job also
reads a table only finance may see.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.apiserver import policy_clients_fixture
from tests.support import run_event

SPARK = "https://github.com/OpenLineage/OpenLineage/tree/1.23.0/integration/spark"
TRINO = "https://github.com/OpenLineage/OpenLineage/tree/1.38.0/integration/trino"
SALES_JOB = ("spark-sales", "orders_etl.execute_insert_into_hadoop_fs_relation_command")
FINANCE_JOB = ("trino-finance", "20260902_101500_00042_ab3kd")
SALES_RUN, FINANCE_RUN = (
    "0191a3f0-1c2d-7e3f-8a4b-5c6d7e8f9a01",
    "0191a3f0-1c2d-7e3f-8a4b-5c6d7e8f9a02",
)
QUERY = "SELECT region, sum(amount) FROM lakehouse.sales.orders_daily GROUP BY region"
PLAN = "InsertIntoHadoopFsRelationCommand s3a://sales/orders_daily, Filter (secret_col > 1)"

RAW = {"namespace": "s3a://sales", "name": "raw/orders"}
DAILY_TRINO = {"namespace": "trino://finance", "name": "lakehouse.sales.orders_daily"}
DAILY = {
    "namespace": "s3a://sales",
    "name": "orders_daily",
    "facets": {
        "symlinks": {
            "_producer": SPARK,
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json",
            "identifiers": [{**DAILY_TRINO, "type": "TABLE"}],
        }
    },
}
REVENUE = {"namespace": "trino://finance", "name": "lakehouse.finance.revenue"}


def _facet(producer: str, **body: Any) -> dict[str, Any]:
    return {"_producer": producer, "_schemaURL": "https://openlineage.io/spec/facets/x", **body}


def events() -> list[dict[str, Any]]:
    spark_facets = {
        "spark.logicalPlan": _facet(SPARK, plan=[{"class": PLAN}]),
        "spark_properties": _facet(SPARK, properties={"spark.hadoop.fs.s3a.secret.key": "x"}),
    }
    sales = [
        run_event(kind, when, SPARK, SALES_JOB, SALES_RUN, [RAW, REVENUE], [DAILY], spark_facets)
        for kind, when in (("START", "2026-09-02T10:00:00Z"), ("COMPLETE", "2026-09-02T10:05:00Z"))
    ]
    finance = []
    # (run by the sales team's run, as an orchestrator's task is: its parent is hidden from
    # finance)
    parent = _facet(
        TRINO,
        run={"runId": SALES_RUN},
        job={"namespace": SALES_JOB[0], "name": SALES_JOB[1]},
    )
    for kind, when in (("START", "2026-09-02T10:15:00Z"), ("COMPLETE", "2026-09-02T10:16:00Z")):
        event = run_event(
            kind,
            when,
            TRINO,
            FINANCE_JOB,
            FINANCE_RUN,
            [DAILY_TRINO],
            [REVENUE],
            {"parent": parent},
        )
        event["job"]["facets"] = {"sql": _facet(TRINO, query=QUERY, dialect="trino")}
        finance.append(event)
    return [*sales, *finance]


POLICY = {
    "admins": ["group:platform"],
    "read": [
        {"subjects": ["group:sales"], "namespaces": ["spark-sales", "s3a://sales*"]},
        {"subjects": ["group:finance"], "namespaces": ["trino-finance", "trino://finance*"]},
        {"subjects": ["auditor"], "namespaces": ["*"]},
    ],
    "sensitive": [
        {"subjects": ["group:sales"], "namespaces": ["spark-sales"]},
        {"subjects": ["group:finance"], "namespaces": ["trino-finance"]},
    ],
}
# (nobody: a token no rule names)
USERS = {
    "alice": ["sales"],
    "bob": ["finance"],
    "auditor": [],
    "root": ["platform"],
    "nobody": [],
}
SALES_NAMESPACES = ["s3a://sales", "spark-sales"]
FINANCE_NAMESPACES = ["trino-finance", "trino://finance"]
ALL_NAMESPACES = sorted(SALES_NAMESPACES + FINANCE_NAMESPACES)


clients = policy_clients_fixture("access", events, USERS, POLICY)


def get(client: httpx.Client, path: str, **params: Any) -> Any:
    answer = client.get(path, params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def ids(clients: dict[str, httpx.Client]) -> dict[str, str]:
    """The ids of the jobs, runs and datasets, as the admin sees them."""
    root = clients["root"]
    jobs = {j["namespace"]: j["id"] for j in get(root, "/jobs")["items"]}
    found = {"sales_job": jobs["spark-sales"], "finance_job": jobs["trino-finance"]}
    for key, ref in (("raw", RAW), ("daily", DAILY_TRINO), ("revenue", REVENUE)):
        (item,) = get(root, "/datasets", namespace=ref["namespace"], name=ref["name"])["items"]
        found[key] = item["id"]
    return found


def test_namespaces_list_only_the_readable_ones_with_their_counts(
    clients: dict[str, httpx.Client],
) -> None:
    expected = {
        "alice": SALES_NAMESPACES,
        "bob": FINANCE_NAMESPACES,
        "auditor": ALL_NAMESPACES,
        "root": ALL_NAMESPACES,
        "nobody": [],
    }
    for user, names in expected.items():
        answer = get(clients[user], "/namespaces")
        assert [n["name"] for n in answer["items"]] == names, user
        assert answer["total"] == len(names), user
        # a page of one still says how many there are in all
        assert get(clients[user], "/namespaces", limit=1)["total"] == len(names), user
    counts = {n["name"]: n for n in get(clients["alice"], "/namespaces")["items"]}
    assert counts["spark-sales"]["job_count"] == 1
    assert counts["s3a://sales"]["dataset_count"] == 2  # raw/orders and orders_daily


def test_job_and_run_lists_and_totals_hold_the_readable_ones(
    clients: dict[str, httpx.Client],
) -> None:
    for user, namespaces in (("alice", ["spark-sales"]), ("bob", ["trino-finance"])):
        jobs = get(clients[user], "/jobs")
        assert [j["namespace"] for j in jobs["items"]] == namespaces, user
        assert jobs["total"] == 1
        runs = get(clients[user], "/runs")
        assert [r["job"]["namespace"] for r in runs["items"]] == namespaces, user
        assert runs["total"] == 1
        # a page of none past the first still counts only what it may see
        assert get(clients[user], "/runs", limit=1, state="COMPLETE")["total"] == 1
    assert get(clients["root"], "/jobs")["total"] == 2
    assert get(clients["auditor"], "/runs")["total"] == 2
    # another team's namespace asked for by name: nothing, as an unknown one
    assert get(clients["alice"], "/jobs", namespace="trino-finance")["items"] == []
    assert get(clients["alice"], "/runs", namespace="trino-finance")["total"] == 0


def _same_as_unknown(client: httpx.Client, path: str, hidden: str, unknown: str) -> None:
    answer = client.get(path.format(hidden))
    absent = client.get(path.format(unknown))
    assert answer.status_code == absent.status_code == 404, (path, answer.text)
    shown, expected = answer.json(), absent.json()
    assert shown["type"] == expected["type"] and shown["title"] == expected["title"]
    assert shown["detail"] == expected["detail"].replace(unknown, hidden)


def test_another_teams_pages_are_404_as_an_unknown_id(clients: dict[str, httpx.Client]) -> None:
    known = ids(clients)
    unknown = "00000000-0000-4000-8000-000000000000"
    bob = clients["bob"]
    for path, hidden in (
        ("/jobs/{}", known["sales_job"]),
        ("/jobs/{}/datasets?direction=output", known["sales_job"]),
        ("/runs/{}", SALES_RUN),
        ("/runs/{}/datasets?direction=input", SALES_RUN),
        ("/runs/{}/events", SALES_RUN),
        ("/datasets/{}", known["raw"]),
        ("/datasets/{}/versions", known["raw"]),
        ("/datasets/{}/runs", known["raw"]),
    ):
        _same_as_unknown(bob, path, hidden, unknown)
    assert clients["alice"].get(f"/jobs/{known['finance_job']}").status_code == 404
    assert clients["alice"].get(f"/runs/{FINANCE_RUN}/events").status_code == 404
    # their own and the admin's are there
    for user, job, run in (("alice", "sales_job", SALES_RUN), ("root", "finance_job", FINANCE_RUN)):
        assert get(clients[user], f"/jobs/{known[job]}")["id"] == known[job]
        assert get(clients[user], f"/runs/{run}/events")["items"]


def test_sensitive_facets_only_where_the_policy_shows_them(
    clients: dict[str, httpx.Client],
) -> None:
    known = ids(clients)
    for user, shown in (("alice", True), ("auditor", False), ("root", True)):
        run = get(clients[user], f"/runs/{SALES_RUN}")
        assert ("spark.logicalPlan" in run["facets"]) is shown, user
        assert ("spark_properties" in run["facets"]) is shown, user
        events = get(clients[user], f"/runs/{SALES_RUN}/events")["items"]
        assert len(events) == 2
        assert (PLAN in json.dumps(events)) is shown, user
        assert all(e["run"]["runId"] == SALES_RUN for e in events)
    for user, shown in (("bob", True), ("auditor", False), ("root", True)):
        job = get(clients[user], f"/jobs/{known['finance_job']}")
        assert ("sql" in job["facets"]) is shown, user
        events = get(clients[user], f"/runs/{FINANCE_RUN}/events")["items"]
        assert (QUERY in json.dumps(events)) is shown, user


def test_etags_differ_by_what_the_caller_may_see(clients: dict[str, httpx.Client]) -> None:
    # the auditor and the admin read the same namespaces (equal bodies) but not the same
    # sensitive facets: neither's validator is the other's
    root = clients["root"].get("/namespaces")
    auditor = clients["auditor"].get("/namespaces")
    assert root.json() == auditor.json()
    assert root.headers["etag"] != auditor.headers["etag"]
    again = clients["auditor"].get("/namespaces", headers={"If-None-Match": root.headers["etag"]})
    assert again.status_code == 200
    mine = clients["auditor"].get("/namespaces", headers={"If-None-Match": auditor.headers["etag"]})
    assert mine.status_code == 304


def _names(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in items]


def test_dataset_lists_show_readable_names_only(clients: dict[str, httpx.Client]) -> None:
    alice, bob, root = clients["alice"], clients["bob"], clients["root"]
    daily_sales = ("s3a://sales", "orders_daily")
    daily_trino = (DAILY_TRINO["namespace"], DAILY_TRINO["name"])
    revenue = (REVENUE["namespace"], REVENUE["name"])
    raw = (RAW["namespace"], RAW["name"])
    listed = get(alice, "/datasets")
    # the joined dataset under its readable name, never its (hidden) display name
    assert _names(listed["items"]) == [daily_sales, raw] and listed["total"] == 2
    assert [d["name_count"] for d in listed["items"]] == [1, 1]
    assert get(alice, "/datasets", limit=1)["total"] == 2
    listed = get(bob, "/datasets")
    assert _names(listed["items"]) == [revenue, daily_trino] and listed["total"] == 2
    listed = get(root, "/datasets")
    assert _names(listed["items"]) == [raw, revenue, daily_trino] and listed["total"] == 3
    assert listed["items"][2]["name_count"] == 2
    # a hidden name matches nothing: not by substring, exact name or lookup
    for params in (
        {"q": "lakehouse"},
        {"name": DAILY_TRINO["name"]},
        {"namespace": DAILY_TRINO["namespace"]},
        {"namespace": DAILY_TRINO["namespace"], "name": DAILY_TRINO["name"]},
    ):
        assert get(alice, "/datasets", **params) == {
            "items": [],
            "next_cursor": None,
            "total": 0,
            "total_is_exact": True,
        }, params
    assert get(root, "/datasets", q="lakehouse")["total"] == 2
    (found,) = get(alice, "/datasets", q="orders_daily")["items"]
    assert (found["namespace"], found["name"]) == daily_sales
    assert found["matched_name"]["namespace"] == "s3a://sales"
    (found,) = get(alice, "/datasets", namespace="s3a://sales", name="orders_daily")["items"]
    assert (found["namespace"], found["name"]) == daily_sales


def test_a_joined_datasets_page_shows_each_side_its_own(clients: dict[str, httpx.Client]) -> None:
    daily = ids(clients)["daily"]
    page = get(clients["alice"], f"/datasets/{daily}")
    assert (page["namespace"], page["name"]) == ("s3a://sales", "orders_daily")
    assert [n["namespace"] for n in page["names"]] == ["s3a://sales"] and page["name_count"] == 1
    assert [p["job"]["namespace"] for p in page["producers"]] == ["spark-sales"]
    assert page["consumers"] == [] and page["consumer_count"] == 0
    assert [r["id"] for r in page["runs"]["items"]] == [SALES_RUN]
    then = get(clients["alice"], f"/datasets/{daily}", as_of="2026-09-03T00:00:00Z")
    assert (then["namespace"], then["name"]) == ("s3a://sales", "orders_daily")
    assert [n["namespace"] for n in then["names"]] == ["s3a://sales"] and then["name_count"] == 1
    assert then["consumers"] == [] and then["consumer_count"] == 0
    page = get(clients["bob"], f"/datasets/{daily}")
    assert (page["namespace"], page["name"]) == (DAILY_TRINO["namespace"], DAILY_TRINO["name"])
    assert [n["namespace"] for n in page["names"]] == ["trino://finance"]
    assert page["producers"] == [] and page["producer_count"] == 0
    assert [c["job"]["namespace"] for c in page["consumers"]] == ["trino-finance"]
    assert [r["id"] for r in get(clients["bob"], f"/datasets/{daily}/runs")["items"]] == [
        FINANCE_RUN
    ]
    # it is fresh, written by a run of a job bob may not see: the run without its job
    assert page["freshness"]["last_write"]["run"]["id"] == SALES_RUN
    assert page["freshness"]["last_write"]["run"]["job"] is None
    (item,) = get(clients["bob"], "/datasets", q="orders_daily")["items"]
    assert item["freshness"]["last_write"]["run"]["job"] is None
    page = get(clients["root"], f"/datasets/{daily}")
    assert page["name_count"] == 2 and page["producer_count"] == page["consumer_count"] == 1
    assert page["freshness"]["last_write"]["run"]["job"]["namespace"] == "spark-sales"


def _hits(answer: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(h["type"], h.get("namespace", ""), h["name"]) for h in answer["items"]]


def test_search_finds_and_counts_readable_names_only(clients: dict[str, httpx.Client]) -> None:
    daily_sales = ("dataset", "s3a://sales", "orders_daily")
    daily_trino = ("dataset", DAILY_TRINO["namespace"], DAILY_TRINO["name"])
    revenue = ("dataset", REVENUE["namespace"], REVENUE["name"])
    raw = ("dataset", RAW["namespace"], RAW["name"])
    job = ("job", *SALES_JOB)
    sales_namespaces = {("namespace", "", "s3a://sales"), ("namespace", "", "spark-sales")}
    expected = {
        ("alice", "orders"): {daily_sales, job, raw},
        ("bob", "orders"): {daily_trino},
        ("root", "orders"): {daily_trino, job, raw},  # the admin sees its display name
        ("alice", "lakehouse"): set(),
        ("bob", "lakehouse"): {daily_trino, revenue},
        ("root", "lakehouse"): {daily_trino, revenue},
        ("alice", "sales"): sales_namespaces,
        ("bob", "sales"): {daily_trino},
        ("root", "sales"): sales_namespaces | {daily_trino},
    }
    for (user, q), hits in expected.items():
        answer = get(clients[user], "/search", q=q)
        assert set(_hits(answer)) == hits, (user, q)
        assert answer["total"] == len(hits) and answer["total_is_exact"], (user, q)
        # a page of one counts the same
        assert get(clients[user], "/search", q=q, limit=1)["total"] == len(hits), (user, q)
    # each side's hit on the joined dataset matched by a name it may read
    (hit,) = get(clients["bob"], "/search", q="orders")["items"]
    assert hit["matched_name"]["namespace"] == DAILY_TRINO["namespace"]
    (hit,) = get(clients["alice"], "/search", q="orders", type="dataset", namespace="s3a://sales")[
        "items"
    ][:1]
    assert hit["matched_name"] == {"namespace": "s3a://sales", "name": "orders_daily"}


def test_job_and_run_pages_embed_only_visible_datasets(clients: dict[str, httpx.Client]) -> None:
    known = ids(clients)
    sales_side = [("s3a://sales", "orders_daily")]
    for user, inputs, outputs in (
        ("alice", [(RAW["namespace"], RAW["name"])], sales_side),
        ("root", [(RAW["namespace"], RAW["name"]), (REVENUE["namespace"], REVENUE["name"])], None),
    ):
        job = get(clients[user], f"/jobs/{known['sales_job']}")
        run = get(clients[user], f"/runs/{SALES_RUN}")
        for page in (job, run):
            assert _names(page["inputs"]) == inputs and page["input_count"] == len(inputs), user
            assert page["output_count"] == 1
            if outputs is not None:
                assert _names(page["outputs"]) == outputs, user
        for path in (f"/jobs/{known['sales_job']}/datasets", f"/runs/{SALES_RUN}/datasets"):
            assert _names(get(clients[user], path, direction="input")["items"]) == inputs
    # the admin sees the joined dataset under its display name, alice under hers
    (output,) = get(clients["root"], f"/jobs/{known['sales_job']}")["outputs"]
    assert (output["namespace"], output["name"]) == (DAILY_TRINO["namespace"], DAILY_TRINO["name"])
    listed = get(clients["alice"], f"/runs/{SALES_RUN}/datasets", direction="output")["items"]
    assert _names(listed) == sales_side
    job = get(clients["alice"], f"/jobs/{known['sales_job']}", as_of="2026-09-03T00:00:00Z")
    assert _names(job["inputs"]) == [(RAW["namespace"], RAW["name"])]
    assert _names(job["outputs"]) == sales_side


def test_what_points_at_a_hidden_job_does_not_name_it(clients: dict[str, httpx.Client]) -> None:
    known = ids(clients)
    bob, root = clients["bob"], clients["root"]
    # the finance query's parent is the sales run: bob sees that it has one, not whose
    (item,) = get(bob, "/jobs")["items"]
    assert item["parent"] is None
    assert get(bob, f"/jobs/{known['finance_job']}")["parent"] is None
    (run,) = get(bob, "/runs")["items"]
    assert run["parent"]["id"] == SALES_RUN and run["parent"]["job"] is None
    assert run["root"]["id"] == SALES_RUN and run["root"]["job"] is None
    page = get(bob, f"/runs/{FINANCE_RUN}")
    assert page["parent"]["job"] is None and page["root"]["job"] is None
    assert page["parent"]["state"] is None
    assert get(root, f"/jobs/{known['finance_job']}")["parent"]["namespace"] == "spark-sales"
    assert get(root, f"/runs/{FINANCE_RUN}")["parent"]["job"]["namespace"] == "spark-sales"
    # the sales run's children: the finance run for the admin, none for alice
    assert [c["id"] for c in get(root, f"/runs/{SALES_RUN}")["children"]] == [FINANCE_RUN]
    assert get(clients["alice"], f"/runs/{SALES_RUN}")["children"] == []
    assert get(clients["alice"], f"/jobs/{known['sales_job']}")["child_count"] == 0
    assert get(root, f"/jobs/{known['sales_job']}")["child_count"] == 1
    # a run's events leave out the datasets of namespaces the reader may not read
    for user, inputs in (("alice", [RAW["name"]]), ("root", [RAW["name"], REVENUE["name"]])):
        events = get(clients[user], f"/runs/{SALES_RUN}/events")["items"]
        assert [[d["name"] for d in e["inputs"]] for e in events] == [inputs, inputs], user


def test_a_principal_no_rule_names_sees_nothing(clients: dict[str, httpx.Client]) -> None:
    nobody = clients["nobody"]
    for path in ("/jobs", "/runs", "/datasets", "/namespaces"):
        answer = get(nobody, path)
        assert answer["items"] == [] and answer["total"] == 0, path
    assert get(nobody, "/search", q="o")["total"] == 0
    assert nobody.get(f"/runs/{SALES_RUN}").status_code == 404


def test_unrestricted_reads_run_statements_without_any_visibility_condition() -> None:
    # (nothing configured: the hot path's statements are exactly the unfiltered ones)
    from metastore.api import datasets, jobs, namespaces, runs, search

    by_access = [
        {r: s[0] for r, s in namespaces.STATEMENTS.items()},
        jobs.GET_JOB,
        jobs.GET_JOB_AS_OF,
        jobs.LISTS_JOBS,
        jobs.DATASETS_PAGES,
        runs.GET_RUN,
        runs.LISTS_RUNS,
        datasets.GET_DATASETS,
        datasets.GET_DATASETS_AS_OF,
        datasets.LISTS_VERSIONS,
        datasets.READERS_SCHEMAS,
        datasets.LOOKUPS,
        {r: datasets.runs_of_dataset(True, "started", True, r) for r in (False, True)},
        {
            r: "".join(t.template + t.where(True) for t in search.TIERS[r].values())
            for r in (False, True)
        },
    ]
    for statements in by_access:
        assert "%(readable)s" not in statements[False]
        assert "%(readable)s" in statements[True]
        assert "/*visible" not in statements[False] + statements[True]
