"""Times the read API of this checkout against another source tree's, A/B, on one log.

    .venv/bin/python scripts/time_reads.py --other SRC [--events 200000] [--rounds 3]

Generates `--events` events of the benchmark workload (bench/datagen.py, over a graph of
`--nodes` datasets and jobs) into a throwaway PostgreSQL, folds them once with this
checkout's projections, then serves them with `metastore api` from each tree in turns
(the order swapped each round) and times the same requests on one keep-alive connection:
list pages of jobs, runs and datasets (first, filtered, next by cursor), lineage around
datasets (now and as of the middle of the runs' times), and where the tree's document has
them, impact from failed runs and the lineage diff between a quarter and three quarters
of the runs' times. A tree whose lineage `depth` counts jobs is asked for half the hops of
one whose `depth` counts hops (its OpenAPI document says which), so both walk as far.
`--other` is a source tree (e.g. `git archive main | tar -x -C /tmp/main-src`). A shared
machine drifts: read the pairs, not one figure.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import urllib.parse
from pathlib import Path
from typing import Any

import httpx
import msgspec
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import loadgen  # noqa: E402
from bench.datagen import events, to_record  # noqa: E402
from bench.fig_reads import Page  # noqa: E402
from bench.harness import free_port, service_env, start_service  # noqa: E402
from metastore.embedded_pg import EmbeddedPostgres  # noqa: E402
from metastore.eventlog import append_events  # noqa: E402
from metastore.migrations import apply_migrations  # noqa: E402
from projections.runner import catch_up  # noqa: E402
from projections.schema import create_readmodel_tables  # noqa: E402

HOPS = 4  # how far the lineage requests walk from a dataset


def load(url: str, count: int, nodes: int, seed: int) -> None:
    apply_migrations(url)
    with psycopg.connect(url) as conn:
        create_readmodel_tables(conn)
        batch = []
        for body in events(nodes, count, seed):
            batch.append(to_record(body))
            if len(batch) == 1000:
                with conn.transaction():
                    append_events(conn, batch)
                batch = []
        if batch:
            with conn.transaction():
                append_events(conn, batch)
    catch_up(url)


def document_of(base: str) -> dict[str, Any]:
    document: dict[str, Any] = httpx.get(base + "/api/v1/openapi.json", timeout=30).json()
    return document


def depth_counts_jobs(document: dict[str, Any]) -> bool:
    parameters = document["paths"]["/api/v1/lineage"]["get"]["parameters"]
    depth = next(p for p in parameters if p["name"] == "depth")
    return "jobs" in depth["description"]


# The requests whose next page is timed too.
NEXT_PAGE = {"list jobs", "list runs", "list datasets"}
# The path each kind of request needs in a tree's document (else the tree does not time it).
NEEDS = {"impact": "/api/v1/impact", "lineage diff": "/api/v1/lineage/diff"}
# The answers that may be a 404 (a node first seen after the moment: not yet).
MAY_BE_NOT_YET = {"lineage as of", "lineage diff"}


def requests(url: str, seed: int, n: int) -> dict[str, list[str]]:
    """Each endpoint's first requests (a next page follows each one that has one)."""
    rng = random.Random(seed)
    with psycopg.connect(url) as conn:
        namespaces = [r[0] for r in conn.execute("SELECT DISTINCT namespace FROM readmodel.jobs")]
        homes = [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT namespace FROM readmodel.dataset_names ORDER BY 1 LIMIT 20"
            )
        ]
        datasets = [
            str(r[0])
            for r in conn.execute(
                "SELECT id FROM readmodel.datasets WHERE merged_into IS NULL ORDER BY id"
            )
        ]
        failed = [
            str(r[0])
            for r in conn.execute("SELECT id FROM readmodel.runs WHERE state = 'FAIL' ORDER BY id")
        ]
        first, last = conn.execute(
            "SELECT min(first_seen), max(last_seen) FROM readmodel.runs"
        ).fetchone() or (None, None)
    q = urllib.parse.urlencode
    span = last - first
    middle, before, after = (first + span * k / 4 for k in (2, 1, 3))
    lineage = [
        f"/api/v1/lineage?node=dataset:{d}&direction=both&depth={{depth}}"
        for d in rng.sample(datasets, min(n, len(datasets)))
    ]
    return {
        "list jobs": [
            "/api/v1/jobs" if i % 2 else f"/api/v1/jobs?{q({'namespace': rng.choice(namespaces)})}"
            for i in range(n)
        ],
        "list runs": [
            "/api/v1/runs" if i % 2 else f"/api/v1/runs?{q({'state': 'COMPLETE'})}"
            for i in range(n)
        ],
        "list datasets": [
            "/api/v1/datasets"
            if i % 2
            else f"/api/v1/datasets?{q({'namespace': rng.choice(homes)})}"
            for i in range(n)
        ],
        "lineage": lineage,
        "lineage as of": [f"{p}&{q({'as_of': middle.isoformat()})}" for p in lineage],
        "impact": [
            f"/api/v1/impact?node=run:{r}&depth={{depth}}"
            for r in rng.sample(failed, min(n, len(failed)))
        ],
        "lineage diff": [
            p.replace("/lineage?", "/lineage/diff?")
            + f"&{q({'from': before.isoformat(), 'to': after.isoformat()})}"
            for p in lineage
        ],
    }


def time_side(src: Path, url: str, paths: dict[str, list[str]], log_dir: Path) -> dict[str, float]:
    port = free_port()
    # (the tree's code runs: start_service sets PYTHONPATH and the working directory)
    env = service_env(url, port)
    api = start_service(["-m", "metastore", "api"], env, port, log_dir, cwd=src)
    try:
        document = document_of(api.base_url)
        depth = HOPS // 2 if depth_counts_jobs(document) else HOPS
        session = loadgen.Session(api.base_url)
        result = {}
        try:
            for name, firsts in paths.items():
                if name in NEEDS and NEEDS[name] not in document["paths"]:
                    continue
                latencies = []
                for first in firsts[:10]:  # warm-up
                    session.get(first.format(depth=depth))
                for first in firsts:
                    path = first.format(depth=depth)
                    ms, status, body = session.get(path)
                    ok = (200, 404) if name in MAY_BE_NOT_YET else (200,)
                    assert status in ok, (path, status, body[:300])
                    latencies.append(ms)
                    if name not in NEXT_PAGE:
                        continue
                    cursor = msgspec.json.decode(body, type=Page).next_cursor
                    if cursor:
                        sep = "&" if "?" in path else "?"
                        cursor = urllib.parse.quote(cursor)
                        ms, status, _ = session.get(f"{path}{sep}cursor={cursor}")
                        assert status == 200
                        latencies.append(ms)
                result[name] = loadgen.percentile(latencies, 95)
        finally:
            session.close()
        return result
    finally:
        api.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--other", type=Path, required=True, help="the source tree to compare")
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--nodes", type=int, default=50_000)
    parser.add_argument("--requests", type=int, default=200, help="first requests an endpoint")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=20241017)
    args = parser.parse_args()
    trees = [("this", ROOT), ("other", args.other.resolve())]
    data = Path(tempfile.mkdtemp(prefix="time-reads-", dir="/tmp"))
    pg = EmbeddedPostgres(data, fast_unsafe=True)
    url = pg.start()
    try:
        load(url, args.events, args.nodes, args.seed)
        with psycopg.connect(url) as conn:
            counts = conn.execute(
                "SELECT (SELECT count(*) FROM readmodel.jobs), (SELECT count(*) FROM "
                "readmodel.runs), (SELECT count(*) FROM readmodel.datasets)"
            ).fetchone()
        print(f"{args.events} events: jobs, runs, datasets {counts}", flush=True)
        paths = requests(url, args.seed, args.requests)
        with tempfile.TemporaryDirectory() as log_dir:
            for round_ in range(args.rounds):
                for name, src in trees if round_ % 2 == 0 else trees[::-1]:
                    p95 = time_side(src, url, paths, Path(log_dir))
                    figures = ", ".join(f"{k} {v:.2f}" for k, v in p95.items())
                    print(f"round {round_ + 1} {name}: p95 ms: {figures}", flush=True)
    finally:
        pg.destroy()


if __name__ == "__main__":
    main()
