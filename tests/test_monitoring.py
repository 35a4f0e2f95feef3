"""Monitoring through the real processes: a hung leader (SIGSTOP keeps its TCP connection
and its session) shows as a stall on every pod's /metrics and in the log, loses its lease
within the stated bound to the standby, and cannot write when it wakes up."""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path
from typing import Any

import psycopg

from projections.replay import rebuild
from projections.runner import LEASE_S, STANDBY_RETRY_S
from projections.schema import PROJECTIONS
from tests.logdata import append, dump_readmodel
from tests.support import Process, all_scenario_events, start_process
from tests.test_metrics import scrape, value
from tests.test_projector_process import folded, role, wait_for

Conn = psycopg.Connection[Any]
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
NAMES = [p.NAME for p in PROJECTIONS]


def holder(process: Process) -> str:
    """The lease holder's name as the metric shows it (projections.runner.application_name)."""
    return f"projector:{process.pid}@{socket.gethostname()}"[:63]


def by_projection(samples: Samples, name: str) -> dict[str, float]:
    return {dict(labels)["projection"]: v for (n, labels), v in samples.items() if n == name}


def holders(samples: Samples) -> set[str]:
    return {
        dict(labels)["holder"]
        for (n, labels), v in samples.items()
        if n == "metastore_projector_lease_holder" and v == 1
    }


def test_a_hung_leader_shows_as_a_stall_on_every_pod_and_loses_its_lease(
    conn: Conn, database_url: str, tmp_path: Path
) -> None:
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
