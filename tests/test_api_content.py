"""What the read API answers for the conformance scenarios (folded by the real projector),
over real HTTP: dataset lookups, lineage, column lineage, runs and their events, search."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from projections.runner import catch_up
from tests.apiserver import get, scenario_api, scenario_client
from tests.support import all_scenario_events, conformance_events, running

SPARK = ("s3a://warehouse", "sales.db/orders_daily")
HIVE = ("hive://hive-metastore:9083", "sales.orders_daily")
TRINO_NS = (
    "trino://trino-coordinator-default-0.trino-coordinator-default.prod.svc.cluster.local:8443"
)
TRINO = (TRINO_NS, "lakehouse.sales.orders_daily")
RAW_ORDERS = ("s3a://warehouse", "raw.db/orders")
ORDERS_ETL = ("prod-lineage", "orders_etl.execute_replace_table_as_select_command")
BQ_RUN = "01936893-9751-7a91-a2a0-a51101a3970c"
BQ_TASK_RUNS = {
    "01936893-9751-7b3c-8f76-8ac6d0e5f8a3": "BQ.upload",
    "01936893-9751-7b10-a4a7-cd7454722d0f": "BQ.copy",
    "01936893-9751-7150-bbde-96d39c5c4c8d": "BQ.download",
}


@pytest.fixture(scope="module")
def api(
    pg_server: Any, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[httpx.Client]:
    with scenario_client(pg_server, template_db, tmp_path_factory.mktemp("api"), 10) as client:
        yield client


def lookup(api: httpx.Client, name: tuple[str, str]) -> dict[str, Any]:
    items = get(api, "/datasets", namespace=name[0], name=name[1])["items"]
    assert len(items) == 1, (name, items)
    return items[0]  # type: ignore[no-any-return]


def _reported(column: dict[str, Any]) -> tuple[str, str]:
    """The dataset of a column-lineage field as the columnLineage facet named it."""
    return column["reported_as"]["namespace"], column["reported_as"]["name"]


def job_id(api: httpx.Client, name: tuple[str, str]) -> str:
    items = get(api, "/jobs", namespace=name[0], q=name[1])["items"]
    return next(j["id"] for j in items if j["name"] == name[1])  # type: ignore[no-any-return]


def test_spark_name_and_hive_symlink_are_one_dataset_trino_another(api: httpx.Client) -> None:
    spark, hive, trino = lookup(api, SPARK), lookup(api, HIVE), lookup(api, TRINO)
    assert spark["id"] == hive["id"]
    assert trino["id"] != spark["id"]
    # Its display name: the most table-like name, Hive's TABLE symlink, not the storage path.
    assert (spark["namespace"], spark["name"]) == HIVE

    dataset = get(api, f"/datasets/{spark['id']}")
    names = {(n["namespace"], n["name"]): (n["kind"], n["symlink_type"]) for n in dataset["names"]}
    assert names == {SPARK: ("emitted", None), HIVE: ("symlink", "TABLE")}
    assert [(w["job"]["namespace"], w["job"]["name"]) for w in dataset["producers"]] == [ORDERS_ETL]
    assert dataset["producers"][0]["lifecycle_state"] is None  # an ordinary writer
    trino_dataset = get(api, f"/datasets/{trino['id']}")
    assert [(n["namespace"], n["name"]) for n in trino_dataset["names"]] == [TRINO]
    assert [j["job"]["name"] for j in trino_dataset["consumers"]] == ["20260902_101500_00042_ab3kd"]


def test_unknown_name_finds_nothing_and_namespace_filter_sees_symlinks(api: httpx.Client) -> None:
    assert get(api, "/datasets", namespace=HIVE[0], name="sales.nothing")["items"] == []
    in_hive = get(api, "/datasets", namespace=HIVE[0])["items"]
    assert lookup(api, SPARK)["id"] in [d["id"] for d in in_hive]
    by_name = get(api, "/datasets", name=HIVE[1])["items"]
    assert [d["id"] for d in by_name] == [lookup(api, SPARK)["id"]]


def test_lineage_downstream_of_raw_orders(api: httpx.Client) -> None:
    raw, daily = lookup(api, RAW_ORDERS), lookup(api, SPARK)
    etl = job_id(api, ORDERS_ETL)
    graph = get(api, "/lineage", node=f"dataset:{raw['id']}", direction="downstream", depth=5)
    nodes = {(n["type"], n["namespace"], n["name"]): n["depth"] for n in graph["nodes"]}
    assert nodes == {
        ("dataset", *RAW_ORDERS): 0,
        ("job", *ORDERS_ETL): 1,
        ("dataset", *HIVE): 2,  # (under its display name)
    }
    assert {(e["from"]["key"], e["to"]["key"]) for e in graph["edges"]} == {
        (f"dataset:{raw['id']}", f"job:{etl}"),
        (f"job:{etl}", f"dataset:{daily['id']}"),
    }
    assert graph["truncated"] is False
    assert all(n["key"] == f"{n['type']}:{n['id']}" for n in graph["nodes"])


def test_lineage_depth_direction_and_node_limit(api: httpx.Client) -> None:
    raw, daily = lookup(api, RAW_ORDERS), lookup(api, SPARK)
    # `depth` counts jobs, so a graph ends on datasets: depth 1 is a job and its outputs.
    one_job = get(api, "/lineage", node=f"dataset:{raw['id']}", direction="downstream", depth=1)
    assert [(n["type"], n["depth"]) for n in one_job["nodes"]] == [
        ("dataset", 0),
        ("job", 1),
        ("dataset", 2),
    ]
    alone = get(api, "/lineage", node=f"dataset:{raw['id']}", direction="downstream", depth=0)
    assert [n["id"] for n in alone["nodes"]] == [raw["id"]]
    upstream = get(api, "/lineage", node=f"dataset:{daily['id']}", direction="upstream")
    assert {(n["namespace"], n["name"]) for n in upstream["nodes"]} == {
        RAW_ORDERS,
        ORDERS_ETL,
        HIVE,
    }
    # Nothing reads raw.db/orders' producer side: upstream of it is itself alone.
    nothing_up = get(api, "/lineage", node=f"dataset:{raw['id']}", direction="upstream")
    assert [n["id"] for n in nothing_up["nodes"]] == [raw["id"]]
    assert nothing_up["edges"] == []
    capped = get(api, "/lineage", node=f"dataset:{raw['id']}", direction="both", max_nodes=2)
    assert capped["truncated"] is True
    assert [n["depth"] for n in capped["nodes"]] == [0, 1]  # the nearest are kept
    # From a job, depth 0 is the job and its datasets.
    from_job = get(api, "/lineage", node=f"job:{job_id(api, ORDERS_ETL)}", depth=0)
    assert {n["name"] for n in from_job["nodes"]} == {ORDERS_ETL[1], RAW_ORDERS[1], HIVE[1]}


def test_column_lineage_of_cll_table(api: httpx.Client) -> None:
    reference = conformance_events("scenarios/CLL")[7]  # 8.json
    (output,) = [o for o in reference["outputs"] if o["name"] == "/tmp/cll_test/tbl1"]
    expected = {
        (i["namespace"], i["name"], i["field"], field): i.get("transformations", [])
        for field, spec in output["facets"]["columnLineage"]["fields"].items()
        for i in spec["inputFields"]
    }
    tbl1 = lookup(api, ("file", "/tmp/cll_test/tbl1"))
    answer = get(api, f"/datasets/{tbl1['id']}/column-lineage", depth=3)
    got = {
        (*_reported(e["from"]), e["from"]["field"], e["to"]["field"]): e["transformations"]
        for e in answer["edges"]
    }
    assert got == expected
    assert {field for *_, field in got} == {"ident", "trans", "agg"}
    assert ("file", "/tmp/cll_test/cll_source2", "c", "agg") in got
    source2 = lookup(api, ("file", "/tmp/cll_test/cll_source2"))
    assert all(e["to"]["dataset"]["id"] == tbl1["id"] for e in answer["edges"])
    assert source2["id"] in {e["from"]["dataset"]["id"] for e in answer["edges"]}
    # Downstream of a source field: the tbl1 fields derived from it.
    down = get(api, f"/datasets/{source2['id']}/column-lineage", direction="downstream")
    assert {(e["from"]["field"], e["to"]["field"]) for e in down["edges"]} == {
        (f, out) for ns, name, f, out in expected if name.endswith("cll_source2")
    }


def test_column_lineage_of_one_field(api: httpx.Client) -> None:
    tbl1 = lookup(api, ("file", "/tmp/cll_test/tbl1"))
    everything = get(api, f"/datasets/{tbl1['id']}/column-lineage")["edges"]
    agg = get(api, f"/datasets/{tbl1['id']}/column-lineage", field="agg")["edges"]
    assert agg and {e["to"]["field"] for e in agg} == {"agg"}
    assert agg == [e for e in everything if e["to"]["field"] == "agg"]
    source2 = lookup(api, ("file", "/tmp/cll_test/cll_source2"))
    down = get(api, f"/datasets/{source2['id']}/column-lineage", direction="downstream", field="c")
    assert {(e["from"]["field"], e["to"]["field"]) for e in down["edges"]} == {("c", "agg")}
    nothing = get(api, f"/datasets/{tbl1['id']}/column-lineage", field="no_such_field")
    assert nothing["edges"] == [] and nothing["truncated"] is False


def test_airflow_dag_run_has_its_tasks_as_children(api: httpx.Client) -> None:
    dag = get(api, f"/runs/{BQ_RUN}")
    assert dag["job"]["name"] == "BQ" and dag["state"] == "COMPLETE"
    assert dag["parent"] is None and dag["root"] is None
    assert {c["id"]: c["job"]["name"] for c in dag["children"]} == BQ_TASK_RUNS
    assert {c["state"] for c in dag["children"]} == {"COMPLETE"}
    for task_run, task in BQ_TASK_RUNS.items():
        run = get(api, f"/runs/{task_run}")
        assert run["job"]["name"] == task
        assert run["parent"]["id"] == BQ_RUN and run["parent"]["job"]["name"] == "BQ"
        assert run["parent"]["job"]["id"] == dag["job"]["id"]
        assert run["root"]["id"] == BQ_RUN
        assert run["duration_seconds"] > 0
    job = get(api, f"/jobs/{dag['job']['id']}")
    assert {c["name"] for c in job["children"]} == set(BQ_TASK_RUNS.values())
    assert job["latest_run"]["id"] == BQ_RUN and job["job_type"] == "DAG"
    runs_of_job = get(api, "/runs", job_id=dag["job"]["id"])["items"]
    assert [r["id"] for r in runs_of_job] == [BQ_RUN]


def test_run_inputs_outputs_and_raw_events_in_log_order(api: httpx.Client) -> None:
    run_id = "0191a3f2-7c1e-7a41-9b3e-3c6f0e1d01b8"
    run = get(api, f"/runs/{run_id}")
    assert [(d["namespace"], d["name"]) for d in run["inputs"]] == [RAW_ORDERS]
    assert [(d["namespace"], d["name"]) for d in run["outputs"]] == [HIVE]
    assert run["started_at"] == "2026-09-02T10:00:00Z"
    sent = [e for e in all_scenario_events() if e.get("run", {}).get("runId") == run_id]
    assert get(api, f"/runs/{run_id}/events")["items"] == sent
    # Page by page, one at a time, the same events in the same order.
    seen, cursor = [], None
    while True:
        page = get(api, f"/runs/{run_id}/events", limit=1, **({"cursor": cursor} if cursor else {}))
        seen += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == sent


def test_job_detail_and_filters(api: httpx.Client) -> None:
    etl = get(api, f"/jobs/{job_id(api, ORDERS_ETL)}")
    assert [(d["namespace"], d["name"]) for d in etl["inputs"]] == [RAW_ORDERS]
    assert [(d["namespace"], d["name"]) for d in etl["outputs"]] == [HIVE]
    assert etl["latest_run"]["state"] == "COMPLETE"
    airflow = get(api, "/jobs", namespace="airflow", limit=500)["items"]
    assert {j["namespace"] for j in airflow} == {"airflow"}
    assert {"BQ", "dag", "gcs_hook", "BQ.copy"} <= {j["name"] for j in airflow}
    assert [j["name"] for j in get(api, "/jobs", namespace="airflow", q="TASK_0")["items"]] == [
        "dag.task_0"
    ]
    complete = get(api, "/jobs", state="COMPLETE", limit=500)["items"]
    assert complete and {j["latest_run"]["state"] for j in complete} == {"COMPLETE"}


def test_runs_filters_by_state_and_time(api: httpx.Client) -> None:
    since = get(api, "/runs", since="2026-01-01T00:00:00Z")["items"]
    assert {r["job"]["namespace"] for r in since} == {"prod-lineage"}
    until = get(api, "/runs", until="2026-01-01T00:00:00Z", limit=500)["items"]
    assert until and all(r["first_seen"] < "2026" for r in until)
    assert {r["id"] for r in since}.isdisjoint(r["id"] for r in until)
    firsts = [r["first_seen"] for r in until]
    assert firsts == sorted(firsts, reverse=True)  # newest first


def test_dataset_schema_and_versions(api: httpx.Client) -> None:
    tbl1 = get(api, f"/datasets/{lookup(api, ('file', '/tmp/cll_test/tbl1'))['id']}")
    assert [f["name"] for f in tbl1["fields"]] == ["ident", "trans", "agg"]
    versions = get(api, f"/datasets/{tbl1['id']}/versions")["items"]
    assert versions[0]["fields"] == tbl1["fields"]
    assert [v["version"] for v in versions] == list(range(len(versions), 0, -1))


def test_search_ranks_exact_then_prefix_then_substring(api: httpx.Client) -> None:
    hits = get(api, "/search", q="bq")["items"]
    assert hits[0] == {**hits[0], "type": "job", "name": "BQ", "match": "exact"}
    matches = [h["match"] for h in hits]
    assert matches == sorted(matches, key=["exact", "prefix", "substring"].index)
    assert {"BQ.copy", "BQ.upload"} <= {h["name"] for h in hits if h["match"] == "prefix"}
    symlinked = get(api, "/search", q="sales.orders_daily")["items"]
    ids = {h["id"] for h in symlinked if h["type"] == "dataset"}
    assert ids == {lookup(api, SPARK)["id"], lookup(api, TRINO)["id"]}  # hive name finds Spark's


def test_search_by_type_and_namespace_with_namespaces_among_the_hits(api: httpx.Client) -> None:
    everything = get(api, "/search", q="a", limit=500)
    assert {h["type"] for h in everything["items"]} == {"job", "dataset", "namespace"}
    assert (everything["total"], everything["total_is_exact"]) == (len(everything["items"]), True)
    namespaces = get(api, "/search", q="hive", type="namespace")["items"]
    assert [(h["name"], h["match"]) for h in namespaces] == [
        ("hive://dataproc-producer-test-m:9083", "prefix"),
        ("hive://hive-metastore:9083", "prefix"),
        ("hdfs://dataproc-producer-test-m/user/hive/warehouse", "substring"),
    ]
    assert all(set(h) == {"type", "name", "match"} for h in namespaces)
    # several types, comma-separated: the hits of those types, in the same order
    some = get(api, "/search", q="a", type="namespace,job", limit=500)["items"]
    assert some == [h for h in everything["items"] if h["type"] in ("namespace", "job")]
    # a namespace: its jobs, the datasets that count in it, itself
    in_airflow = get(api, "/search", q="bq", namespace="airflow")
    assert {h["name"] for h in in_airflow["items"]} == {"BQ", "BQ.copy", "BQ.download", "BQ.upload"}
    assert in_airflow["total"] == 4
    bucket = get(api, "/search", q="txt", namespace="gs://mock-bucket", limit=500)["items"]
    listed = get(api, "/datasets", namespace="gs://mock-bucket", q="txt", limit=500)["items"]
    assert bucket and {h["id"] for h in bucket} == {d["id"] for d in listed}
    # pages of a filtered search walk the same list
    first = get(api, "/search", q="a", type="dataset", limit=3)
    rest = get(api, "/search", q="a", type="dataset", limit=500, cursor=first["next_cursor"])
    whole = get(api, "/search", q="a", type="dataset", limit=500)["items"]
    assert first["items"] + rest["items"] == whole and first["total"] == len(whole) > 3


def test_namespaces_and_status(api: httpx.Client) -> None:
    namespaces = {n["name"]: n for n in get(api, "/namespaces", limit=500)["items"]}
    assert namespaces["airflow"]["has_jobs"] is True
    assert namespaces["s3a://warehouse"]["has_datasets"] is True
    status = get(api, "/status")
    events = {json.dumps(e, sort_keys=True) for e in all_scenario_events()}
    assert status["log"]["events"] == len(events)
    assert status["projections"]
    for projection in status["projections"]:
        assert projection["position"] == status["log"]["position"]
        assert (projection["lag_events"], projection["lag_seconds"]) == (0, 0)
        assert projection["dead_letters"] == 0


def test_times_are_utc_whatever_the_servers_time_zone(
    pg_server: Any, template_db: str, tmp_path: Any
) -> None:
    """On a database whose sessions default to Asia/Kolkata (+05:30), the API still writes
    times in UTC, and they are the events' instants."""
    events = conformance_events("scenarios/seed_spark_trino")
    events += conformance_events("scenarios/airflow")
    started = {e["run"]["runId"]: e["eventTime"] for e in events if e["eventType"] == "START"}
    with (
        scenario_api(pg_server, template_db, tmp_path, events, time_zone="Asia/Kolkata") as (
            url,
            _,
        ),
        httpx.Client(base_url=url + "/api/v1", timeout=10) as api,
    ):
        runs = get(api, "/runs", limit=500)["items"]
        jobs = get(api, "/jobs", limit=500)["items"]
    assert len(runs) == len({e["run"]["runId"] for e in events}) > 0
    times = [r[f] for r in runs for f in ("state_time", "started_at", "ended_at", "first_seen")]
    times += [j[f] for j in jobs for f in ("first_seen", "last_seen")]
    assert all(t is None or t.endswith("Z") for t in times), times
    for run in runs:
        if run["id"] in started:
            sent = dt.datetime.fromisoformat(started[run["id"]])
            sent = sent if sent.tzinfo else sent.replace(tzinfo=dt.UTC)
            assert dt.datetime.fromisoformat(run["started_at"]) == sent


# Key order, spacing and the spelling of numbers as a producer wrote them; jsonb would have
# reordered the keys, spaced them and written 1500 for 1.50e3.
AS_WRITTEN = '{"zone":"eu-1","alpha":{"n":1.50e3,"list":[true,null,"x"]},"_producer":"p"}'


def test_facets_come_back_as_the_producer_wrote_them(
    pg_server: Any, template_db: str, tmp_path: Any
) -> None:
    """A run, job and dataset facet posted to ingest reads back from the API byte for byte
    (an output's facets from the event that wrote it: a COMPLETE)."""
    event = next(
        e
        for e in conformance_events("scenarios/seed_spark_trino")
        if e.get("outputs") and e["eventType"] == "COMPLETE"
    )
    output = event["outputs"][0]
    for part in (event["run"], event["job"], output):
        part.setdefault("facets", {})["custom"] = "@facet@"
    body = json.dumps(event).replace('"@facet@"', AS_WRITTEN)
    with (
        pg_server.database("facets", template_db) as url,
        running("api", url, tmp_path) as server,
        httpx.Client(base_url=server.base_url + "/api/v1", timeout=10) as api,
    ):
        posted = api.post(
            server.base_url + "/ingest/openlineage",
            content=body,
            headers={"content-type": "application/json"},
        )
        assert posted.status_code < 300, posted.text
        catch_up(url)
        job = job_id(api, (event["job"]["namespace"], event["job"]["name"]))
        dataset = lookup(api, (output["namespace"], output["name"]))["id"]
        paths = [f"/runs/{event['run']['runId']}", f"/jobs/{job}", f"/datasets/{dataset}"]
        bodies = [api.get(path).text for path in paths]
    assert all(f'"custom":{AS_WRITTEN}' in text for text in bodies), bodies


def test_a_large_run_facet_is_kept_in_the_log_and_served_as_sent(
    pg_server: Any, template_db: str, tmp_path: Any
) -> None:
    """A run facet over 8 KB (a Spark logical plan) is not copied into the runs table: the
    run's answer reads it from the event that set it, byte for byte, also after a later
    event of the run was folded in another batch."""
    start = next(e for e in conformance_events("scenarios/seed_spark_trino") if e.get("outputs"))
    start["eventType"] = "START"
    nodes = ",".join(f'{{"class":"Project","num-children":1,"n":{i}.50}}' for i in range(400))
    start["run"].setdefault("facets", {})["spark.logicalPlan"] = "@plan@"
    plan = f'{{"_producer":"p","_schemaURL":"s","plan":[{nodes}]}}'
    complete = {**start, "eventType": "COMPLETE", "eventTime": "2030-01-01T00:00:00Z"}
    complete["run"] = {"runId": start["run"]["runId"], "facets": {}}
    with (
        pg_server.database("large_facets", template_db) as url,
        running("api", url, tmp_path) as server,
        httpx.Client(base_url=server.base_url + "/api/v1", timeout=10) as api,
    ):
        for event in (start, complete):  # (two batches: the run is loaded back for the second)
            posted = api.post(
                server.base_url + "/ingest/openlineage",
                content=json.dumps(event).replace('"@plan@"', plan),
                headers={"content-type": "application/json"},
            )
            assert posted.status_code < 300, posted.text
            catch_up(url)
        answer = api.get(f"/runs/{start['run']['runId']}")
        with psycopg.connect(url) as conn:
            row = conn.execute(
                "SELECT length(facets::text) FROM readmodel.runs WHERE id = %s",
                (start["run"]["runId"],),
            ).fetchone()
    assert answer.status_code == 200, answer.text
    assert f'"spark.logicalPlan":{plan}' in answer.text
    assert answer.json()["state"] == "COMPLETE"
    assert row is not None and row[0] < len(plan) / 4
