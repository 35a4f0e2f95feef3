"""The real `metastore projector` process: crash safety, standby takeover, probes."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg

from projections.replay import rebuild
from projections.schema import PROJECTIONS
from tests.logdata import append, copies, dump_readmodel
from tests.support import all_scenario_events, running, start_process

Conn = psycopg.Connection[Any]


def folded(conn: Conn) -> list[int]:
    return [r[0] for r in conn.execute("SELECT events_folded FROM projection_state")]


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_killed_mid_batch_the_restarted_projector_gives_a_clean_replays_tables(
    conn: Conn, database_url: str, tmp_path: Path
) -> None:
    total = 0
    events = copies(all_scenario_events(), 60)
    for start in range(0, len(events), 1000):
        total += append(conn, events[start : start + 1000])
    first = start_process("projector", database_url, tmp_path)
    try:
        wait_for(lambda: max(folded(conn)) > 0)
        first.kill(signal.SIGKILL)
    finally:
        first.stop()
    at_kill = folded(conn)
    assert max(at_kill) < total, "the projector finished before it was killed"
    with running("projector", database_url, tmp_path):
        wait_for(lambda: set(folded(conn)) == {total})
    incremental = dump_readmodel(conn)
    assert conn.execute("SELECT count(*) FROM dead_letters").fetchone() == (0,)
    rebuild(database_url, [p.NAME for p in PROJECTIONS])
    assert dump_readmodel(conn) == incremental


def role(base_url: str) -> str:
    return str(httpx.get(base_url + "/healthz", timeout=5).json()["role"])


def test_a_standby_takes_over_when_the_active_projector_dies(
    conn: Conn, database_url: str, tmp_path: Path
) -> None:
    scenario = all_scenario_events()
    active = start_process("projector", database_url, tmp_path)
    standby = start_process("projector", database_url, tmp_path)
    try:
        wait_for(lambda: role(active.base_url) == "active", 30)
        wait_for(lambda: role(standby.base_url) == "standby", 30)
        first = append(conn, scenario[:30])
        wait_for(lambda: set(folded(conn)) == {first}, 30)
        assert role(standby.base_url) == "standby"
        active.kill(signal.SIGKILL)
        died = time.monotonic()
        second = append(conn, scenario[30:])
        wait_for(lambda: set(folded(conn)) == {first + second}, 30)
        assert time.monotonic() - died < 15
        assert role(standby.base_url) == "active"
        assert "this projector is now active" in standby.output()
    finally:
        active.stop()
        standby.stop()


def test_probes_and_metrics_and_a_clean_stop(conn: Conn, database_url: str, tmp_path: Path) -> None:
    count = append(conn, all_scenario_events())
    process = start_process("projector", database_url, tmp_path)
    try:
        wait_for(lambda: set(folded(conn)) == {count}, 30)
        ready = httpx.get(process.base_url + "/readyz", timeout=5)
        assert ready.status_code == 200 and ready.json()["status"] == "ok"

        def metrics_show_the_fold() -> bool:
            text = httpx.get(process.base_url + "/metrics", timeout=5).text
            return 'metastore_projection_lag_events{projection="runs"} 0.0' in text

        wait_for(metrics_show_the_fold, 10)
        text = httpx.get(process.base_url + "/metrics", timeout=5).text
        assert f'metastore_projector_folded_events_total{{projection="runs"}} {count}.0' in text
        # Woken by NOTIFY: a new event is folded without a restart.
        more = append(conn, [{**all_scenario_events()[0], "eventTime": "2031-01-01T00:00:00Z"}])
        wait_for(lambda: set(folded(conn)) == {count + more}, 10)
    finally:
        process.popen.send_signal(signal.SIGTERM)
        assert process.popen.wait(timeout=15) == 0
    assert "projector stopped" in process.output()
