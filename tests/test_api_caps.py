"""A job or run with many inputs answers a bounded document: the first 100 and the counts,
and the whole list a page at a time (a job with 100,000 inputs answered 8 MB)."""

from __future__ import annotations

import copy
from typing import Any

import httpx

from tests.apiserver import scenario_api
from tests.support import conformance_events

INPUTS = 250
RUN = "0191a3f2-7c1e-7a41-9b3e-3c6f0e1d0fff"


def wide_events() -> list[dict[str, Any]]:
    """The brief's Spark COMPLETE event, reading 250 tables instead of one."""
    event = copy.deepcopy(conformance_events("scenarios/seed_spark_trino")[1])
    event["run"]["runId"] = RUN
    event["job"]["name"] = "wide_etl"
    event["inputs"] = [
        {"namespace": "s3a://warehouse", "name": f"raw.db/part_{i:03d}"} for i in range(INPUTS)
    ]
    return [event]


def test_wide_job_and_run_answer_the_first_100_and_page_the_rest(
    pg_server: Any, template_db: str, tmp_path: Any
) -> None:
    with (
        scenario_api(pg_server, template_db, tmp_path, wide_events()) as (url, _),
        httpx.Client(base_url=url + "/api/v1", timeout=30) as api,
    ):
        (job,) = api.get("/jobs", params={"q": "wide_etl"}).json()["items"]
        detail = api.get(f"/jobs/{job['id']}").json()
        run = api.get(f"/runs/{RUN}").json()
        pages, cursor = [], None
        while True:
            params: dict[str, Any] = {"direction": "input", "limit": 100}
            if cursor:
                params["cursor"] = cursor
            page = api.get(f"/jobs/{job['id']}/datasets", params=params).json()
            pages.append(page["items"])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        run_page = api.get(f"/runs/{RUN}/datasets", params={"direction": "input", "limit": 500})
    assert (detail["input_count"], len(detail["inputs"])) == (INPUTS, 100)
    assert (run["input_count"], len(run["inputs"])) == (INPUTS, 100)
    names = [d["name"] for d in detail["inputs"]]
    assert names == [f"raw.db/part_{i:03d}" for i in range(100)]  # the first by name
    assert [len(p) for p in pages] == [100, 100, 50]
    everything = [d["name"] for p in pages for d in p]
    assert everything == [f"raw.db/part_{i:03d}" for i in range(INPUTS)]
    assert [d["name"] for d in run_page.json()["items"]] == everything
