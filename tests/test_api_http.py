"""The read API's HTTP contract: keyset pages stable under concurrent ingest, ETag and
If-None-Match, 400 and 404 as problem+json naming the parameter."""

from __future__ import annotations

import copy
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from metastore.api.openapi import build_document
from metastore.api.pagination import TOTAL_CAP
from projections.runner import catch_up
from tests.apiserver import scenario_api
from tests.logdata import append
from tests.support import conformance_events

LISTS = [
    ("/namespaces", {}),
    ("/jobs", {}),
    ("/runs", {}),
    ("/datasets", {}),
    ("/datasets", {"namespace": "gs://mock-bucket"}),
    ("/search", {"q": "a"}),
]


@pytest.fixture(scope="module")
def served(
    pg_server: Any, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[httpx.Client, str]]:
    with (
        scenario_api(pg_server, template_db, tmp_path_factory.mktemp("api")) as (url, db),
        httpx.Client(base_url=url + "/api/v1", timeout=10) as client,
    ):
        yield client, db


@pytest.fixture
def api(served: tuple[httpx.Client, str]) -> httpx.Client:
    return served[0]


def walk(api: httpx.Client, path: str, limit: int, **params: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = {**params, "limit": limit, **({"cursor": cursor} if cursor else {})}
        page = api.get(path, params=query)
        assert page.status_code == 200, page.text
        body = page.json()
        assert len(body["items"]) <= limit
        items += body["items"]
        cursor = body["next_cursor"]
        if cursor is None:
            return items


@pytest.mark.parametrize(("path", "params"), LISTS)
def test_small_pages_walk_the_same_list_as_one_big_page(
    api: httpx.Client, path: str, params: dict[str, str]
) -> None:
    everything = api.get(path, params={**params, "limit": 500}).json()
    assert everything["next_cursor"] is None
    assert len(everything["items"]) > 3
    assert walk(api, path, limit=2, **params) == everything["items"]


def test_default_limit_is_50_and_500_is_the_most(api: httpx.Client) -> None:
    assert len(api.get("/runs").json()["items"]) <= 50
    too_many = api.get("/runs", params={"limit": 501})
    assert too_many.status_code == 400
    assert too_many.json()["invalid-params"][0]["name"] == "limit"


def test_pages_are_stable_under_concurrent_ingest(served: tuple[httpx.Client, str]) -> None:
    api, database_url = served
    first = api.get("/jobs", params={"limit": 3}).json()
    # Meanwhile new jobs arrive, sorting before and after the page already read.
    events = []
    for namespace in ("aaa-before-the-cursor", "zzz-after-the-cursor"):
        event = copy.deepcopy(conformance_events("scenarios/seed_spark_trino")[0])
        event["job"]["namespace"] = namespace
        event["run"]["runId"] = str(uuid.uuid4())
        events.append(event)
    with psycopg.connect(database_url, autocommit=True) as conn:
        append(conn, events)
    catch_up(database_url)
    rest = walk(api, "/jobs", limit=3, cursor=first["next_cursor"])
    names = [(j["namespace"], j["name"]) for j in first["items"] + rest]
    assert len(names) == len(set(names))  # nothing twice
    assert names == sorted(names)  # nothing out of order
    assert "zzz-after-the-cursor" in {ns for ns, _ in names}
    assert "aaa-before-the-cursor" not in {ns for ns, _ in names}  # behind the cursor
    now = [(j["namespace"], j["name"]) for j in walk(api, "/jobs", limit=500)]
    assert set(names) == {j for j in now if j[0] != "aaa-before-the-cursor"}


@pytest.mark.parametrize("cursor", ["garbage", "bm90LWpzb24", "WyJydW5zIiwieCJd", "%%%"])
def test_a_cursor_not_handed_out_is_400(api: httpx.Client, cursor: str) -> None:
    response = api.get("/jobs", params={"cursor": cursor})
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["invalid-params"][0]["name"] == "cursor"


def test_a_cursor_of_another_list_is_400(api: httpx.Client) -> None:
    runs_cursor = api.get("/runs", params={"limit": 1}).json()["next_cursor"]
    assert api.get("/runs", params={"cursor": runs_cursor}).status_code == 200
    assert api.get("/jobs", params={"cursor": runs_cursor}).status_code == 400


def test_etag_and_if_none_match(api: httpx.Client) -> None:
    first = api.get("/jobs")
    etag = first.headers["etag"]
    assert etag.startswith('"') and api.get("/jobs").headers["etag"] == etag
    for header in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        again = api.get("/jobs", headers={"If-None-Match": header})
        assert again.status_code == 304, header
        assert again.content == b"" and again.headers["etag"] == etag
    changed = api.get("/jobs", headers={"If-None-Match": '"something-else"'})
    assert changed.status_code == 200 and changed.content == first.content
    assert api.get("/jobs", params={"limit": 1}).headers["etag"] != etag


@pytest.mark.parametrize(
    ("path", "params", "name"),
    [
        ("/jobs", {"limit": "0"}, "limit"),
        ("/jobs", {"limit": "ten"}, "limit"),
        ("/jobs", {"state": "DONE"}, "state"),
        ("/jobs", {"state": "null"}, "state"),
        ("/jobs", {"q": "a\x00b"}, "q"),
        ("/runs", {"since": "2024-01-01T00:00:00"}, "since"),
        ("/runs", {"until": "1700000000"}, "until"),
        ("/runs", {"job_id": "not-a-uuid"}, "job_id"),
        ("/lineage", {}, "node"),
        ("/lineage", {"node": "table:0191a3f2-7c1e-7a41-9b3e-3c6f0e1d01b8"}, "node"),
        ("/lineage", {"node": "job:0191a3f2-7c1e-7a41-9b3e-3c6f0e1d01b8", "depth": "21"}, "depth"),
        (
            "/lineage",
            {"node": "job:0191a3f2-7c1e-7a41-9b3e-3c6f0e1d01b8", "direction": "up"},
            "direction",
        ),
        ("/search", {}, "q"),
        ("/search", {"q": ""}, "q"),
    ],
)
def test_bad_parameters_are_400_naming_the_parameter(
    api: httpx.Client, path: str, params: dict[str, str], name: str
) -> None:
    response = api.get(path, params=params)
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == 400
    assert problem["invalid-params"][0]["name"] == name
    assert name in problem["detail"]


def test_a_parameter_given_twice_is_400(api: httpx.Client) -> None:
    response = api.get("/jobs?limit=5&limit=6")
    assert response.status_code == 400
    assert response.json()["invalid-params"][0]["name"] == "limit"


UNKNOWN = "00000000-0000-4000-8000-000000000000"


@pytest.mark.parametrize(
    "path",
    [
        f"/jobs/{UNKNOWN}",
        f"/runs/{UNKNOWN}",
        f"/runs/{UNKNOWN}/events",
        f"/datasets/{UNKNOWN}",
        f"/datasets/{UNKNOWN}/versions",
        f"/datasets/{UNKNOWN}/column-lineage",
        f"/lineage?node=dataset:{UNKNOWN}",
        f"/lineage?node=job:{UNKNOWN}",
    ],
)
def test_unknown_ids_are_404(api: httpx.Client, path: str) -> None:
    response = api.get(path)
    assert response.status_code == 404, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert UNKNOWN in response.json()["detail"]


@pytest.mark.parametrize(
    "path", ["/jobs/42", "/runs/not-a-run", "/datasets/x/versions", "/datasets/1-2/column-lineage"]
)
def test_malformed_ids_are_400(api: httpx.Client, path: str) -> None:
    response = api.get(path)
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/problem+json"


# --- strict parameters, time parameters, problems, totals ---------------------------------


def test_every_operation_answers_an_unknown_parameter_with_a_400_naming_it(
    served: tuple[httpx.Client, str],
) -> None:
    """Walks every operation of the OpenAPI document: a typo (`stat=FAIL`) never answers
    unfiltered data. Ingest and the health endpoints ignore parameters, as documented."""
    document = build_document()
    event = conformance_events("scenarios/seed_spark_trino")[0]  # stored already: a no-op
    base = str(served[0].base_url).rstrip("/").removesuffix("/api/v1")
    walked = 0
    with httpx.Client(base_url=base, timeout=10) as client:
        for path, operations in document["paths"].items():
            for method, op in operations.items():
                concrete = re.sub(r"\{[^}]+\}", UNKNOWN, path)
                body = {"json": [event] if path.endswith("batch") else event}
                response = client.request(
                    method.upper(),
                    concrete,
                    params={"stat": "FAIL"},
                    **(body if method == "post" else {}),
                )
                walked += 1
                if "ignore" in op["description"]:
                    assert response.status_code == 200, (method, path, response.text)
                    assert "400" not in op["responses"] or method == "post"
                    continue
                assert response.status_code == 400, (method, path, response.text)
                problem = response.json()
                assert [p["name"] for p in problem["invalid-params"]] == ["stat"], path
                assert "stat" in problem["detail"]
                documented = op["responses"]["400"]["description"]
                assert "not one of this operation's" in documented or "takes none" in documented
    assert walked == sum(len(ops) for ops in document["paths"].values()) > 20


def test_a_space_where_a_plus_was_meant_is_read_as_a_plus(
    served: tuple[httpx.Client, str],
) -> None:
    api = served[0]
    base = str(api.base_url).rstrip("/").removesuffix("/api/v1")
    encoded = api.get("/runs", params={"until": "2024-10-17T11:18:20+02:00", "limit": 500})
    # `+` put into the URL unencoded arrives as a space
    unencoded = api.get("/runs?limit=500&until=2024-10-17T11:18:20+02:00")
    assert encoded.status_code == unencoded.status_code == 200, unencoded.text
    assert unencoded.json() == encoded.json() and encoded.json()["items"]
    utc = api.get("/runs", params={"until": "2024-10-17T09:18:20Z", "limit": 500})
    assert utc.json() == encoded.json()
    node = f"dataset:{api.get('/datasets', params={'limit': 1}).json()['items'][0]['id']}"
    assert api.get(f"/lineage?node={node}&as_of=2026-12-04T00:00:00+00:00").status_code == 200
    feed = httpx.get(base + "/export/openlineage/events?since=2024-10-17T11:18:20+02:00")
    assert feed.status_code == 200, feed.text


def test_a_problem_carries_every_documented_member(served: tuple[httpx.Client, str]) -> None:
    api = served[0]
    schema = build_document()["components"]["schemas"]["Problem"]
    members = set(schema["properties"])
    assert set(schema["required"]) == members
    assert not [m for m, sub in schema["properties"].items() if "default" in sub]
    kinds = schema["properties"]["type"]["enum"]
    base = str(api.base_url).rstrip("/").removesuffix("/api/v1")
    answers = [
        api.get("/jobs", params={"stat": "FAIL"}),
        api.get("/jobs", params={"limit": "0"}),
        api.get(f"/jobs/{UNKNOWN}"),
        api.get("/jobs", params={"cursor": "garbage"}),
        api.post("/jobs"),
        httpx.post(base + "/ingest/openlineage", json={"eventTime": "x"}),
        httpx.get(base + "/export/openlineage/events", params={"limit": "0"}),
        httpx.get(base + "/nowhere"),
    ]
    for response in answers:
        problem = response.json()
        assert response.headers["content-type"] == "application/problem+json"
        assert set(problem) == members, problem  # null members are sent, never left out
        assert problem["type"] in kinds and problem["status"] == response.status_code
    assert answers[5].json()["pointer"] is not None and answers[2].json()["pointer"] is None


def test_totals_are_exact_up_to_10000_and_a_lower_bound_beyond(
    pg_server: Any, template_db: str, tmp_path: Path
) -> None:
    with scenario_api(pg_server, template_db, tmp_path, events=[]) as (url, database_url):
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(BULK_RUNS, {"n": TOTAL_CAP + 1})
        with httpx.Client(base_url=url + "/api/v1", timeout=30) as api:
            page = api.get("/runs", params={"limit": 1}).json()
            assert (page["total"], page["total_is_exact"]) == (TOTAL_CAP, False)
            assert len(page["items"]) == 1 and page["next_cursor"]
            one_job = api.get("/runs", params={"namespace": "bulk", "state": "COMPLETE,FAIL"})
            assert (one_job.json()["total"], one_job.json()["total_is_exact"]) == (TOTAL_CAP, False)
            none = api.get("/runs", params={"state": "FAIL"}).json()
            assert (none["total"], none["total_is_exact"], none["items"]) == (0, True, [])
            with psycopg.connect(database_url, autocommit=True) as conn:
                conn.execute("DELETE FROM readmodel.runs WHERE id = %s", (page["items"][0]["id"],))
            exact = api.get("/runs", params={"limit": 1, "namespace": "bulk"}).json()
            assert (exact["total"], exact["total_is_exact"]) == (TOTAL_CAP, True)


# 10,001 runs of one job, written straight into the read model (a fold of as many events
# would cost seconds and prove nothing more about counting).
BULK_RUNS = """
INSERT INTO readmodel.runs (id, job_id, job_namespace, job_name, state, state_time,
                            first_seen, last_seen, first_seq, state_rank, state_seq)
SELECT gen_random_uuid(), '00000000-0000-4000-8000-0000000000b1', 'bulk', 'job', 'COMPLETE',
       t, t, t, i, 2, i
FROM generate_series(1, %(n)s) AS i
CROSS JOIN LATERAL (SELECT timestamptz '2026-01-01' + i * interval '1 second' AS t) x
"""
