"""Inputs ingest accepts that stalled, starved or crashed the read side (issue 34), through
a real `metastore api` and `metastore projector`: the fold is linear in its input, its
memory follows bytes, every key fits its index, rules change only through the projector
and a stall is reported, a runId two jobs report folds in the batch, and what still falls
back to one event at a time is one line and a metric.

The events come from bench/hostile.py; `python -m bench.scenario hostile-fold` measures each
case's time and memory (docs/PERFORMANCE.md, "Bounded fold").
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from bench.hostile import (
    chain_run,
    long_keys,
    long_text,
    merge_chain,
    output,
    parent_chain,
    reused_run_ids,
    run_event,
    run_id,
    wide_lineage,
)
from metastore.catalogs import CatalogMap, load_catalog_map
from projections import column_lineage
from projections.common import dataset_id
from projections.replay import rebuild
from projections.runs import MAX_PARENT_DEPTH
from tests.logdata import append, dump_readmodel
from tests.reliability.test_hostile_input import metric, wait_until_folded
from tests.reliability.test_memory import peak_rss_bytes
from tests.support import Process, running

pytestmark = pytest.mark.reliability

BATCH = "/ingest/openlineage/batch"
EVENT = "/ingest/openlineage"
JSON = {"Content-Type": "application/json"}
MiB = 1024 * 1024
CHART_MEMORY_LIMIT = 512 * MiB  # deploy/helm/metastore values: projector.resources.limits


@pytest.fixture
def service(database_url: str, tmp_path: Path) -> Iterator[tuple[httpx.Client, Process]]:
    """The API (a client of it) and the projector on a database of this test's own."""
    with (
        running("api", database_url, tmp_path) as api,
        running("projector", database_url, tmp_path) as projector,
        httpx.Client(base_url=api.base_url, timeout=120) as client,
    ):
        yield client, projector


def post(client: httpx.Client, events: list[dict[str, Any]]) -> None:
    answer = client.post(BATCH, content=json.dumps(events).encode(), headers=JSON)
    assert answer.status_code == 200 and answer.json()["status"] == "success", answer.text[:500]


def query(database_url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


def runs_updated(database_url: str) -> int:
    """Row updates of readmodel.runs so far (PostgreSQL's statistics, flushed when a
    session ends: call with the projector stopped)."""
    ((updates,),) = query(
        database_url,
        "SELECT n_tup_upd FROM pg_stat_user_tables WHERE schemaname = 'readmodel' "
        "AND relname = 'runs'",
    )
    return int(updates)


def roots(database_url: str, prefix: str, n: int) -> dict[int, int]:
    """Run i of chain `prefix` -> the j whose run is its root."""
    index = {uuid.UUID(chain_run(i, prefix)): i for i in range(n)}
    rows = query(database_url, "SELECT id, root_run_id FROM readmodel.runs")
    return {index[r]: index[root] for r, root in rows if r in index}


# --- 1. a fold linear in its input ------------------------------------------------------


def test_a_chain_of_10000_parents_a_cycle_and_a_merge_chain_fold_in_one_request(
    service: tuple[httpx.Client, Process], database_url: str
) -> None:
    """Before: RecursionError in runs.resolve_roots, then every projection event by event,
    each moving the roots of all earlier runs (1,501 runs took 15 minutes)."""
    client, projector = service
    n, ring = 10_000 - 50, 50
    post(client, parent_chain(n))  # one request, read by the projector in full batches
    post(client, parent_chain(ring, cycle=True, prefix="ring"))
    post(client, merge_chain(1_000))  # each join merges all joined before into an older one
    started = time.monotonic()
    status = wait_until_folded(client, database_url, timeout=120)
    print(f"\n{n + ring + 1_999:,} events folded {time.monotonic() - started:.1f} s after ingest")
    assert all(p["dead_letters"] == 0 for p in status["projections"])
    # A run's root is the run MAX_PARENT_DEPTH up (the chain is cut there) or the top.
    assert roots(database_url, "chain", n) == {
        i: min(i + MAX_PARENT_DEPTH, n - 1) for i in range(n)
    }
    # In a cycle the walk stops before it comes back: the root is the run below it.
    assert roots(database_url, "ring", ring) == {i: (i - 1) % ring for i in range(ring)}
    answer = client.get(f"/api/v1/runs/{chain_run(0)}").json()
    assert answer["root"]["id"] == chain_run(MAX_PARENT_DEPTH)
    for reason in ("depth", "cycle"):
        label = f'reason="{reason}"'
        assert metric(projector.base_url, "metastore_projector_parent_chains_cut_total", label)
    # The merge chain is one dataset, the first seen.
    survivors = query(
        database_url,
        "SELECT DISTINCT dataset_id FROM readmodel.dataset_names WHERE namespace = %s",
        "s3://hostile",
    )
    assert survivors == [(dataset_id("s3://hostile", "t0"),)]
    assert "fold failed" not in projector.output()


def test_a_chain_of_10000_parents_over_20_batches_moves_each_run_a_bounded_number_of_times(
    database_url: str, tmp_path: Path
) -> None:
    """The chain grows upwards batch by batch (children first): each batch gives the top
    of the runs folded so far a parent. Before: every run below moved, every batch
    (quadratic: 95,000 row updates here); now only the runs within MAX_PARENT_DEPTH."""
    events = parent_chain(10_000)
    with (
        running("api", database_url, tmp_path) as api,
        httpx.Client(base_url=api.base_url, timeout=120) as client,
    ):
        with running("projector", database_url, tmp_path):
            started = time.monotonic()
            for start in range(0, len(events), 500):
                post(client, events[start : start + 500])
                wait_until_folded(client, database_url)  # (one batch each)
            print(f"\n20 requests of 500 chained runs folded in {time.monotonic() - started:.1f} s")
        updates = runs_updated(database_url)  # (the projector has stopped: flushed)
    print(f"runs: {updates:,} row updates")
    assert updates <= 20 * MAX_PARENT_DEPTH  # at most MAX_PARENT_DEPTH a batch
    assert roots(database_url, "chain", 10_000) == {
        i: min(i + MAX_PARENT_DEPTH, 9_999) for i in range(10_000)
    }


# --- 2. memory bounded by bytes ---------------------------------------------------------


def test_a_32_mb_event_of_column_lineage_folds_within_the_charts_memory_limit(
    service: tuple[httpx.Client, Process], database_url: str
) -> None:
    """One event of 32 MB whose output's columnLineage has 350,000 fields: before, the
    projector reached 1,025 MiB folding it (its edges as Python objects, all at once)."""
    client, projector = service
    (event,) = wide_lineage(1, 350_000)
    body = json.dumps(event).encode()
    del event
    answer = client.post(EVENT, content=body, headers=JSON)
    assert answer.status_code == 200, answer.text[:300]
    started = time.monotonic()
    wait_until_folded(client, database_url, timeout=240)
    peak = peak_rss_bytes(projector.pid)
    print(
        f"\n{len(body) / MiB:.1f} MiB event folded {time.monotonic() - started:.1f} s after "
        f"ingest; projector peak RSS {peak / MiB:.0f} MiB (limit {CHART_MEMORY_LIMIT / MiB:.0f})"
    )
    ((edges,),) = query(database_url, f"SELECT count(*) FROM ({column_lineage.PAIRS}) p")
    ((reports,),) = query(database_url, "SELECT count(*) FROM readmodel.column_lineage_runs")
    assert (edges, reports) == (350_000, 1)
    assert peak < CHART_MEMORY_LIMIT


def test_a_batch_holds_at_most_16_mib_of_events(database_url: str, tmp_path: Path) -> None:
    """Ten events of 4.4 MB (about the issue's size; here padding and 2,000 fields of column
    lineage each), all in the log when the projector starts: three to a batch, where all
    ten were one batch before (and ten such events with 55,000 fields each took the
    projector to 1,131 MiB: `python -m bench.scenario hostile-fold --only
    column-lineage-10x4MB`)."""
    with (
        running("api", database_url, tmp_path) as api,
        httpx.Client(base_url=api.base_url, timeout=120) as client,
    ):
        for event in wide_lineage(10, 2_000):
            event["run"]["facets"]["padding"] = {"_producer": "p", "data": "x" * 4_200_000}
            answer = client.post(EVENT, json=event)
            assert answer.status_code == 200, answer.text[:300]
        with running("projector", database_url, tmp_path) as projector:
            wait_until_folded(client, database_url)
            samples = httpx.get(projector.base_url + "/metrics", timeout=10).text
            peak = peak_rss_bytes(projector.pid)
    (batches,) = [
        float(line.split()[1])
        for line in samples.splitlines()
        if line.startswith("metastore_projector_batch_duration_seconds_count ")
    ]
    assert batches == 4
    assert peak < CHART_MEMORY_LIMIT


# --- 3. every key fits its index --------------------------------------------------------


def test_names_fields_and_uris_no_index_holds_take_nothing_else_with_them(
    service: tuple[httpx.Client, Process], database_url: str
) -> None:
    """Before: column_lineage_pkey and dataset_names_pkey refused the rows, and the events
    were dead-lettered: their ordinary outputs vanished with them."""
    client, projector = service
    events = long_keys()
    post(client, events)
    status = wait_until_folded(client, database_url)
    assert {p["name"]: p["dead_letters"] for p in status["projections"]} == {
        p["name"]: 0 for p in status["projections"]
    }
    for event in events:
        jobs = client.get("/api/v1/jobs", params={"namespace": "hostile"}).json()["items"]
        (found,) = [j for j in jobs if j["name"] == event["job"]["name"]]
        page = client.get(f"/api/v1/jobs/{found['id']}").json()
        assert sorted(o["name"] for o in page["outputs"]) == sorted(
            o["name"] for o in event["outputs"]
        )
    names = {r[0] for r in query(database_url, "SELECT name FROM readmodel.dataset_names")}
    assert {"plain", "f", "lakehouse.s.t"} <= names
    # the edge between two names of 1,000 characters each is kept (keyed by its digest)...
    ((long_names,),) = query(
        database_url,
        f"SELECT count(*) FROM ({column_lineage.PAIRS}) p WHERE length(in_name) = 1000",
    )
    assert long_names == 1
    # ...the field of 5,000 characters (no index holds it) and the metastore URI of 4,000
    # are ignored where they are used, and counted
    ((fields,),) = query(database_url, f"SELECT count(*) FROM ({column_lineage.PAIRS}) p")
    assert fields == 1
    for label in ("columnLineage", "catalog"):
        assert metric(
            projector.base_url, "metastore_projector_malformed_facets_total", f'facet="{label}"'
        )


def test_an_event_naming_more_datasets_than_any_fold_holds_is_refused_422(
    service: tuple[httpx.Client, Process],
) -> None:
    client, _ = service
    event = run_event(run_id("many", 0), "many")
    event["inputs"] = [{"namespace": "s3://in", "name": f"i{i}"} for i in range(6_000)]
    event["outputs"] = [{"namespace": "s3://out", "name": f"o{i}"} for i in range(6_000)]
    answer = client.post(EVENT, json=event)
    assert answer.status_code == 422, answer.text[:300]
    problem = answer.json()
    assert problem["pointer"] == "/outputs/4000" and "10,000" in problem["detail"]


# --- 4. rules change only through the projector; a stall is reported --------------------

MAP = """\
catalogs:
  - engine: "trino://t:8080"
    catalog: {catalog}
    metastore: "thrift://hms:9083"
"""


def write_map(path: Path, catalog: str) -> CatalogMap:
    path.write_text(MAP.format(catalog=catalog))
    return load_catalog_map(str(path))


def trino_events(first: int, count: int) -> list[dict[str, Any]]:
    return [
        run_event(
            run_id("catalog", i),
            "catalog",
            outputs=[{"namespace": "trino://t:8080", "name": f"lakehouse.s.t{i}"}],
        )
        for i in range(first, first + count)
    ]


def datasets_rules(database_url: str) -> str:
    ((rules,),) = query(database_url, "SELECT rules FROM projection_state WHERE name = 'datasets'")
    return str(rules)


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def replay(database_url: str, map_file: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "metastore", "replay", "--no-progress"],
        env={
            **os.environ,
            "METASTORE_DATABASE_URL": database_url,
            "METASTORE_CATALOGS_FILE": str(map_file),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_replay_with_another_map_is_refused_and_tables_swapped_in_are_rebuilt(
    database_url: str, tmp_path: Path
) -> None:
    """Before: the replay swapped in datasets derived with map A, the projector (map B)
    stopped folding them, and nothing said so: /readyz ok, five events never folded."""
    map_a, map_b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a, b = write_map(map_a, "lakehouse"), write_map(map_b, "warehouse")
    env = {"METASTORE_CATALOGS_FILE": str(map_b)}
    with (
        running("api", database_url, tmp_path) as api,
        running("projector", database_url, tmp_path, env=env) as projector,
        httpx.Client(base_url=api.base_url, timeout=60) as client,
    ):
        post(client, trino_events(0, 5))
        wait_until_folded(client, database_url)
        refused = replay(database_url, map_a)
        assert refused.returncode != 0
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and "another catalog map" in lines[0], refused.stderr
        same = replay(database_url, map_b)  # the projector's map: a replay goes through
        assert same.returncode == 0, same.stderr[-2000:]
        post(client, trino_events(5, 5))
        wait_until_folded(client, database_url, timeout=30)
        assert datasets_rules(database_url) == b.fingerprint

        # Tables swapped in with another map anyway (a replay that raced the projector's
        # start): the projector rebuilds them with its own and folds on.
        rebuild(database_url, ["datasets"], catalogs=a)
        wait_for(lambda: datasets_rules(database_url) == b.fingerprint, timeout=30)
        assert "rebuilding them while folding the others" in projector.output()
        post(client, trino_events(10, 5))
        wait_until_folded(client, database_url, timeout=30)


def test_a_projection_that_does_not_move_while_events_wait_is_reported_stalled(
    database_url: str, tmp_path: Path
) -> None:
    env = {"METASTORE_STALL_TIMEOUT": "1"}
    with (
        running("api", database_url, tmp_path, env=env) as api,
        running("projector", database_url, tmp_path, env=env) as projector,
        httpx.Client(base_url=api.base_url, timeout=60) as client,
        psycopg.connect(database_url) as holder,
    ):
        post(client, trino_events(0, 3))
        wait_until_folded(client, database_url)
        time.sleep(1.5)  # idle past the timeout at the end of the log: not stalled
        assert httpx.get(projector.base_url + "/readyz").status_code == 200
        assert client.get("/readyz").json()["status"] == "ok"
        # The fold cannot write the runs table: no projection moves (one transaction).
        # (EXCLUSIVE, not ACCESS EXCLUSIVE: that one takes a transaction id, which would
        # hold every reader's horizon back, and with it the events that wait.)
        holder.execute("LOCK TABLE readmodel.runs IN EXCLUSIVE MODE")
        post(client, trino_events(3, 3))

        def stalled() -> bool:
            return httpx.get(projector.base_url + "/readyz", timeout=10).status_code == 503

        wait_for(stalled, timeout=30)
        ready = httpx.get(projector.base_url + "/readyz", timeout=10).json()
        assert ready["status"] == "stalled" and "runs" in ready["stalled_projections"]
        api_ready = client.get("/readyz")
        assert api_ready.status_code == 200  # ingest and reads still work
        assert api_ready.json()["status"] == "degraded"
        assert "runs" in api_ready.json()["stalled_projections"]
        status = client.get("/api/v1/status").json()
        assert {p["name"] for p in status["projections"] if p["stalled"]} >= {"runs"}
        holder.rollback()  # the fold goes on
        wait_until_folded(client, database_url)
        wait_for(lambda: httpx.get(projector.base_url + "/readyz").status_code == 200)
        status = client.get("/api/v1/status").json()
        assert not any(p["stalled"] for p in status["projections"])


DATASET_TABLES = ("datasets", "dataset_names", "dataset_versions")


def datasets_dump(database_url: str) -> dict[str, Any]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        dump = dump_readmodel(conn)
    return {t: dump[t] for t in DATASET_TABLES}


def test_after_map_switches_and_concurrent_replays_the_datasets_are_a_fresh_replays(
    database_url: str, tmp_path: Path
) -> None:
    """Before: the live datasets kept map A's joins (`joined_by`) after a chaos run."""
    map_file, map_a, map_b = tmp_path / "live.yaml", tmp_path / "a.yaml", tmp_path / "b.yaml"
    a, b = write_map(map_a, "lakehouse"), write_map(map_b, "warehouse")
    env = {"METASTORE_CATALOGS_FILE": str(map_file)}
    errors: list[BaseException] = []

    def replays(catalogs: CatalogMap) -> None:
        try:
            for _ in range(2):
                rebuild(database_url, ["datasets"], catalogs=catalogs)
        except BaseException as exc:  # (reported by the test's thread)
            errors.append(exc)

    with (
        running("api", database_url, tmp_path) as api,
        httpx.Client(base_url=api.base_url, timeout=60) as client,
    ):
        first = 0
        for live, other in ((a, b), (b, a), (a, b), (b, a)):  # three switches; b at the end
            write_map(map_file, "lakehouse" if live is a else "warehouse")
            with running("projector", database_url, tmp_path, env=env) as projector:
                racing = threading.Thread(target=replays, args=(other,))
                racing.start()
                for _ in range(3):
                    post(client, trino_events(first, 4))
                    first += 4
                racing.join()
                wait_for(lambda m=live: datasets_rules(database_url) == m.fingerprint)
                wait_until_folded(client, database_url)
                if live is not b:
                    projector.kill(signal.SIGKILL)
        assert not errors, errors
        live_tables = datasets_dump(database_url)
    rebuild(database_url, ["datasets"], catalogs=b)
    assert datasets_dump(database_url) == live_tables
    joined = query(
        database_url, "SELECT count(*) FROM readmodel.dataset_names WHERE kind = 'catalog'"
    )
    assert joined == [(0,)]  # map B joins nothing of these (their catalog is lakehouse)


# --- 5. a runId two jobs report, and 6. what still falls back -------------------------


def test_a_run_id_reused_across_jobs_folds_in_the_batch(
    service: tuple[httpx.Client, Process], database_url: str
) -> None:
    """Before: CardinalityViolation in run_edges' upsert, and the batch folded again event
    by event with a traceback."""
    client, projector = service
    post(client, reused_run_ids(1_000))
    wait_until_folded(client, database_url)
    assert "fold failed" not in projector.output()
    assert (
        metric(
            projector.base_url, "metastore_projector_fold_fallbacks_total", 'projection="lineage"'
        )
        == 0
    )
    edges = query(
        database_url,
        "SELECT count(*), count(DISTINCT run_id) FROM readmodel.run_edges r "
        "JOIN readmodel.jobs j ON j.id = r.job_id WHERE j.name = 'reused-a'",
    )
    assert edges == [(1_000, 1_000)]  # each run's edge, with the job of its first event


def test_a_fold_that_falls_back_says_so_in_one_line_and_a_metric(
    service: tuple[httpx.Client, Process], database_url: str
) -> None:
    """An output name no index holds, in the log from before ingest refused it: lineage
    and datasets fold their batch event by event and dead-letter it, each with one line
    and a count, without a traceback."""
    client, projector = service
    poison = run_event(run_id("poison", 0), "poison", outputs=[output(long_text(3_000, 9))])
    with psycopg.connect(database_url, autocommit=True) as conn:
        append(conn, [*(run_event(run_id("ok", i), "ok") for i in range(50)), poison])
    wait_until_folded(client, database_url)
    log = projector.output()
    assert "Traceback" not in log
    for projection in ("lineage", "datasets"):
        lines = [line for line in log.splitlines() if "one by one" in line and projection in line]
        assert len(lines) == 1, log[-3000:]
        label = f'projection="{projection}"'
        assert metric(projector.base_url, "metastore_projector_fold_fallbacks_total", label) == 1
    letters = query(database_url, "SELECT projection FROM dead_letters ORDER BY 1")
    assert letters == [("datasets",), ("lineage",)]
