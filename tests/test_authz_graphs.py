"""Graphs and the export feed computed over the namespaces a principal may read, through
the real processes (`metastore api` and `metastore projector` with METASTORE_TOKENS_FILE,
METASTORE_POLICY_FILE and the brief's catalog map).

The brief's example by three teams: sales' Spark job (namespace `spark-sales`) writes
s3a://warehouse sales.db/orders_daily (Hive's sales.orders_daily, a symlink); finance's
Trino query (`trino-finance`) reads it as lakehouse.sales.orders_daily (joined to the Hive
name by the catalog map) and writes iceberg.finance.revenue (a catalog the map does not
know: a Trino name only); marketing's Airflow task (`airflow-marketing`) builds
s3a://marketing campaigns from the revenue. A hidden node is cut: absent with its edges,
and the walk never passes through it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support import (
    BRIEF_CATALOGS,
    TRINO,
    access_env,
    bearer_clients,
    catalogs_env,
    open_service,
    run_event,
    wait_until_folded,
)

PRODUCER = "https://github.com/stackabletech/metastore/tests/authz"
WAREHOUSE, HIVE, MARKETING = "s3a://warehouse", "hive://hive-metastore:9083", "s3a://marketing"
SPARK_RUN = "0191a3f2-7c1e-7a41-9b3e-3c6f0e1d0aa1"
TRINO_RUN = "0191a3f9-1d2a-7c55-8e0f-9d13a4b20aa2"
AIRFLOW_RUN = "0191a400-2b3c-7d66-9f10-ae24b5c30aa3"
BEFORE_TRINO = "2026-09-02T10:10:00Z"
POLICY = {
    "admins": ["group:platform"],
    "read": [
        {"subjects": ["group:sales"], "namespaces": ["spark-sales", WAREHOUSE, "hive://*"]},
        {"subjects": ["group:finance"], "namespaces": ["trino-finance", "trino://*"]},
        {"subjects": ["group:marketing"], "namespaces": ["airflow-marketing", MARKETING]},
        {"subjects": ["auditor"], "namespaces": ["*"]},
    ],
    "sensitive": [
        {"subjects": ["group:sales"], "namespaces": ["spark-sales"]},
        {"subjects": ["group:finance"], "namespaces": ["trino-finance"]},
    ],
    "export": ["sales", "finance", "marketing", "auditor", "admin"],
}
USERS = {
    "sales": ["sales"],
    "finance": ["finance"],
    "marketing": ["marketing"],
    "auditor": [],
    "admin": ["platform"],
}


def _facet(schema: str, **body: Any) -> dict[str, Any]:
    return {
        "_producer": PRODUCER,
        "_schemaURL": f"https://openlineage.io/spec/facets/{schema}",
        **body,
    }


def _column_lineage(fields: dict[str, tuple[str, str, str]]) -> dict[str, Any]:
    return _facet(
        "1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet",
        fields={
            out: {"inputFields": [{"namespace": ns, "name": name, "field": field}]}
            for out, (ns, name, field) in fields.items()
        },
    )


def _dataset(namespace: str, name: str, **facets: Any) -> dict[str, Any]:
    return {"namespace": namespace, "name": name, "facets": facets}


def _events() -> list[dict[str, Any]]:
    raw = {"namespace": WAREHOUSE, "name": "raw.db/orders"}
    daily = _dataset(
        WAREHOUSE,
        "sales.db/orders_daily",
        symlinks=_facet(
            "1-0-1/SymlinksDatasetFacet.json#/$defs/SymlinksDatasetFacet",
            identifiers=[{"namespace": HIVE, "name": "sales.orders_daily", "type": "TABLE"}],
        ),
        columnLineage=_column_lineage({"amount": (WAREHOUSE, "raw.db/orders", "amount")}),
    )
    spark_facets = {
        "spark_properties": _facet("spark", properties={"spark.app.name": "orders_etl"}),
        "spark.logicalPlan": _facet("spark", plan=[{"class": "InsertIntoHadoopFsRelation"}]),
    }
    trino_daily = {"namespace": TRINO, "name": "lakehouse.sales.orders_daily"}
    revenue = _dataset(
        TRINO,
        "iceberg.finance.revenue",
        columnLineage=_column_lineage({"total": (TRINO, "lakehouse.sales.orders_daily", "amount")}),
    )
    campaigns = {"namespace": MARKETING, "name": "campaigns"}
    spark, trino = ("spark-sales", "orders_etl"), ("trino-finance", "revenue_query")
    airflow = ("airflow-marketing", "campaigns.build")
    events = [
        run_event("START", "2026-09-02T10:00:00Z", PRODUCER, spark, SPARK_RUN, [raw], [daily]),
        run_event(
            "COMPLETE", "2026-09-02T10:04:00Z", PRODUCER, spark, SPARK_RUN, [raw], [daily],
            spark_facets,
        ),
        run_event("START", "2026-09-02T10:15:00Z", PRODUCER, trino, TRINO_RUN, [trino_daily], []),
        run_event(
            "COMPLETE", "2026-09-02T10:16:00Z", PRODUCER, trino, TRINO_RUN,
            [trino_daily], [revenue],
        ),
        run_event(
            "COMPLETE", "2026-09-02T11:00:00Z", PRODUCER, airflow, AIRFLOW_RUN,
            [{"namespace": TRINO, "name": "iceberg.finance.revenue"}], [campaigns],
            {"airflow": _facet("airflow", task={"bash_command": "make campaigns"})},
        ),
    ]  # fmt: skip
    # the query text of the Trino job
    events[3]["job"]["facets"] = {
        "sql": _facet("1-1-0/SQLJobFacet.json#/$defs/SQLJobFacet", query="SELECT 1")
    }
    # a DatasetEvent: its dataset's namespace decides
    dataset_event = {
        "eventTime": "2026-09-02T09:00:00Z",
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": raw,
    }
    return [dataset_event, *events]


@pytest.fixture(scope="module")
def users(
    pg_server: Any, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, httpx.Client]]:
    """A client per principal of the running service, after the three teams' events."""
    log_dir = tmp_path_factory.mktemp("authz-graphs")
    env = {
        **catalogs_env(log_dir, BRIEF_CATALOGS),
        **access_env(log_dir, POLICY, USERS, ["ingest", "read", "export"], "t-"),
    }
    with open_service(pg_server, template_db, log_dir, "authz", env) as (api, _):
        clients = bearer_clients(api.base_url, USERS, "t-")
        admin = clients["admin"]
        for event in _events():
            answer = admin.post("/api/v1/lineage", json=event)
            assert answer.status_code == 200, answer.text
        wait_until_folded(admin)
        yield clients
        for client in clients.values():
            client.close()


def _get(client: httpx.Client, path: str, **params: Any) -> Any:
    answer = client.get("/api/v1" + path, params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _ids(users: dict[str, httpx.Client]) -> dict[str, str]:
    """Node keys by name, as the admin sees them."""
    admin = users["admin"]
    daily = _get(admin, "/datasets", namespace=WAREHOUSE, name="sales.db/orders_daily")
    (item,) = daily["items"]
    graph = _get(admin, "/lineage", node=f"dataset:{item['id']}", depth=5)
    return {n["name"]: n["key"] for n in graph["nodes"]}


def _names(nodes: list[dict[str, Any]]) -> set[str]:
    return {n["name"] for n in nodes}


def _hidden(client: httpx.Client, path: str, **params: Any) -> dict[str, Any]:
    """The problem a hidden object answers: a 404, as for an unknown one."""
    answer = client.get("/api/v1" + path, params=params)
    assert answer.status_code == 404, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    return answer.json()  # type: ignore[no-any-return]


SALES_SIDE = {"orders_etl", "raw.db/orders", "sales.orders_daily"}
FINANCE_SIDE = {"lakehouse.sales.orders_daily", "revenue_query", "iceberg.finance.revenue"}


def test_each_team_sees_its_side_of_the_graph_and_the_walk_stops_at_what_it_may_not(
    users: dict[str, httpx.Client],
) -> None:
    keys = _ids(users)
    daily = keys["sales.orders_daily"]
    everything = _get(users["admin"], "/lineage", node=daily, depth=5)
    assert _names(everything["nodes"]) == SALES_SIDE | {
        "revenue_query", "iceberg.finance.revenue", "campaigns.build", "campaigns"
    }  # fmt: skip

    sales = _get(users["sales"], "/lineage", node=daily, depth=5)
    assert _names(sales["nodes"]) == SALES_SIDE  # the Trino side and beyond it: cut
    shown = {n["key"] for n in sales["nodes"]}
    assert all(e["from"]["key"] in shown and e["to"]["key"] in shown for e in sales["edges"])
    assert len(sales["edges"]) == 2 and sales["truncated"] is False
    node = next(n for n in sales["nodes"] if n["key"] == daily)
    # its Trino name is not counted; nothing hidden downstream to expand
    assert node["name_count"] == 2 and node["beyond"] == {"upstream": 0, "downstream": 0}

    finance = _get(users["finance"], "/lineage", node=daily, depth=5)
    assert _names(finance["nodes"]) == FINANCE_SIDE  # under its readable (Trino) name
    node = next(n for n in finance["nodes"] if n["key"] == daily)
    assert (node["namespace"], node["name_count"]) == (TRINO, 1)
    assert node["beyond"] == {"upstream": 0, "downstream": 0}
    # its last write is there, not who wrote it
    write = node["freshness"]["last_write"]
    assert write["at"] == "2026-09-02T10:04:00Z" and write["run"]["job"] is None
    assert "orders_etl" not in json.dumps(finance) and "warehouse" not in json.dumps(finance)
    revenue = next(n for n in finance["nodes"] if n["name"] == "iceberg.finance.revenue")
    assert revenue["beyond"] == {"upstream": 0, "downstream": 0}  # marketing's job: hidden

    # the node limit counts what is shown (the sales side fits, everything does not)
    assert _get(users["admin"], "/lineage", node=daily, depth=5, max_nodes=4)["truncated"]
    four = _get(users["sales"], "/lineage", node=daily, depth=5, max_nodes=4)
    assert _names(four["nodes"]) == SALES_SIDE and four["truncated"] is False

    # a node with a hidden neighbour still counts its visible ones
    limited = _get(users["finance"], "/lineage", node=daily, depth=0)
    assert _names(limited["nodes"]) == {"lakehouse.sales.orders_daily"}
    assert limited["nodes"][0]["beyond"] == {"upstream": 0, "downstream": 1}


def test_a_hidden_start_node_is_a_404_as_an_unknown_one(users: dict[str, httpx.Client]) -> None:
    keys = _ids(users)
    unknown = _hidden(users["finance"], "/lineage", node="job:00000000-0000-0000-0000-000000000001")
    hidden = _hidden(users["finance"], "/lineage", node=keys["orders_etl"])
    assert hidden["type"] == unknown["type"] and hidden["status"] == unknown["status"]
    _hidden(users["marketing"], "/lineage", node=keys["sales.orders_daily"])
    _hidden(users["sales"], "/impact", node=f"run:{TRINO_RUN}")
    _hidden(users["finance"], "/impact", node=keys["raw.db/orders"])
    _hidden(users["sales"], "/lineage/runs", run_id=TRINO_RUN)
    raw_id = keys["raw.db/orders"].split(":")[1]
    _hidden(users["finance"], f"/datasets/{raw_id}/column-lineage")
    _hidden(users["finance"], "/lineage/diff", node=keys["orders_etl"], **{"from": BEFORE_TRINO})


def test_as_of_cumulative_diff_and_impact_keep_to_the_readable_namespaces(
    users: dict[str, httpx.Client],
) -> None:
    keys = _ids(users)
    daily = keys["sales.orders_daily"]
    for view in ("latest", "cumulative"):
        then = _get(
            users["finance"], "/lineage", node=daily, as_of="2026-09-02T12:00:00Z", view=view
        )
        assert _names(then["nodes"]) == FINANCE_SIDE
        sales = _get(
            users["sales"], "/lineage", node=daily, as_of="2026-09-02T12:00:00Z", view=view
        )
        assert _names(sales["nodes"]) == SALES_SIDE

    diff = _get(users["finance"], "/lineage/diff", node=daily, **{"from": BEFORE_TRINO})
    assert _names(diff["nodes_added"]) == {"revenue_query", "iceberg.finance.revenue"}
    assert diff["nodes_removed"] == [] and len(diff["edges_added"]) == 2
    diff = _get(users["sales"], "/lineage/diff", node=daily, **{"from": BEFORE_TRINO})
    assert diff["nodes_added"] == [] and diff["edges_added"] == []
    diff = _get(users["admin"], "/lineage/diff", node=daily, **{"from": BEFORE_TRINO})
    assert _names(diff["nodes_added"]) == {
        "revenue_query", "iceberg.finance.revenue", "campaigns.build", "campaigns"
    }  # fmt: skip

    impact = _get(users["sales"], "/impact", node=f"run:{SPARK_RUN}")
    assert _names(impact["nodes"]) == {"orders_etl", "sales.orders_daily"}
    impact = _get(users["finance"], "/impact", node=daily)
    assert _names(impact["nodes"]) == FINANCE_SIDE
    impact = _get(users["admin"], "/impact", node=f"run:{SPARK_RUN}")
    assert _names(impact["nodes"]) == SALES_SIDE - {"raw.db/orders"} | {
        "revenue_query", "iceberg.finance.revenue", "campaigns.build", "campaigns"
    }  # fmt: skip


def test_column_and_run_lineage_stop_at_hidden_datasets_and_runs(
    users: dict[str, httpx.Client],
) -> None:
    keys = _ids(users)
    revenue = keys["iceberg.finance.revenue"].split(":")[1]

    def fields(client: httpx.Client, dataset: str, **params: Any) -> set[tuple[str, str]]:
        answer = _get(client, f"/datasets/{dataset}/column-lineage", depth=3, **params)
        for edge in answer["edges"]:  # each names its (visible) job
            assert [j["name"] for j in edge["jobs"]] == [edge["job"]["name"]]
            assert edge["job_count"] == 1
        return {(e["from"]["name"], e["to"]["name"]) for e in answer["edges"]}

    assert fields(users["admin"], revenue) == {
        ("sales.orders_daily", "iceberg.finance.revenue"),
        ("raw.db/orders", "sales.orders_daily"),
    }
    assert fields(users["finance"], revenue) == {
        ("lakehouse.sales.orders_daily", "iceberg.finance.revenue")
    }
    assert fields(users["finance"], revenue, as_of="2026-09-02T12:00:00Z") == {
        ("lakehouse.sales.orders_daily", "iceberg.finance.revenue")
    }
    daily = keys["sales.orders_daily"].split(":")[1]
    assert fields(users["sales"], daily, direction="both") == {
        ("raw.db/orders", "sales.orders_daily")
    }

    def runs(client: httpx.Client, run: str, direction: str) -> tuple[set[str], str]:
        answer = _get(client, "/lineage/runs", run_id=run, direction=direction)
        return {n["id"] for n in answer["nodes"]}, json.dumps(answer)

    assert runs(users["admin"], TRINO_RUN, "upstream")[0] == {TRINO_RUN, SPARK_RUN}
    found, text = runs(users["finance"], TRINO_RUN, "upstream")
    assert found == {TRINO_RUN} and "orders_etl" not in text and WAREHOUSE not in text
    found = runs(users["admin"], SPARK_RUN, "downstream")[0]
    assert found == {SPARK_RUN, TRINO_RUN, AIRFLOW_RUN}
    found, text = runs(users["sales"], SPARK_RUN, "downstream")
    assert found == {SPARK_RUN} and "revenue" not in text and TRINO not in text


def _export(client: httpx.Client, ndjson: bool = False, limit: int = 100) -> list[Any]:
    """Every event of the feed, page by page (`limit` events read a page)."""
    events, cursor, pages = [], "", 0
    while True:
        params = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        headers = {"Accept": "application/x-ndjson"} if ndjson else {}
        answer = client.get("/export/openlineage/events", params=params, headers=headers)
        assert answer.status_code == 200, answer.text
        if ndjson:
            page = [json.loads(line) for line in answer.text.splitlines()]
            next_cursor = answer.headers["X-Next-Cursor"]
        else:
            page, next_cursor = answer.json()["events"], answer.json()["next_cursor"]
        events += page
        pages += 1
        if next_cursor == cursor:
            return events
        cursor = next_cursor
        assert pages < 20


def test_the_export_feed_gives_whole_events_of_readable_namespaces_without_hidden_facets(
    users: dict[str, httpx.Client],
) -> None:
    def jobs(events: list[Any]) -> list[str]:
        return [e["job"]["name"] if "job" in e else e["dataset"]["name"] for e in events]

    everything = _export(users["admin"])
    assert len(everything) == 6
    assert "spark_properties" in everything[2]["run"]["facets"]
    # an event goes out whole or not at all: the Airflow task read finance's dataset
    assert jobs(_export(users["marketing"])) == []
    sales = _export(users["sales"], limit=1)  # sparse pages, the cursor still moves on
    assert jobs(sales) == ["raw.db/orders", "orders_etl", "orders_etl"]
    assert "spark_properties" in sales[2]["run"]["facets"]  # sales may see them
    finance = _export(users["finance"], ndjson=True, limit=2)
    assert jobs(finance) == ["revenue_query", "revenue_query"]
    assert finance[1]["job"]["facets"]["sql"]["query"] == "SELECT 1"
    # the auditor reads every namespace, and no sensitive facet of any
    audit = _export(users["auditor"])
    assert jobs(audit) == jobs(everything)
    text = json.dumps(audit)
    for facet in ("spark_properties", "spark.logicalPlan", '"sql"', '"airflow"'):
        assert facet not in text
    assert audit[2]["outputs"] == everything[2]["outputs"]  # the rest as stored
    assert jobs(_export(users["auditor"], ndjson=True)) == jobs(everything)


def test_a_long_poll_moves_past_what_its_reader_may_not_see(
    users: dict[str, httpx.Client],
) -> None:
    """(Appends an event: the last test of the module.)"""
    feed = "/export/openlineage/events"
    end = users["marketing"].get(feed, params={"limit": 1000}).json()["next_cursor"]
    hidden = run_event(
        "COMPLETE", "2026-09-04T00:00:00Z", PRODUCER, ("trino-finance", "late_query"),
        "0191a500-0000-7000-8000-000000000001", [], [],
    )  # fmt: skip
    assert users["admin"].post("/api/v1/lineage", json=hidden).status_code == 200
    waited = users["marketing"].get(feed, params={"cursor": end, "wait": 1}).json()
    assert waited["events"] == [] and waited["next_cursor"] != end  # sparse, not stuck
    again = users["finance"].get(feed, params={"cursor": end}).json()
    assert [e["job"]["name"] for e in again["events"]] == ["late_query"]
    assert again["next_cursor"] == waited["next_cursor"]
