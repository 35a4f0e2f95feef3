"""Monitoring through the real processes: a hung leader (SIGSTOP keeps its TCP connection
and its session) shows as a stall on every pod's /metrics and in the log, loses its lease
within the stated bound to the standby, and cannot write when it wakes up; the chart's
alerts, rendered by helm, are evaluated (tests/promql.py) over the real scrapes of a real
stall, dead letters, read timeouts, a stopped projector and a stopped API."""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from bench.hostile import long_text, output, run_event, run_id
from projections.replay import rebuild
from projections.runner import LEASE_S, STANDBY_RETRY_S, application_name
from projections.schema import PROJECTIONS
from tests.deploy.helm import NAMESPACE, RELEASE, helm_or_skip, template
from tests.logdata import append, dump_readmodel
from tests.promql import Scrape, evaluate
from tests.support import Process, ReadmeInstall, all_scenario_events, start_process
from tests.test_metrics import scrape, value
from tests.test_projector_process import folded, role, wait_for

Conn = psycopg.Connection[Any]
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
NAMES = [p.NAME for p in PROJECTIONS]


def holder(process: Process) -> str:
    """The lease holder's name as the metric shows it."""
    return application_name("metastore-projector", socket.gethostname(), process.pid)


def by_projection(samples: Samples, name: str) -> dict[str, float]:
    return {dict(labels)["projection"]: v for (n, labels), v in samples.items() if n == name}


def holders(samples: Samples) -> set[str]:
    return {
        dict(labels)["holder"]
        for (n, labels), v in samples.items()
        if n == "metastore_projector_lease_holder" and v == 1
    }


@pytest.fixture(scope="module")
def helm() -> str:
    return helm_or_skip()


def alert_rules(helm: str, *values: str) -> dict[str, str]:
    """Each alert's expression in the chart's PrometheusRule, as helm renders it."""
    sets = ["--set", "monitoring.prometheusRule.enabled=true"]
    for setting in values:
        sets += ["--set", setting]
    manifests = template(helm, *sets)
    (rule,) = [m for m in manifests if m["kind"] == "PrometheusRule"]
    return {r["alert"]: r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]}


def scrape_targets(targets: dict[str, Process]) -> Scrape:
    """Scrapes every target as Prometheus does, through the chart's ServiceMonitor: its
    samples get `job` (the Service) and `namespace`, and `up` says whether it answered."""
    samples = {}
    for pod, process in targets.items():
        job = f"{RELEASE}-metastore-{'api' if pod.startswith('api') else 'projector-metrics'}"
        target = {"job": job, "namespace": NAMESPACE, "pod": pod}
        try:
            scraped = scrape(process.base_url, timeout=2)
        except httpx.HTTPError:
            scraped = {}
        for (name, labels), v in scraped.items():
            samples[(name, frozenset({**dict(labels), **target}.items()))] = v
        samples[("up", frozenset(target.items()))] = 1.0 if scraped else 0.0
    return Scrape(time.monotonic(), samples)


def firing(rules: dict[str, str], scrapes: list[Scrape]) -> set[str]:
    return {alert for alert, expr in rules.items() if evaluate(expr, scrapes)}


def test_a_hung_leader_shows_as_a_stall_on_every_pod_and_loses_its_lease(
    conn: Conn, database_url: str, tmp_path: Path, helm: str
) -> None:
    rules = alert_rules(helm, "monitoring.prometheusRule.lagSeconds=1")
    scenario = all_scenario_events()
    first = append(conn, scenario[:30])
    env = {"METASTORE_STALL_TIMEOUT": "1"}
    active = start_process("projector", database_url, tmp_path, env=env)
    standby = start_process("projector", database_url, tmp_path, env=env)
    api = start_process("api", database_url, tmp_path, env=env)
    try:
        wait_for(lambda: role(active.base_url) == "active", 30)
        wait_for(lambda: role(standby.base_url) == "standby", 30)
        wait_for(lambda: set(folded(conn)) == {first}, 30)
        # Before: every pod names the leader; nothing lags or stalls.
        for pod in (api, standby):
            samples = scrape(pod.base_url)
            assert value(samples, "metastore_projector_lease_held") == 1
            assert holders(samples) == {holder(active)}
            assert set(by_projection(samples, "metastore_projection_stalled").values()) == {0}
            assert by_projection(samples, "metastore_projection_lag_events") == dict.fromkeys(
                NAMES, 0
            )
            assert by_projection(samples, "metastore_projection_dead_letters") == dict.fromkeys(
                NAMES, 0
            )
        assert value(scrape(active.base_url), "metastore_projector_leader") == 1
        assert value(scrape(standby.base_url), "metastore_projector_leader") == 0
        pods = {"api-0": api, "projector-0": active, "projector-1": standby}
        assert firing(rules, [scrape_targets(pods)]) == set()

        active.popen.send_signal(signal.SIGSTOP)
        hung = time.monotonic()
        second = append(conn, scenario[30:])

        # The stall, seen from the API's pod and the standby's, and logged once.
        def stalled_everywhere() -> bool:
            return all(
                set(by_projection(scrape(pod.base_url), "metastore_projection_stalled").values())
                == {1}
                for pod in (api, standby)
            )

        wait_for(stalled_everywhere, LEASE_S)
        during = scrape(api.base_url)
        lag = by_projection(during, "metastore_projection_lag_events")
        assert lag == dict.fromkeys(NAMES, second)
        assert min(by_projection(during, "metastore_projection_lag_seconds").values()) > 1
        assert firing(rules, [scrape_targets(pods)]) == {
            "MetastoreProjectionStalled",
            "MetastoreProjectionLagHigh",
        }
        stalls = [line for line in api.output().splitlines() if "projection stalled" in line]
        assert len(stalls) == len(NAMES), stalls
        assert all("warning" in line.lower() for line in stalls)

        # The standby takes over within the lease, and folds what waited.
        wait_for(lambda: role(standby.base_url) == "active", LEASE_S + STANDBY_RETRY_S + 5)
        took_over = time.monotonic() - hung
        assert took_over < LEASE_S + STANDBY_RETRY_S + 2, took_over
        wait_for(lambda: set(folded(conn)) == {first + second}, 30)
        wait_for(lambda: holders(scrape(api.base_url)) == {holder(standby)}, 10)
        wait_for(lambda: "projection moving again" in api.output(), 10)
        after = scrape(api.base_url)
        assert set(by_projection(after, "metastore_projection_stalled").values()) == {0}
        assert value(scrape(standby.base_url), "metastore_projector_leader") == 1
        assert api.output().count("projection stalled") == len(NAMES)  # once per transition
        assert firing(rules, [scrape_targets(pods)]) == set()

        # Woken up, the old leader stands by: its sessions were ended, it writes nothing.
        active.popen.send_signal(signal.SIGCONT)
        wait_for(lambda: role(active.base_url) == "standby", 15)
        assert value(scrape(active.base_url), "metastore_projector_leader") == 0
        assert holders(scrape(active.base_url)) == {holder(standby)}
    finally:
        active.popen.send_signal(signal.SIGCONT)
        for process in (active, standby, api):
            process.stop()
    assert conn.execute("SELECT count(*) FROM dead_letters").fetchone() == (0,)
    live = dump_readmodel(conn)
    rebuild(database_url, NAMES)
    assert dump_readmodel(conn) == live
    print(f"took over {took_over:.1f} s after the leader hung")


def test_alerts_on_dead_letters_read_timeouts_no_leader_and_api_down_with_the_readme_roles(
    readme_install: ReadmeInstall, tmp_path: Path, helm: str
) -> None:
    """What the API's least-privileged role reads at scrape time: dead letters and the
    lease of the projector's role (other role's sessions)."""
    rules = alert_rules(helm)
    readme_install.run_sql()
    assert readme_install.migrate().returncode == 0
    env = {"METASTORE_AUTH": "disabled", "METASTORE_READ_TIMEOUT": "1"}
    projector = start_process(
        "projector", readme_install.url(readme_install.projector), tmp_path, env=env
    )
    api = start_process("api", readme_install.url(readme_install.api), tmp_path, env=env)
    pods = {"api-0": api, "projector-0": projector}
    try:
        with httpx.Client(base_url=api.base_url, timeout=30) as client:
            ok = [run_event(run_id("ok", i), "ok", outputs=[output("orders")]) for i in range(5)]
            assert client.post("/ingest/openlineage/batch", json=ok).status_code == 200

            def datasets() -> list[dict[str, Any]]:
                return list(client.get("/api/v1/datasets").json()["items"])

            wait_for(lambda: bool(datasets()), 30)
            (dataset,) = datasets()
            before = scrape_targets(pods)
            assert holders(before.samples) == {holder(projector)}
            assert firing(rules, [before]) == set()

            # An event whose output name no index holds, stored before ingest refused
            # such names: two projections dead-letter it.
            poison = run_event(run_id("poison", 0), "poison", outputs=[output(long_text(3000, 9))])
            with psycopg.connect(readme_install.url(readme_install.owner)) as owner:
                append(owner, [poison])

            def letters() -> dict[str, float]:
                samples = scrape(api.base_url)
                return by_projection(samples, "metastore_projection_dead_letters")

            wait_for(lambda: letters()["lineage"] == 1 and letters()["datasets"] == 1, 30)

            # Reads that stop at METASTORE_READ_TIMEOUT: 503s and read timeouts.
            def read_timeouts() -> None:
                with psycopg.connect(readme_install.url(readme_install.projector)) as locker:
                    locker.execute("LOCK TABLE readmodel.dataset_versions IN ACCESS EXCLUSIVE MODE")
                    for _ in range(3):
                        page = client.get(f"/api/v1/datasets/{dataset['id']}")
                        assert page.status_code == 503

            read_timeouts()
            after = scrape_targets(pods)
            # 5xx go on: the ratio is of the series' increase since the first 5xx's scrape
            # (as in Prometheus, a series' first sample is where its increase starts).
            read_timeouts()
            later = scrape_targets(pods)
        assert firing(rules, [before, after]) == {
            "MetastoreDeadLettersIncreasing",
            "MetastoreReadTimeouts",
        }
        assert firing(rules, [before, after, later]) == {
            "MetastoreDeadLettersIncreasing",
            "MetastoreReadTimeouts",
            "MetastoreAPIErrors",
        }
        projector.stop()
        no_leader = scrape_targets(pods)
        assert value(no_leader.samples, "metastore_projector_lease_held") == 0  # (no labels)
        assert firing(rules, [later, no_leader]) == {"MetastoreNoProjectorLeader"}
        api.stop()
        assert firing(rules, [no_leader, scrape_targets(pods)]) == {"MetastoreAPIDown"}
    finally:
        api.stop()
        projector.stop()


def test_a_scrape_answers_while_the_projections_table_is_locked(
    conn: Conn, database_url: str, tmp_path: Path
) -> None:
    """A session holding projection_state (a hung migration, an operator's LOCK) cannot
    make a scrape hang: the API's and the projector's answer within the scrape's bound,
    with the last figures, and say why in the log."""
    append(conn, all_scenario_events()[:5])
    api = start_process("api", database_url, tmp_path)
    projector = start_process("projector", database_url, tmp_path)
    try:
        wait_for(lambda: set(folded(conn)) == {5}, 30)
        for pod in (api, projector):
            assert value(scrape(pod.base_url), "metastore_projector_lease_held") == 1
        with psycopg.connect(database_url) as locker:
            locker.execute("LOCK TABLE projection_state IN ACCESS EXCLUSIVE MODE")
            for pod in (api, projector):
                started = time.monotonic()
                samples = scrape(pod.base_url, timeout=10)
                assert time.monotonic() - started < 4
                assert value(samples, "metastore_projector_lease_held") == 1  # the last figure
                assert "projections not measured" in pod.output()
    finally:
        api.stop()
        projector.stop()
