"""Issue 48, items 1, 6, 9 and 10, through the real processes (`metastore api` and
`metastore projector`, events posted to `/api/v1/lineage`): a dataset version is what a
successful write produced, `/runs?state=&since=` bounds the time of that state, one rule
for which run writes, and a runId two jobs report.

By eventTime (June 2026):

    1st 01:10  spark_daily COMPLETEs writing orders_daily (order_id long, customer_id long,
               status string)
    1st 02:00  a Trino query reads orders_daily (bigint, bigint, varchar): a reader's view
    1st 03:00  spark_daily writes orders_daily again, spelled as Hive does (bigint, string)
    1st 00:00  nightly STARTs, and FAILs on the 2nd 00:30 (25 hours later)
    3rd 00:10  build writes orders (b0), build2 writes orders2 (c0)
    3rd 01:00  clicks_stream (STREAMING) RUNNING names clicks, ABORTs at 02:00; a reader
               reads clicks at 03:00
    4th 00:10  build COMPLETEs b1, which FAILs at 00:20 (posted in that order); build2's
               c1 the same, its FAIL posted first
    5th 00:00  report reads orders and orders2; 00:10 kpis writes daily_kpis (a0)
    6th 00:00  kpis' run a1 STARTs, FAILs at 00:10, and COMPLETEs on a retry at 01:10
    7th 00:00  first_job STARTs run `shared` writing alpha; at 00:05 second_job reports a
               COMPLETE with the same runId, reading gamma, writing alpha (a schema and
               column lineage) and beta
    8th        a run's FAIL folded in a later batch than its COMPLETE (SPLIT_FIRST, then
               SPLIT_SECOND)
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import Api, open_service, run_event, schema_facet

NS, DS_NS = "wv", "s3://wv"
SPARK = "https://github.com/OpenLineage/OpenLineage/tree/1.38.0/integration/spark"
TRINO = "https://github.com/OpenLineage/OpenLineage/tree/1.38.0/integration/trino"
SPARK_FIELDS = [("order_id", "long"), ("customer_id", "long"), ("status", "string")]
TRINO_FIELDS = [("order_id", "bigint"), ("customer_id", "bigint"), ("status", "varchar")]
HIVE_FIELDS = [("order_id", "BIGINT"), ("customer_id", "BIGINT"), ("status", "STRING")]


def run_id(label: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"metastore-tests/writes-and-versions/{label}"))


def dataset(name: str, fields: list[tuple[str, str]] | None = None) -> dict[str, Any]:
    facets = {} if fields is None else {"schema": schema_facet(SPARK, fields)}
    return {"namespace": DS_NS, "name": name, "facets": facets}


def event(
    kind: str,
    when: str,
    job: str,
    label: str,
    inputs: list[Any],
    outputs: list[Any],
    producer: str = SPARK,
) -> dict[str, Any]:
    return run_event(kind, when, producer, (NS, job), run_id(label), inputs, outputs)


READER_SCHEMA = [
    event("START", "2026-06-01T01:00:00Z", "spark_daily", "s1", [], [dataset("orders_daily")]),
    event(
        "COMPLETE", "2026-06-01T01:10:00Z", "spark_daily", "s1",
        [], [dataset("orders_daily", SPARK_FIELDS)],
    ),
    event(
        "COMPLETE", "2026-06-01T02:00:00Z", "trino_query", "q1",
        [dataset("orders_daily", TRINO_FIELDS)], [dataset("orders_summary")], TRINO,
    ),
    event(
        "COMPLETE", "2026-06-01T03:00:00Z", "spark_daily", "s2",
        [], [dataset("orders_daily", HIVE_FIELDS)],
    ),
]  # fmt: skip
STATE_TIME = [
    event("START", "2026-06-01T00:00:00Z", "nightly", "n1", [], []),
    event("FAIL", "2026-06-02T00:30:00Z", "nightly", "n1", [], []),
    event("START", "2026-05-20T00:00:00Z", "nightly", "n0", [], []),
    event("FAIL", "2026-05-20T00:30:00Z", "nightly", "n0", [], []),
]


V0 = [("id", "long")]
V1 = [("id", "long"), ("extra", "string")]
STREAMING = {
    "jobType": {
        "_producer": SPARK,
        "_schemaURL": "https://openlineage.io/spec/facets/2-0-3/JobTypeJobFacet.json",
        "processingType": "STREAMING",
        "integration": "FLINK",
        "jobType": "JOB",
    }
}


def streaming(e: dict[str, Any]) -> dict[str, Any]:
    e["job"]["facets"] = STREAMING
    return e


WRITE_RULE = [
    event("START", "2026-06-03T00:00:00Z", "build", "b0", [], [dataset("orders")]),
    event("COMPLETE", "2026-06-03T00:10:00Z", "build", "b0", [], [dataset("orders", V0)]),
    event("COMPLETE", "2026-06-03T00:10:00Z", "build2", "c0", [], [dataset("orders2", V0)]),
    streaming(event("START", "2026-06-03T00:00:00Z", "clicks_stream", "st1", [], [])),
    streaming(
        event("RUNNING", "2026-06-03T01:00:00Z", "clicks_stream", "st1", [], [dataset("clicks")])
    ),
    streaming(event("ABORT", "2026-06-03T02:00:00Z", "clicks_stream", "st1", [], [])),
    event("COMPLETE", "2026-06-03T03:00:00Z", "clicks_report", "cr1", [dataset("clicks")], []),
    event("START", "2026-06-04T00:00:00Z", "build", "b1", [], [dataset("orders")]),
    event("COMPLETE", "2026-06-04T00:10:00Z", "build", "b1", [], [dataset("orders", V1)]),
    event("FAIL", "2026-06-04T00:20:00Z", "build", "b1", [], []),
    event("FAIL", "2026-06-04T00:20:00Z", "build2", "c1", [], []),
    event("START", "2026-06-04T00:00:00Z", "build2", "c1", [], [dataset("orders2")]),
    event("COMPLETE", "2026-06-04T00:10:00Z", "build2", "c1", [], [dataset("orders2", V1)]),
    event(
        "COMPLETE", "2026-06-05T00:00:00Z", "report", "r1",
        [dataset("orders"), dataset("orders2")], [],
    ),
    event("COMPLETE", "2026-06-05T00:10:00Z", "kpis", "a0", [], [dataset("daily_kpis")]),
    event("START", "2026-06-06T00:00:00Z", "kpis", "a1", [], [dataset("daily_kpis")]),
    event("FAIL", "2026-06-06T00:10:00Z", "kpis", "a1", [], [dataset("daily_kpis")]),
    event("COMPLETE", "2026-06-06T01:10:00Z", "kpis", "a1", [], [dataset("daily_kpis")]),
]  # fmt: skip


def column_lineage(source: str, fields: list[str]) -> dict[str, Any]:
    return {
        "_producer": SPARK,
        "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json",
        "fields": {
            f: {"inputFields": [{"namespace": DS_NS, "name": source, "field": f}]} for f in fields
        },
    }


ALPHA_BY_SECOND_JOB = dataset("alpha", V0)
ALPHA_BY_SECOND_JOB["facets"]["columnLineage"] = column_lineage("gamma", ["id"])
SHARED_RUN_ID = [
    event("START", "2026-06-07T00:00:00Z", "first_job", "shared", [], [dataset("alpha")]),
    event(
        "COMPLETE", "2026-06-07T00:05:00Z", "second_job", "shared",
        [dataset("gamma")], [ALPHA_BY_SECOND_JOB, dataset("beta", V0)],
    ),
]  # fmt: skip

# Folded in two steps (the second posted once the first is folded), so a run's end comes
# in a later batch than its COMPLETE (8th): ledger_build writes ledger V0 (l0) and V1 (l1);
# l2 COMPLETEs writing V0 again and l3 writing V2, and both FAIL in the second step. A
# STREAMING run names `events` RUNNING, a reader reads it, and the stream ABORTs after.
V2 = [("id", "long"), ("extra", "string"), ("more", "string")]
SPLIT_FIRST = [
    event("COMPLETE", "2026-06-08T00:10:00Z", "ledger_build", "l0", [], [dataset("ledger", V0)]),
    event("COMPLETE", "2026-06-08T01:10:00Z", "ledger_build", "l1", [], [dataset("ledger", V1)]),
    event("START", "2026-06-08T02:00:00Z", "ledger_build", "l2", [], [dataset("ledger")]),
    event("COMPLETE", "2026-06-08T02:10:00Z", "ledger_build", "l2", [], [dataset("ledger", V0)]),
    event("START", "2026-06-08T03:00:00Z", "ledger_build", "l3", [], [dataset("ledger")]),
    event("COMPLETE", "2026-06-08T03:10:00Z", "ledger_build", "l3", [], [dataset("ledger", V2)]),
    streaming(event("START", "2026-06-08T04:00:00Z", "events_stream", "es1", [], [])),
    streaming(
        event(
            "RUNNING", "2026-06-08T04:10:00Z", "events_stream", "es1",
            [], [dataset("events", V0)],
        )
    ),
    event("COMPLETE", "2026-06-08T04:30:00Z", "events_report", "er1", [dataset("events")], []),
]  # fmt: skip
SPLIT_SECOND = [
    event("FAIL", "2026-06-08T02:20:00Z", "ledger_build", "l2", [], []),
    event("FAIL", "2026-06-08T03:20:00Z", "ledger_build", "l3", [], []),
    streaming(event("ABORT", "2026-06-08T05:00:00Z", "events_stream", "es1", [], [])),
]


@pytest.fixture(scope="module")
def api(
    pg_server: Any, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Api]:
    log_dir: Path = tmp_path_factory.mktemp("writes-and-versions")
    with open_service(pg_server, template_db, log_dir, "writes") as (_, client):
        service = Api(client, NS, DS_NS)
        service.post(READER_SCHEMA + STATE_TIME + WRITE_RULE + SHARED_RUN_ID + SPLIT_FIRST)
        service.post(SPLIT_SECOND)
        yield service


def pairs(fields: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(f["name"], f["type"]) for f in fields]


# --- item 1: a reader's schema is an observation, never a version ----------------------


def test_a_readers_schema_is_no_version(api: Api) -> None:
    daily = api.dataset_id("orders_daily")
    versions = api.get(f"/datasets/{daily}/versions")["items"]
    # Trino's view is no version, and Hive's spelling of Spark's schema is the same one
    assert [(v["version"], pairs(v["fields"]), v["run"]["id"]) for v in versions] == [
        (1, SPARK_FIELDS, run_id("s1"))
    ]
    page = api.get(f"/datasets/{daily}")
    assert pairs(page["fields"]) == SPARK_FIELDS  # the writer's, not the last reader's
    assert pairs(page["facets"]["schema"]["fields"]) == HIVE_FIELDS  # the last write's facet
    (seen,) = page["reader_schemas"]
    assert pairs(seen["fields"]) == TRINO_FIELDS
    assert (seen["version"], seen["run"]["id"], seen["run"]["job"]["name"]) == (
        1,
        run_id("q1"),
        "trino_query",
    )
    # the reader met version 1
    runs = api.get(f"/datasets/{daily}/runs", role="input")["items"]
    assert [(r["id"], r["schema_version"]) for r in runs] == [(run_id("q1"), 1)]


def test_the_diff_compares_types_engine_neutrally(api: Api) -> None:
    daily = api.dataset_id("orders_daily")
    for start in ("2026-06-01T01:30:00Z", "2026-06-01T02:30:00Z"):
        diff = api.get(
            "/lineage/diff",
            node=f"dataset:{daily}",
            depth=0,
            **{"from": start, "to": "2026-06-01T04:00:00Z"},
        )
        assert diff["schema_changes"] == [], start
    as_of = api.get(f"/datasets/{daily}", as_of="2026-06-01T02:30:00Z")
    assert pairs(as_of["fields"]) == SPARK_FIELDS


# --- item 6: /runs?state=&since= bounds the time the run reached that state ------------


def test_failures_since_count_when_the_run_failed(api: Api) -> None:
    nightly = api.job_id("nightly")
    failed = api.get("/runs", job_id=nightly, state="FAIL", since="2026-06-01T12:00:00Z")
    assert [r["id"] for r in failed["items"]] == [run_id("n1")]  # started 24.5 hours before
    assert failed["total"] == 1
    assert failed["items"][0]["state_time"] == "2026-06-02T00:30:00Z"
    earlier = api.get("/runs", job_id=nightly, state="FAIL", until="2026-06-01T12:00:00Z")
    assert [r["id"] for r in earlier["items"]] == [run_id("n0")]
    # without a state, since bounds when a run was first seen, as before
    started = api.get("/runs", job_id=nightly, since="2026-06-01T12:00:00Z")
    assert started["items"] == []


# --- item 9: one rule for which run writes ----------------------------------------------


def test_a_run_that_ends_failed_wrote_nothing(api: Api) -> None:
    for name, good, failed in (("orders", "b0", "b1"), ("orders2", "c0", "c1")):
        page = api.get(f"/datasets/{api.dataset_id(name)}")
        fresh = page["freshness"]
        assert page["last_write_at"] == "2026-06-03T00:10:00Z", name
        assert (fresh["last_write"]["run"]["id"], fresh["last_write"]["at"]) == (
            run_id(good),
            "2026-06-03T00:10:00Z",
        ), name
        assert fresh["failed_attempt"]["run"]["id"] == run_id(failed), name
        assert [w["last_write_at"] for w in page["producers"]] == ["2026-06-03T00:10:00Z"]
    upstream = api.get("/lineage/runs", run_id=run_id("r1"), direction="upstream", depth=1)
    assert {(e["from"]["id"], e["dataset"]["name"]) for e in upstream["edges"]} == {
        (run_id("b0"), "orders"),
        (run_id("c0"), "orders2"),
    }
    as_of = api.get(f"/datasets/{api.dataset_id('orders')}", as_of="2026-06-04T12:00:00Z")
    assert as_of["freshness"]["last_write"]["run"]["id"] == run_id("b0")


def test_a_run_that_ends_failed_made_no_version(api: Api) -> None:
    for name in ("orders", "orders2"):  # (FAIL posted after, and before, the COMPLETE)
        versions = api.get(f"/datasets/{api.dataset_id(name)}/versions")["items"]
        assert [(v["version"], pairs(v["fields"])) for v in versions] == [(1, V0)], name
        assert pairs(api.get(f"/datasets/{api.dataset_id(name)}")["fields"]) == V0, name


def test_a_failure_folded_after_the_complete_undoes_its_version(api: Api) -> None:
    ledger = api.dataset_id("ledger")
    versions = api.get(f"/datasets/{ledger}/versions")["items"]
    assert [(v["version"], pairs(v["fields"]), v["run"]["id"]) for v in versions] == [
        (2, V1, run_id("l1")),
        (1, V0, run_id("l0")),
    ]
    page = api.get(f"/datasets/{ledger}")
    assert pairs(page["fields"]) == V1  # l2's rewrite of V0 and l3's V2 did not count
    assert page["freshness"]["last_write"]["run"]["id"] == run_id("l1")
    for moment in ("2026-06-08T02:15:00Z", "2026-06-08T03:15:00Z", "2026-06-08T09:00:00Z"):
        then = api.get(f"/datasets/{ledger}", as_of=moment)
        assert pairs(then["fields"]) == V1, moment
    diff = api.get(
        "/lineage/diff",
        node=f"dataset:{ledger}",
        depth=0,
        **{"from": "2026-06-08T01:30:00Z", "to": "2026-06-08T09:00:00Z"},
    )
    assert diff["schema_changes"] == []


def test_a_stream_that_aborts_in_a_later_batch_is_no_writer(api: Api) -> None:
    events = api.dataset_id("events")
    assert api.get(f"/datasets/{events}/versions")["items"] == []
    page = api.get(f"/datasets/{events}")
    assert page["last_write_at"] is None and page["fields"] is None
    upstream = api.get("/lineage/runs", run_id=run_id("er1"), direction="upstream", depth=1)
    assert upstream["edges"] == []


def test_a_stream_that_aborts_is_no_writer(api: Api) -> None:
    clicks = api.get(f"/datasets/{api.dataset_id('clicks')}")
    assert clicks["last_write_at"] is None and clicks["freshness"]["last_write"] is None
    upstream = api.get("/lineage/runs", run_id=run_id("cr1"), direction="upstream", depth=1)
    assert upstream["edges"] == []
    down = api.get("/lineage/runs", run_id=run_id("st1"), direction="downstream", depth=1)
    assert down["edges"] == []


def test_as_of_shows_the_runs_state_then(api: Api) -> None:
    kpis = api.dataset_id("daily_kpis")
    then = api.get(f"/datasets/{kpis}", as_of="2026-06-06T00:30:00Z")["freshness"]
    assert then["last_write"]["run"]["id"] == run_id("a0")
    assert [(r["reason"], r["run"]["id"], r["run"]["state"]) for r in then["stale_reasons"]] == [
        ("writer_failed", run_id("a1"), "FAIL")
    ]
    now = api.get(f"/datasets/{kpis}")["freshness"]
    assert (now["last_write"]["run"]["id"], now["last_write"]["run"]["state"]) == (
        run_id("a1"),
        "COMPLETE",
    )
    assert now["stale"] is False


# --- item 10: a runId two jobs report is the run of the job that reported it first -----


def test_a_run_id_two_jobs_report_is_the_first_jobs_run(api: Api) -> None:
    first, second = api.job_id("first_job"), api.job_id("second_job")
    shared = run_id("shared")
    assert api.get(f"/jobs/{second}")["latest_run"] is None
    assert api.get("/runs", job_id=second)["total"] == 0
    assert [r["id"] for r in api.get("/runs", job_id=first)["items"]] == [shared]
    assert api.get(f"/jobs/{first}")["latest_run"]["id"] == shared
    run = api.get(f"/runs/{shared}")
    assert (run["job"]["name"], run["state"]) == ("first_job", "START")
    # its events and its state as of now are its job's too
    events = api.get(f"/runs/{shared}/events")["items"]
    assert [(e["eventType"], e["job"]["name"]) for e in events] == [("START", "first_job")]
    then = api.get(f"/jobs/{first}", as_of="2026-06-07T12:00:00Z")["latest_run"]
    assert (then["id"], then["state"]) == (shared, "START")
    outputs = api.get(f"/runs/{shared}/datasets", direction="output")["items"]
    assert [d["name"] for d in outputs] == ["alpha"]
    graph = api.get("/lineage", node=f"job:{second}", depth=1)
    assert graph["edges"] == []
    # nor does what the second job's event names count: no dataset names, no version, no
    # column lineage
    for name in ("beta", "gamma"):
        assert api.get("/datasets", namespace=DS_NS, name=name)["items"] == [], name
    alpha = api.dataset_id("alpha")
    assert api.get(f"/datasets/{alpha}/versions")["items"] == []
    assert api.get(f"/datasets/{alpha}")["fields"] is None
    for view in ("latest", "cumulative"):
        found = api.get(f"/datasets/{alpha}/column-lineage", view=view)
        assert found["edges"] == [], view
