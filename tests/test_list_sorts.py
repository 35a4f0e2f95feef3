"""/jobs sorted by its latest run (`sort=latest_run`, `failed_first`) on a store of 3,000
jobs with four runs each: every page is the one sorting every job gives (ties by name,
jobs never run last, a run started at the year 1 among them), and a first page reads some
rows a job of the page, not every job (issue 46: sorting every job took 441-779 ms at
1,000,000 events). /runs of one state reads that state's runs from the cursor on, and
/runs failed first reads a page of runs, not every run (1.8 s at 1,000,000 events).

The rows are written straight into the read models (the fold is not the subject here).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from metastore.api.pagination import capped
from tests.conftest import Server
from tests.support import (
    api_logging_plans,
    cadences_sql,
    plans_logged,
    reader_of,
    rows_read,
    running,
    seeded_store,
    server_log,
)

JOBS = 3_000
# Job i (namespace a, or b for every third) ran at T0 less i % 400 hours (ties: jobs 400
# apart share a start), and each of the three days before; its runs fail when i + day is a
# multiple of 7 (its latest run fails for every seventh job, aborts for every 77th). Every
# 50th job never ran; job 25 last ran at the year 1, the key of jobs never run.
SEED = [
    """
INSERT INTO readmodel.jobs (id, namespace, name, facets, first_seen, last_seen, latest_run_id)
SELECT md5('j' || i)::uuid, CASE WHEN i % 3 = 0 THEN 'b' ELSE 'a' END, 'job_' || i, '{}',
       now(), now(), CASE WHEN i % 50 <> 0 THEN md5('r' || i || '/0')::uuid END
FROM generate_series(1, 3000) i""",
    """
INSERT INTO readmodel.runs (id, job_id, job_namespace, job_name, state, state_time,
    started_at, first_seen, last_seen, first_seq, state_rank, state_seq)
SELECT md5('r' || i || '/' || d)::uuid, md5('j' || i)::uuid,
       CASE WHEN i % 3 = 0 THEN 'b' ELSE 'a' END, 'job_' || i,
       CASE WHEN (i + d) % 77 = 0 THEN 'ABORT' WHEN (i + d) % 7 = 0 THEN 'FAIL'
            ELSE 'COMPLETE' END, t, CASE WHEN i % 2 = 0 THEN t END, t, t, i, 2, i
FROM generate_series(1, 3000) i CROSS JOIN generate_series(0, 3) d
CROSS JOIN LATERAL (SELECT CASE WHEN i = 25 AND d = 0 THEN '0001-01-01T00:00:00Z'
    ELSE '2026-11-01T00:00:00Z'::timestamptz - make_interval(hours => i % 400, days => d)
    END::timestamptz AS t) x
WHERE i % 50 <> 0""",
    """
INSERT INTO readmodel.namespaces (name, first_seen, last_seen)
SELECT unnest(ARRAY['a', 'b']), now(), now()""",
    "VACUUM ANALYZE",
]
# Every job in each sort's order, as sorting them all does (the order /jobs documents).
TIME = "coalesce(coalesce(r.started_at, r.first_seen), '0001-01-01T00:00:00Z')"
ORDERS = {
    "latest_run": f"{TIME} DESC, j.namespace, j.name",
    "failed_first": "CASE WHEN r.state IN ('FAIL', 'ABORT') THEN 0 ELSE 1 END,"
    f" {TIME} DESC, j.namespace, j.name",
}
SORTED = """SELECT j.name FROM readmodel.jobs j
LEFT JOIN readmodel.runs r ON r.id = j.latest_run_id
WHERE j.namespace = ANY(%s) ORDER BY {order}"""


@pytest.fixture(scope="module")
def store(pg_server: Server, template_db: str) -> Iterator[str]:
    with seeded_store(pg_server, template_db, "list_sorts", SEED) as url:
        yield url


def _sorted(url: str, sort: str, namespaces: list[str]) -> list[str]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute(SORTED.format(order=ORDERS[sort]), (namespaces,))]


def _walk(
    client: httpx.Client, params: dict[str, Any], path: str = "/jobs", key: str = "name"
) -> list[str]:
    """The `key` of every item of list `path`, page by page (each page's total checked)."""
    names: list[str] = []
    totals = set()
    params = dict(params)
    while True:
        page = client.get(path, params=params).json()
        names += [j[key] for j in page["items"]]
        totals.add((page["total"], page["total_is_exact"]))
        if not page["next_cursor"]:
            assert totals == {capped(len(names))}, params
            return names
        params["cursor"] = page["next_cursor"]


RUNS_FAILED_FIRST = """SELECT id FROM readmodel.runs WHERE job_namespace = ANY(%s)
ORDER BY CASE WHEN state IN ('FAIL', 'ABORT') THEN 0 ELSE 1 END,
         coalesce(started_at, first_seen) DESC, id"""


def _runs_failed_first(url: str, namespaces: list[str]) -> list[str]:
    with psycopg.connect(url) as conn:
        return [str(r[0]) for r in conn.execute(RUNS_FAILED_FIRST, (namespaces,))]


def test_each_page_is_the_one_sorting_every_job_gives(store: str, tmp_path: Path) -> None:
    with (
        running("api", store, tmp_path, env={"METASTORE_AUTH": "disabled"}) as api,
        httpx.Client(base_url=api.base_url + "/api/v1", timeout=30) as client,
    ):
        for sort in ORDERS:
            expected = _sorted(store, sort, ["a", "b"])
            assert len(expected) == JOBS
            assert _walk(client, {"sort": sort, "limit": 97}) == expected, sort
            by_namespace = _walk(client, {"sort": sort, "namespace": "b", "limit": 61})
            assert by_namespace == _sorted(store, sort, ["b"]), sort
            # (past the end of the failed jobs and into the jobs never run, page by page)
            assert _walk(client, {"sort": sort, "limit": 7})[-70:] == expected[-70:], sort


def test_a_restricted_caller_pages_its_jobs_in_order(store: str, tmp_path: Path) -> None:
    with reader_of(store, tmp_path, "b", "sorts-") as client:
        for sort in ORDERS:
            assert _walk(client, {"sort": sort, "limit": 113}) == _sorted(store, sort, ["b"])
        runs = _walk(client, {"sort": "failed_first", "limit": 499}, "/runs", "id")
        assert runs == _runs_failed_first(store, ["b"])


def test_a_first_page_reads_a_page_of_jobs_not_every_job(
    store: str, pg_server: Server, tmp_path: Path
) -> None:
    log_file = server_log(pg_server)
    with (
        plans_logged(store, log_file) as logged,
        running("api", store, tmp_path, env={"METASTORE_AUTH": "disabled"}) as api,
        httpx.Client(base_url=api.base_url + "/api/v1", timeout=30) as client,
    ):
        for params in (
            {"sort": "latest_run"},
            {"sort": "failed_first"},
            {"sort": "latest_run", "namespace": "b"},
            {"sort": "failed_first", "namespace": "a"},
        ):
            logged()
            first = client.get("/jobs", params={**params, "limit": 20}).json()
            assert len(first["items"]) == 20 and first["next_cursor"], params
            nxt = {**params, "limit": 20, "cursor": first["next_cursor"]}
            assert len(client.get("/jobs", params=nxt).json()["items"]) == 20, params
            pages = [p for p in logged() if not p["Query Text"].startswith("SELECT count(*)")]
            assert len(pages) == 2, params
            # (the walk passes the runs that are not their job's latest, or not failed:
            # some 20 a job of the page here; sorting every job read 2,940 rows a node)
            for read, node in rows_read(pages):
                assert read <= JOBS // 4, (params, node)


def test_a_page_of_one_state_reads_its_runs_from_the_cursor(
    store: str, pg_server: Server, tmp_path: Path
) -> None:
    log_file = server_log(pg_server)
    with psycopg.connect(store) as conn:
        aborted = [
            str(r[0])
            for r in conn.execute(
                "SELECT id FROM readmodel.runs WHERE state = 'ABORT' ORDER BY first_seen DESC, id"
            )
        ]
    with (
        plans_logged(store, log_file) as logged,
        running("api", store, tmp_path, env={"METASTORE_AUTH": "disabled"}) as api,
        httpx.Client(base_url=api.base_url + "/api/v1", timeout=30) as client,
    ):
        logged()
        ids: list[str] = []
        params: dict[str, Any] = {"state": "ABORT", "limit": 20}
        for _ in range(3):
            page = client.get("/runs", params=params).json()
            ids += [r["id"] for r in page["items"]]
            params["cursor"] = page["next_cursor"]
        assert ids == aborted[:60]
        pages = [p for p in logged() if not p["Query Text"].startswith("SELECT count(*)")]
        assert len(pages) == 3
        # (one run in 77 aborted: filtering every run newest first read 1,540 for a page,
        # and each next page again from the first)
        for read, node in rows_read(pages):
            assert read <= 3 * 20, node


def test_runs_failed_first_pages_are_sorted_and_read_a_page(
    store: str, pg_server: Server, tmp_path: Path
) -> None:
    log_file = server_log(pg_server)
    expected = {
        ns: _runs_failed_first(store, namespaces)
        for ns, namespaces in (("", ["a", "b"]), ("b", ["b"]))
    }
    with (
        plans_logged(store, log_file) as logged,
        running("api", store, tmp_path, env={"METASTORE_AUTH": "disabled"}) as api,
        httpx.Client(base_url=api.base_url + "/api/v1", timeout=30) as client,
    ):
        logged()
        first = client.get("/runs", params={"sort": "failed_first", "limit": 20}).json()
        nxt = {"sort": "failed_first", "limit": 20, "cursor": first["next_cursor"]}
        assert [
            r["id"] for r in first["items"] + client.get("/runs", params=nxt).json()["items"]
        ] == expected[""][:40]
        pages = [p for p in logged() if not p["Query Text"].startswith("SELECT count(*)")]
        assert len(pages) == 2
        # (one run in seven failed; sorting every run read 11,760 rows a node)
        for read, node in rows_read(pages):
            assert read <= JOBS // 4, node
        for namespace, runs in expected.items():
            params = {
                "sort": "failed_first",
                "limit": 499,
                **({"namespace": namespace} if namespace else {}),
            }
            assert _walk(client, params, "/runs", "id") == runs, namespace


# --- filters with the run sorts (issue 46, n-runsorts) ----------------------------------
# The same jobs, but the latest run fails for every even job (1,470 of them: more than
# jobs.FEW, so their pages are walked), aborts for every 77th (a few: read from their runs),
# and the cadences of jobs not divisible by 3, or by 4, are late (2,250; 250 in namespace b).
FILTERED_SEED = [
    SEED[0],
    SEED[1].replace("(i + d) % 7 = 0", "(i + d) % 2 = 0"),
    *SEED[2:-1],
    cadences_sql("j", JOBS, "CASE WHEN i % 3 = 0 THEN 'b' ELSE 'a' END", "i % 3 <> 0 OR i % 4 = 0"),
    SEED[-1],
]
assert FILTERED_SEED[1] != SEED[1]
# Every job in each sort's order with what the filters test: its name, namespace, latest
# run's state and whether it is late.
JOBS_SORTED = """SELECT j.name, j.namespace, r.state,
       EXISTS (SELECT 1 FROM readmodel.job_cadence k WHERE k.job_id = j.id
               AND k.late_at <= now())
FROM readmodel.jobs j
LEFT JOIN readmodel.runs r ON r.id = j.latest_run_id ORDER BY {order}"""
RUNS_SORTED = """SELECT id::text, job_id::text, job_namespace, state, first_seen, state_time
FROM readmodel.runs
ORDER BY CASE WHEN state IN ('FAIL', 'ABORT') THEN 0 ELSE 1 END,
         coalesce(started_at, first_seen) DESC, id"""
MIDDLE = "2026-10-28T00:00:00Z"
# (job 14's id, as the seed makes it: one job's four runs)
JOB_14 = str(uuid.UUID(hashlib.md5(b"j14").hexdigest()))
JOB_FILTERS: list[dict[str, Any]] = [
    {"state": "FAIL"},
    {"state": "COMPLETE"},
    {"state": "ABORT"},
    {"state": "FAIL,ABORT"},
    {"state": "FAIL,COMPLETE"},
    {"state": "FAIL", "namespace": "b"},
    {"q": "job_1"},
    {"q": "job_29"},
    {"late": "true"},
    {"late": "false"},
    {"late": "true", "namespace": "b"},
    {"late": "true", "state": "FAIL"},
]
RUN_FILTERS: list[dict[str, Any]] = [
    {"state": "FAIL"},
    {"state": "COMPLETE"},
    {"state": "ABORT"},
    {"state": "ABORT,COMPLETE"},
    {"since": MIDDLE},
    {"until": MIDDLE},
    {"state": "FAIL", "since": MIDDLE},
    {"state": "ABORT,COMPLETE", "until": MIDDLE, "namespace": "b"},
    {"job_id": JOB_14},
]


@pytest.fixture(scope="module")
def filtered_store(pg_server: Server, template_db: str) -> Iterator[str]:
    with seeded_store(pg_server, template_db, "list_filters", FILTERED_SEED) as url:
        yield url


def _kept_jobs(url: str, sort: str, filters: dict[str, Any], namespaces: list[str]) -> list[str]:
    """The names of the jobs `filters` keeps, sorting every job as `sort` documents."""
    states = filters.get("state", "").split(",") if "state" in filters else None
    order = ORDERS.get(sort, "j.namespace, j.name")
    with psycopg.connect(url) as conn:
        rows = conn.execute(JOBS_SORTED.format(order=order)).fetchall()
    return [
        name
        for name, namespace, state, late in rows
        if namespace in namespaces
        and filters.get("namespace", namespace) == namespace
        and (states is None or state in states)
        and filters.get("q", "") in name
        and filters.get("late", str(late).lower()) == str(late).lower()
    ]


def _kept_runs(url: str, filters: dict[str, Any], namespaces: list[str]) -> list[str]:
    """The ids of the runs `filters` keeps, failed and aborted first, then by start."""
    states = filters["state"].split(",") if "state" in filters else None
    since, until = (
        dt.datetime.fromisoformat(filters[k]) if k in filters else None for k in ("since", "until")
    )
    with psycopg.connect(url) as conn:
        rows = conn.execute(RUNS_SORTED).fetchall()
    kept = []
    for id_, job_id, namespace, state, first_seen, state_time in rows:
        t = first_seen if states is None else state_time
        if (
            namespace in namespaces
            and filters.get("namespace", namespace) == namespace
            and filters.get("job_id", job_id) == job_id
            and (states is None or state in states)
            and (since is None or t >= since)
            and (until is None or t < until)
        ):
            kept.append(id_)
    return kept


def test_filtered_run_sorts_page_as_sorting_every_match(
    filtered_store: str, tmp_path: Path
) -> None:
    with (
        running("api", filtered_store, tmp_path, env={"METASTORE_AUTH": "disabled"}) as api,
        httpx.Client(base_url=api.base_url + "/api/v1", timeout=30) as client,
    ):
        for sort in ["name", *ORDERS]:
            for filters in JOB_FILTERS:
                expected = _kept_jobs(filtered_store, sort, filters, ["a", "b"])
                assert expected, (sort, filters)
                got = _walk(client, {"sort": sort, "limit": 97, **filters})
                assert got == expected, (sort, filters)
            # (past the failed jobs into the others, a few at a time)
            filters = {"state": "FAIL,COMPLETE", "namespace": "b"}
            expected = _kept_jobs(filtered_store, sort, filters, ["a", "b"])
            assert _walk(client, {"sort": sort, "limit": 7, **filters}) == expected, sort
        for filters in RUN_FILTERS:
            expected = _kept_runs(filtered_store, filters, ["a", "b"])
            assert expected, filters
            got = _walk(client, {"sort": "failed_first", "limit": 211, **filters}, "/runs", "id")
            assert got == expected, filters


def test_a_restricted_caller_pages_its_filtered_jobs_and_runs(
    filtered_store: str, tmp_path: Path
) -> None:
    with reader_of(filtered_store, tmp_path, "b", "filters-") as client:
        for sort in ORDERS:
            for filters in ({"state": "FAIL"}, {"late": "true"}, {"q": "job_1"}):
                expected = _kept_jobs(filtered_store, sort, filters, ["b"])
                got = _walk(client, {"sort": sort, "limit": 113, **filters})
                assert got == expected, (sort, filters)
        for filters in ({"state": "COMPLETE"}, {"since": MIDDLE}):
            expected = _kept_runs(filtered_store, filters, ["b"])
            got = _walk(client, {"sort": "failed_first", "limit": 499, **filters}, "/runs", "id")
            assert got == expected, filters


def test_a_filtered_page_reads_a_page_not_every_match(
    filtered_store: str, pg_server: Server, tmp_path: Path
) -> None:
    log_file = server_log(pg_server)
    lists = (
        [
            ("/jobs", {"sort": sort, **filters})
            for sort in ORDERS
            for filters in (
                {"state": "FAIL"},
                {"state": "COMPLETE"},
                {"state": "ABORT"},
                {"late": "true"},
            )
        ]
        + [
            # (not failed first: a name's failed jobs are few, so its first pages would pass
            # every failed run; it sorts the matches)
            ("/jobs", {"sort": "latest_run", "q": "job_1"}),
        ]
        + [
            ("/runs", {"sort": "failed_first", **filters})
            for filters in (
                {"state": "FAIL"},
                {"state": "COMPLETE"},
                {"since": MIDDLE},
                {"job_id": JOB_14},
            )
        ]
    )
    with api_logging_plans(filtered_store, log_file, tmp_path) as (logged, client):
        for path, params in lists:
            logged()
            first = client.get(path, params={**params, "limit": 20}).json()
            assert first["items"], (path, params)
            if first["next_cursor"]:
                nxt = {**params, "limit": 20, "cursor": first["next_cursor"]}
                assert client.get(path, params=nxt).json()["items"], (path, params)
            pages = [p for p in logged() if not p["Query Text"].startswith("SELECT count(*)")]
            assert 1 <= len(pages) <= 2, (path, params)
            # (sorting every match read 1,470-2,940 jobs or 5,880-11,760 runs a node)
            for read, node in rows_read(pages):
                assert read <= JOBS // 4, (path, params, node)
