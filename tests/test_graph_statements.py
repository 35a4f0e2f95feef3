"""What a graph read asks PostgreSQL, through the real processes (`metastore api` and
`metastore projector`, the suite's PostgreSQL logging every statement's plan): each thing
read once a request (issue 46).

Impact from a failed run used to read its inputs' details (their freshness gives the
causes) in a statement and a walk upstream of their own after the graph's: now they come
with the graph's. The edges' run states now come with the edges; as of T they are one
statement a walk after its edges (asof.RUN_STATES_AT), planned once: inside the edges'
statement, which is planned for each request, they planned every monthly partition of the
log three times. A run's state at a
moment read every event of its job (the job index ANDed with the run's): now the run's
events alone, however many runs the job has.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from metastore.api.asof import RUN_STATES_AT
from tests.support import (
    Api,
    plans_logged,
    rows_read,
    run_event,
    running,
    server_log,
    serving,
)

NS, DS_NS = "gs", "s3://gs"
PRODUCER = "https://github.com/stackabletech/metastore/tests"
# The statement that reads what a graph's dataset nodes show (dataset_nodes.NODE) and the
# one that reads the edges' run states (asof.RUN_STATES_AT), as the server logs them.
DETAILS = "c.names, "
RUN_STATES = RUN_STATES_AT.strip().splitlines()[0]


def run_id(label: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"metastore-tests/graph-statements/{label}"))


def ds(name: str) -> dict[str, Any]:
    return {"namespace": DS_NS, "name": name, "facets": {}}


def event(kind: str, when: str, job: str, label: str, ins: list[str], outs: list[str]) -> Any:
    return run_event(
        kind, when, PRODUCER, (NS, job), run_id(label), [ds(n) for n in ins], [ds(n) for n in outs]
    )


# src -> build_orders -> orders -> report -> orders_report; load_src's second run fails,
# then build_orders' second run.
EVENTS = [
    event("COMPLETE", "2026-05-01T01:00:00Z", "load_src", "load", [], ["src"]),
    event("FAIL", "2026-05-02T23:00:00Z", "load_src", "load2", [], ["src"]),
    event("COMPLETE", "2026-05-02T00:10:00Z", "build_orders", "t1", ["src"], ["orders"]),
    event("COMPLETE", "2026-05-02T01:10:00Z", "report", "r1", ["orders"], ["orders_report"]),
    event("FAIL", "2026-05-03T00:05:00Z", "build_orders", "t2", ["src"], ["orders"]),
]
# An hourly job of many runs (src -> hourly -> hourly_out).
HOURLY_RUNS = 300
HOURLY = [
    event("COMPLETE", f"2026-04-{1 + h // 24:02d}T{h % 24:02d}:30:00Z", "hourly", f"h{h}", ["src"],
          ["hourly_out"])
    for h in range(HOURLY_RUNS)
]  # fmt: skip
# The statements of the walk, its edges and their runs' states (lineage.LINEAGE_WALK,
# LINEAGE_LINKS, asof.RUN_STATES_AT).
WALK_STATEMENTS = ("WITH RECURSIVE start", "WITH job_side AS", RUN_STATES)


@pytest.fixture(scope="module")
def store(
    pg_server: Any, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    log_dir = tmp_path_factory.mktemp("graph-statements")
    with serving(pg_server, template_db, log_dir, "graphstmts") as (url, _, client):
        Api(client, NS, DS_NS).post(EVENTS + HOURLY)
        yield url, log_dir


def statements(
    pg_server: Any, store: tuple[str, Path], read: str
) -> tuple[dict[str, Any], list[str]]:
    found, plans = planned(pg_server, store, read)
    return found, [p["Query Text"] for p in plans]


def planned(
    pg_server: Any, store: tuple[str, Path], read: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The answer to `read` (200) from an api started with plans logged, and the text of
    every read-model statement's plan."""
    url, log_dir = store
    with plans_logged(url, server_log(pg_server)) as logged:
        with running("api", url, log_dir) as api:  # new connections: auto_explain loaded
            logged()  # (the api's start-up reads)
            answer = httpx.get(api.base_url + "/api/v1" + read, timeout=30)
            assert answer.status_code == 200, answer.text
        plans = logged()
    return answer.json(), plans


def test_impact_reads_the_datasets_details_once(pg_server: Any, store: tuple[str, Path]) -> None:
    found, texts = statements(pg_server, store, f"/impact?node=run:{run_id('t2')}")
    # the answer: the failed run's attempted output downstream, the cause upstream of it
    # through its input (src's writer failed)
    assert {n["name"] for n in found["nodes"]} == {
        "build_orders",
        "orders",
        "report",
        "orders_report",
    }
    assert [(c["run"]["id"], c["via"]["name"]) for c in found["causes"]] == [
        (run_id("load2"), "src")
    ]
    # the graph's datasets and the run's input, src, in one statement
    assert sum(DETAILS in t for t in texts) == 1, texts
    edges = {(e["from"]["name"], e["to"]["name"]): e for e in found["edges"]}
    assert edges[("build_orders", "orders")]["last_run"]["state"] == "FAIL"
    assert not [t for t in texts if t.lstrip().startswith(RUN_STATES)]  # (now: with the edges)


@pytest.mark.parametrize(
    ("read", "state", "walks"),
    [
        ("/lineage?node=job:{job}&depth=2", "FAIL", 0),  # (now: with the edges)
        ("/lineage?node=job:{job}&depth=2&as_of=2026-05-02T12:00:00Z", "COMPLETE", 1),
        ("/lineage/diff?node=job:{job}&depth=2&from=2026-05-02T12:00:00Z", None, 2),
    ],
)
def test_graphs_read_the_edges_run_states_once_a_walk(
    pg_server: Any, store: tuple[str, Path], read: str, state: str | None, walks: int
) -> None:
    with psycopg.connect(store[0]) as conn:
        (job,) = conn.execute(
            "SELECT id FROM readmodel.jobs WHERE namespace = %s AND name = 'build_orders'", (NS,)
        ).fetchone() or (None,)
    found, texts = statements(pg_server, store, read.format(job=job))
    if state is not None:  # the run that holds build_orders' edge to orders, in its state then
        edges = {(e["from"]["name"], e["to"]["name"]): e for e in found["edges"]}
        assert edges[("build_orders", "orders")]["last_run"]["state"] == state
    else:  # the same edges then and now: no change
        assert (found["edges_added"], found["edges_removed"]) == ([], [])
    assert sum(t.lstrip().startswith(RUN_STATES) for t in texts) == walks, texts


def job_id(url: str, name: str) -> str:
    with psycopg.connect(url) as conn:
        found = conn.execute(
            "SELECT id FROM readmodel.jobs WHERE namespace = %s AND name = %s", (NS, name)
        ).fetchone()
    assert found is not None
    return str(found[0])


@pytest.mark.parametrize("as_of", [None, "2026-05-01T00:00:00Z"])
def test_a_runs_state_reads_its_own_events(
    pg_server: Any, store: tuple[str, Path], as_of: str | None
) -> None:
    read = f"/lineage?node=job:{job_id(store[0], 'hourly')}&depth=1"
    found, plans = planned(pg_server, store, read + (f"&as_of={as_of}" if as_of else ""))
    (node,) = [n for n in found["nodes"] if n["name"] == "hourly"]
    last = run_id(f"h{HOURLY_RUNS - 1}")
    assert (node["latest_run"]["id"], node["latest_run"]["state"]) == (last, "COMPLETE")
    held = [e for e in found["edges"] if "hourly" in (e["from"]["name"], e["to"]["name"])]
    assert {(e["last_run"]["id"], e["last_run"]["state"]) for e in held} == {(last, "COMPLETE")}
    walk = [p for p in plans if any(s in p["Query Text"] for s in WALK_STATEMENTS)]
    assert len(walk) == (3 if as_of else 2)
    # the log's rows or index entries a node reads a loop: the run's, never the job's 300
    log = [(read, what) for read, what in rows_read(walk) if '"event_log' in what.split("Plans")[0]]
    assert log
    assert max(log)[0] < HOURLY_RUNS / 3, max(log)


def test_a_run_ended_by_the_moment_reads_no_log(pg_server: Any, store: tuple[str, Path]) -> None:
    # as of a moment after every run's last event: each run's state then is its latest
    # terminal one, which lineage_runs holds; only a run still running then reads the log
    job = job_id(store[0], "build_orders")
    read = f"/lineage?node=job:{job}&depth=2&as_of=2026-06-01T00:00:00Z"
    found, plans = planned(pg_server, store, read)
    (node,) = [n for n in found["nodes"] if n["name"] == "build_orders"]
    assert (node["latest_run"]["id"], node["latest_run"]["state"]) == (run_id("t2"), "FAIL")
    edges = {(e["from"]["name"], e["to"]["name"]): e for e in found["edges"]}
    assert edges[("build_orders", "orders")]["last_run"]["state"] == "FAIL"
    assert edges[("orders", "report")]["last_run"]["state"] == "COMPLETE"
    (orders,) = [n for n in found["nodes"] if n["name"] == "orders"]
    assert orders["freshness"]["failed_attempt"]["run"]["state"] == "FAIL"
    log = [(n, what) for n, what in rows_read(plans) if '"event_log' in what.split("Plans")[0]]
    assert max(log, default=(0, ""))[0] == 0, max(log)
