"""Run statistics and lateness learned from history (issue 45 items 1 and 2), through the
real processes: generated histories of known cadence (bench/cadences.py) and a namespace
of runs with known outcomes are posted to `metastore api`, folded by `metastore
projector`, and read back over HTTP.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import psycopg
import pytest

from bench.cadences import History, history
from tests.support import Api, plan_nodes, plans_logged, run_event, running, server_log

STATS_NS = "airflow://stats"
CADENCE_NS = "airflow://cadences"
PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.38.0/integration/airflow"
CASES = [
    ("hourly", "on_time"),
    ("hourly", "late"),
    ("daily", "on_time"),
    ("daily", "missed"),
    ("weekly", "on_time"),
    ("weekly", "late"),
    ("irregular", "on_time"),
    ("irregular", "late"),
]


def _time(when: dt.datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


# The moment the statistics are read as of: noon two days ago (whole UTC days around it,
# whatever the time the test runs).
NOW = dt.datetime.now(dt.UTC)
ON_TIME_MARGIN = dt.timedelta(minutes=15)
A = NOW.replace(hour=12, minute=0, second=0, microsecond=0) - dt.timedelta(days=2)
H = dt.timedelta(hours=1)


def _run(
    job: str, start: dt.timedelta, seconds: float | None, state: str, error: str | None = None
) -> list[dict[str, Any]]:
    """A run of `job` starting at A + `start`, ending `seconds` later in `state` (None: it
    only started)."""
    run = str(uuid.uuid4())
    began = A + start
    events = [run_event("START", _time(began), PRODUCER, (STATS_NS, job), run, [], [])]
    if seconds is not None:
        facets = {}
        if error is not None:
            facets["errorMessage"] = {
                "_producer": PRODUCER,
                "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json",
                "message": error,
                "programmingLanguage": "python",
            }
        end = began + dt.timedelta(seconds=seconds)
        events.append(run_event(state, _time(end), PRODUCER, (STATS_NS, job), run, [], [], facets))
    return events


def stats_events() -> list[dict[str, Any]]:
    return [
        # stats_job: its day of A (6 runs) and the day before (3), and one 3 days before
        *_run("stats_job", -6 * H, 60, "COMPLETE"),
        *_run("stats_job", -5 * H, 120, "COMPLETE"),
        *_run("stats_job", -4 * H, 180, "COMPLETE"),
        *_run("stats_job", -3 * H, 30, "FAIL", "boom"),
        *_run("stats_job", -1 * H, None, "START"),
        *_run("stats_job", -dt.timedelta(minutes=10), 900, "COMPLETE"),  # ends after A
        *_run("stats_job", -30 * H, 600, "COMPLETE"),
        *_run("stats_job", -28 * H, 1200, "COMPLETE"),
        *_run("stats_job", -26 * H, 40, "ABORT"),
        *_run("stats_job", -72 * H, 30, "COMPLETE"),
        # broken_job: completed a day before, then failed 2 h before A
        *_run("broken_job", -26 * H, 60, "COMPLETE"),
        *_run("broken_job", -2 * H, 60, "FAIL", "disk full"),
        # recovered_job: failed 20 h before A, then completed
        *_run("recovered_job", -20 * H, 60, "FAIL", "timeout"),
        *_run("recovered_job", -10 * H, 60, "COMPLETE"),
    ]


class Service(NamedTuple):
    api: Api
    histories: dict[tuple[str, str], History]
    database_url: str
    log_dir: Path


@pytest.fixture(scope="module")
def service(
    pg_server: Any, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    rng = random.Random(45)
    # Lateness is judged against the clock when read: an on-time job's next run is due
    # ON_TIME_MARGIN after this fixture starts (not at import: under xdist a module may run
    # minutes after collection), so a slow test session cannot make it late.
    start = dt.datetime.now(dt.UTC)
    histories = {
        case: history(
            *case,
            end=start + (ON_TIME_MARGIN if case[1] == "on_time" else dt.timedelta(0)),
            rng=rng,
            namespace=CADENCE_NS,
            name=f"{case[0]}_{case[1]}",
        )
        for case in CASES
    }
    events = stats_events() + [e for h in histories.values() for e in h.events]
    log_dir = tmp_path_factory.mktemp("run-health")
    with (
        pg_server.database("health", template_db) as url,
        running("api", url, log_dir) as process,
        running("projector", url, log_dir),
        httpx.Client(base_url=process.base_url, timeout=30) as client,
    ):
        for start in range(0, len(events), 500):
            answer = client.post("/api/v1/lineage/batch", json=events[start : start + 500])
            assert answer.status_code == 200, answer.text
        api = Api(client, STATS_NS, "s3://warehouse")
        api.post([])  # (waits until folded)
        yield Service(api, histories, url, log_dir)


@pytest.fixture(scope="module")
def api(service: Service) -> Api:
    return service.api


def _job_id(api: Api, namespace: str, name: str) -> str:
    (item,) = api.get("/jobs", namespace=namespace, q=name)["items"]
    return item["id"]  # type: ignore[no-any-return]


def _stats_job(api: Api) -> str:
    return _job_id(api, STATS_NS, "stats_job")


# --- item 1: run statistics ------------------------------------------------------------


def test_job_stats_count_runs_by_state_as_of_a_moment(api: Api) -> None:
    stats = api.get(f"/jobs/{_stats_job(api)}/stats", days=2, as_of=_time(A))
    day = A.replace(hour=0)
    assert stats["window_start"] == _time(day - dt.timedelta(days=1))
    assert stats["window_end"] == _time(A)
    assert stats["runs"] == 9
    # the run that ended after A was running then; the one three days back is outside
    assert stats["states"] == {"complete": 5, "fail": 1, "abort": 1, "running": 2}
    assert stats["duration_p50_seconds"] == 180
    assert stats["duration_p95_seconds"] == pytest.approx(1080)  # of 60, 120, 180, 600, 1200
    assert stats["days"] == [
        {
            "day": (day - dt.timedelta(days=1)).date().isoformat(),
            "runs": 3,
            "states": {"complete": 2, "fail": 0, "abort": 1, "running": 0},
            "duration_p50_seconds": 900,
        },
        {
            "day": day.date().isoformat(),
            "runs": 6,
            "states": {"complete": 3, "fail": 1, "abort": 0, "running": 2},
            "duration_p50_seconds": 120,
        },
    ]


def test_job_stats_now_see_the_run_that_completed_and_every_day_of_the_window(api: Api) -> None:
    stats = api.get(f"/jobs/{_stats_job(api)}/stats", days=7)
    assert stats["runs"] == 10
    assert stats["states"] == {"complete": 7, "fail": 1, "abort": 1, "running": 1}
    assert len(stats["days"]) == 7
    assert [d["runs"] for d in stats["days"]] == [0, 1, 0, 3, 6, 0, 0]
    assert stats["days"][-1]["day"] == NOW.date().isoformat()


def test_namespace_stats_name_failing_jobs_and_the_last_24_hours_failures(api: Api) -> None:
    stats = api.get("/namespace-stats", namespace=STATS_NS, as_of=_time(A))
    assert stats["job_count"] == 3
    assert stats["failing_job_count"] == 1
    (failing,) = stats["failing_jobs"]
    assert failing["job"]["name"] == "broken_job"
    assert failing["state"] == "FAIL"
    assert failing["error_message"] == "disk full"
    assert failing["failed_at"] == _time(A - 2 * H + dt.timedelta(seconds=60))
    # by when they failed: the ABORT 26 h before A ended outside the window
    assert stats["failure_count"] == 3
    assert [(f["job"]["name"], f["error_message"]) for f in stats["failures"]] == [
        ("broken_job", "disk full"),
        ("stats_job", "boom"),
        ("recovered_job", "timeout"),
    ]


def test_namespace_stats_as_of_before_a_failure_did_not_fail_yet(api: Api) -> None:
    before = A - 2 * H + dt.timedelta(seconds=30)  # broken_job's last run was running
    stats = api.get("/namespace-stats", namespace=STATS_NS, as_of=_time(before))
    # stats_job's latest run then was the one that failed 3 h before A
    assert [f["job"]["name"] for f in stats["failing_jobs"]] == ["stats_job"]
    # broken_job's FAIL not yet; stats_job's ABORT 26 h before A (+40 s) now in the window
    assert [(f["job"]["name"], f["state"]) for f in stats["failures"]] == [
        ("stats_job", "FAIL"),
        ("recovered_job", "FAIL"),
        ("stats_job", "ABORT"),
    ]


def test_namespace_stats_count_a_namespace_s_jobs_as_of_a_moment_from_an_index(
    pg_server: Any, template_db: str, tmp_path: Path
) -> None:
    """A namespace of 20,000 jobs (written straight into the read model: the count is what
    is measured): as of a moment, its jobs first seen by then are counted from an index
    alone, never by reading every job (60-90 ms at the benchmark's 50,000 jobs)."""
    log_file = server_log(pg_server)
    namespace, jobs = "airflow://many", 20_000
    with pg_server.database("many_jobs", template_db) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO readmodel.namespaces (name, has_jobs, first_seen, last_seen)"
                " VALUES (%s, true, %s, %s)",
                (namespace, A - 400 * H, A),
            )
            conn.execute(
                "INSERT INTO readmodel.jobs (id, namespace, name, first_seen, last_seen)"
                " SELECT gen_random_uuid(), %s, 'job_' || i, %s + i * interval '1 minute', %s"
                " FROM generate_series(1, %s) i",
                (namespace, A - 400 * H, A, jobs),
            )
            conn.execute("VACUUM ANALYZE readmodel.jobs")
        with (
            plans_logged(url, log_file) as logged,
            running("api", url, tmp_path, env={"METASTORE_AUTH": "disabled"}) as api,
        ):
            logged()
            as_of = _time(A - 400 * H + 10_000 * dt.timedelta(minutes=1))
            answer = httpx.get(
                f"{api.base_url}/api/v1/namespace-stats",
                params={"namespace": namespace, "as_of": as_of},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["job_count"] == 10_000
            plans = logged()
    scans = [
        node["Node Type"]
        for plan in plans
        for node in plan_nodes(plan["Plan"])
        if node.get("Relation Name") == "jobs" and node["Actual Loops"]  # (run, not planned)
    ]
    assert scans == ["Index Only Scan"], scans


def test_stats_of_what_does_not_exist_are_404_problems(api: Api) -> None:
    answer = api.client.get("/api/v1/namespace-stats", params={"namespace": "nowhere://x"})
    assert answer.status_code == 404
    assert answer.headers["content-type"] == "application/problem+json"
    answer = api.client.get(f"/api/v1/jobs/{uuid.uuid4()}/stats")
    assert answer.status_code == 404
    answer = api.client.get(f"/api/v1/jobs/{_stats_job(api)}/stats", params={"days": "0"})
    assert answer.status_code == 400
    assert answer.json()["invalid-params"][0]["name"] == "days"


def test_stats_of_a_namespace_the_reader_may_not_read_are_absent(service: Service) -> None:
    """With a policy, a reader sees the statistics of the namespaces it may read only."""
    tokens = service.log_dir / "tokens.json"
    tokens.write_text(json.dumps([{"name": "cockpit", "scopes": ["read"], "token": "t-cockpit"}]))
    policy = service.log_dir / "policy.json"
    policy.write_text(json.dumps({"read": [{"subjects": ["cockpit"], "namespaces": [CADENCE_NS]}]}))
    # another reader may read the datasets' namespace but none of their writers' jobs
    storage = service.log_dir / "policy-storage.json"
    storage.write_text(
        json.dumps({"read": [{"subjects": ["cockpit"], "namespaces": ["s3://warehouse"]}]})
    )
    env = {
        "METASTORE_AUTH": "enabled",
        "METASTORE_TOKENS_FILE": str(tokens),
        "METASTORE_POLICY_FILE": str(policy),
    }
    stats_job, hourly = _stats_job(service.api), _job_id(service.api, CADENCE_NS, "hourly_late")
    headers = {"Authorization": "Bearer t-cockpit"}
    with (
        running("api", service.database_url, service.log_dir, env=env) as guarded,
        httpx.Client(base_url=guarded.base_url + "/api/v1", headers=headers) as client,
    ):
        assert client.get("/namespace-stats", params={"namespace": STATS_NS}).status_code == 404
        readable = client.get("/namespace-stats", params={"namespace": CADENCE_NS})
        assert readable.status_code == 200
        assert readable.json()["late_job_count"] == 4
        assert client.get(f"/jobs/{stats_job}/stats").status_code == 404
        assert client.get(f"/jobs/{hourly}/stats").json()["lateness"]["status"] == "late"
    daily = service.api.dataset_id(service.histories[("daily", "missed")].dataset)
    assert service.api.get(f"/datasets/{daily}")["next_write"] is not None
    with (
        running(
            "api",
            service.database_url,
            service.log_dir,
            env={**env, "METASTORE_POLICY_FILE": str(storage)},
        ) as guarded,
        httpx.Client(base_url=guarded.base_url + "/api/v1", headers=headers) as client,
    ):
        page = client.get(f"/datasets/{daily}")
        assert page.status_code == 200, page.text
        assert page.json()["next_write"] is None  # its writer's job is not the reader's to see


# --- item 2: lateness learned from history --------------------------------------------


def test_each_job_s_cadence_and_lateness_are_learned_from_its_runs(
    service: Service,
) -> None:
    api, histories = service.api, service.histories
    for (cadence, truth), story in histories.items():
        job = api.get(f"/jobs/{_job_id(api, CADENCE_NS, story.job)}")
        lateness = job["lateness"]
        assert lateness is not None, story.job
        assert (lateness["cadence"], lateness["status"]) == (cadence, truth), (story.job, lateness)
        assert lateness["basis"] == ("start" if cadence == "irregular" else "nominal")


def test_jobs_filter_on_lateness(service: Service) -> None:
    api, histories = service.api, service.histories
    late = api.get("/jobs", namespace=CADENCE_NS, late="true")
    assert sorted(j["name"] for j in late["items"]) == sorted(
        h.job for (_, truth), h in histories.items() if truth != "on_time"
    )
    assert all(j["lateness"]["status"] in ("late", "missed") for j in late["items"])
    on_time = api.get("/jobs", namespace=CADENCE_NS, late="false")
    assert {j["lateness"]["status"] for j in on_time["items"]} == {"on_time"}
    assert late["total"] + on_time["total"] == len(histories)
    stats = api.get("/namespace-stats", namespace=CADENCE_NS)
    assert (stats["late_job_count"], stats["missed_job_count"]) == (4, 1)


def test_a_dataset_expects_its_next_write_from_its_writer(
    service: Service,
) -> None:
    api, histories = service.api, service.histories
    for case in (("daily", "missed"), ("hourly", "on_time")):
        story = histories[case]
        dataset = api.get(f"/datasets/{api.dataset_id(story.dataset)}")
        expected = dataset["next_write"]
        assert expected["job"]["name"] == story.job
        assert expected["status"] == case[1]
        job = api.get(f"/jobs/{expected['job']['id']}")
        assert expected["expected_at"] > job["lateness"]["next_expected"]


def _nodes(graph: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["key"]: n for n in graph["nodes"]}


@pytest.mark.parametrize("moment", ["now", "as_of"])
def test_graph_and_impact_nodes_show_the_lateness_of_their_pages(
    service: Service, moment: str
) -> None:
    """A job node of /lineage and /impact carries its page's `lateness`, a dataset node its
    page's `next_write`, now and as of a moment (where both are still judged now)."""
    api, histories = service.api, service.histories
    when = {} if moment == "now" else {"as_of": _time(dt.datetime.now(dt.UTC))}
    for case in (("hourly", "late"), ("daily", "missed"), ("weekly", "on_time")):
        story = histories[case]
        job = _job_id(api, CADENCE_NS, story.job)
        dataset = api.dataset_id(story.dataset)
        job_page = api.get(f"/jobs/{job}", **when)
        dataset_page = api.get(f"/datasets/{dataset}", **when)
        assert job_page["lateness"]["status"] == case[1]
        assert dataset_page["next_write"]["status"] == case[1]
        for path, params in (
            ("/lineage", {"node": f"job:{job}", "depth": 1}),
            ("/lineage", {"node": f"dataset:{dataset}", "depth": 1}),
            ("/impact", {"node": f"job:{job}"}),
        ):
            nodes = _nodes(api.get(path, **params, **when))
            assert nodes[f"job:{job}"]["lateness"] == job_page["lateness"], (path, params)
            assert nodes[f"dataset:{dataset}"]["next_write"] == dataset_page["next_write"]
    # a job without a learned cadence, and its dataset, carry none
    recovered = _job_id(api, STATS_NS, "recovered_job")
    nodes = _nodes(api.get("/lineage", node=f"job:{recovered}", depth=0, **when))
    assert nodes[f"job:{recovered}"]["lateness"] is None


def test_overrides_set_a_job_s_cadence_or_leave_it_out_when_read(service: Service) -> None:
    """METASTORE_CADENCE_OVERRIDES, read by the api at start, applies to every answer that
    judges lateness (no replay): the job page, graph nodes, /jobs?late=, the namespace's
    counts and a dataset's next write; without it the same store answers as learned."""
    api, histories = service.api, service.histories
    overrides = service.log_dir / "cadences.json"
    overrides.write_text(
        json.dumps(
            [
                # a long tolerance: the late hourly job is on time
                {"namespace": CADENCE_NS, "name": "hourly_l?te", "tolerance_seconds": 864000},
                # retired: not judged
                {"namespace": "airflow://cad*", "name": "daily_missed", "ignore": True},
                # the weekly job is really hourly: its next run is long overdue
                {"namespace": CADENCE_NS, "name": "weekly_on_*", "cadence": "hourly"},
                # (the first match wins: the late weekly job is left out)
                {"namespace": CADENCE_NS, "name": "weekly_*", "ignore": True},
            ]
        )
    )
    weekly = _job_id(api, CADENCE_NS, "weekly_on_time")
    learned = api.get(f"/jobs/{weekly}")["lateness"]
    assert (learned["source"], learned["status"]) == ("learned", "on_time")
    env = {"METASTORE_AUTH": "disabled", "METASTORE_CADENCE_OVERRIDES": str(overrides)}
    with (
        running("api", service.database_url, service.log_dir, env=env) as process,
        httpx.Client(base_url=process.base_url, timeout=30) as client,
    ):
        over = Api(client, CADENCE_NS, "s3://warehouse")
        judged = {s.job: over.get(f"/jobs/{over.job_id(s.job)}") for s in histories.values()}
        hourly = judged["hourly_late"]["lateness"]
        assert (hourly["source"], hourly["status"], hourly["cadence"]) == (
            "override",
            "on_time",
            "hourly",
        )
        assert hourly["tolerance_seconds"] == 864000
        assert judged["daily_missed"]["lateness"] is None
        week = judged["weekly_on_time"]["lateness"]
        assert (week["source"], week["cadence"], week["period_seconds"]) == (
            "override",
            "hourly",
            3600,
        )
        assert week["status"] == "missed"
        assert week["tolerance_seconds"] == learned["tolerance_seconds"]  # (not overridden)
        assert judged["daily_on_time"]["lateness"]["source"] == "learned"
        late = over.get("/jobs", namespace=CADENCE_NS, late="true")["items"]
        assert sorted(j["name"] for j in late) == ["irregular_late", "weekly_on_time"]
        assert judged["weekly_late"]["lateness"] is None
        everywhere = {j["name"] for j in over.get("/jobs", late="true")["items"]}
        assert {j["name"] for j in late} <= everywhere
        assert not everywhere & {"hourly_late", "daily_missed", "weekly_late"}
        stats = over.get("/namespace-stats", namespace=CADENCE_NS)
        assert (stats["late_job_count"], stats["missed_job_count"]) == (2, 1)
        ignored = over.dataset_id(histories[("daily", "missed")].dataset)
        assert over.get(f"/datasets/{ignored}")["next_write"] is None
        nodes = _nodes(over.get("/lineage", node=f"job:{weekly}", depth=1))
        assert nodes[f"job:{weekly}"]["lateness"] == judged["weekly_on_time"]["lateness"]
        dataset = over.dataset_id(histories[("weekly", "on_time")].dataset)
        assert nodes[f"dataset:{dataset}"]["next_write"]["status"] == "missed"
    # the api without the file: as learned, nothing to replay
    assert api.get(f"/jobs/{weekly}")["lateness"] == learned


def test_a_job_with_too_few_runs_has_no_lateness(api: Api) -> None:
    recovered = api.get(f"/jobs/{_job_id(api, STATS_NS, 'recovered_job')}")
    assert recovered["lateness"] is None


def test_a_job_stops_failing_when_its_next_run_starts(api: Api) -> None:
    """(Last: it adds a run.) A later batch refolds the job's failing span."""
    stats = api.get("/namespace-stats", namespace=STATS_NS)
    assert [f["job"]["name"] for f in stats["failing_jobs"]] == ["broken_job"]
    rerun = _run("broken_job", NOW - A - dt.timedelta(minutes=1), None, "START")
    api.post(rerun)
    assert api.get("/namespace-stats", namespace=STATS_NS)["failing_job_count"] == 0
    # as of a moment before the rerun, it was failing still
    before = api.get("/namespace-stats", namespace=STATS_NS, as_of=_time(A))
    assert [f["job"]["name"] for f in before["failing_jobs"]] == ["broken_job"]
