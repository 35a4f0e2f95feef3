"""The read API's p95 (lists, lineage, impact, diff), this checkout against another tree.

    python -m bench.scenario reads --other TREE [--events 200000] [--rounds 3]

Generates `--events` events of the benchmark workload (bench/datagen.py, over a graph of
`--nodes` datasets and jobs) into a throwaway PostgreSQL, folds them once with this
checkout's projections, then serves them with `metastore api` from each tree in turns
(the order swapped each round) and times the same requests on one keep-alive connection:
list pages of jobs, runs and datasets (first, filtered, next by cursor), lineage around
datasets (now and as of the middle of the runs' times), and where the tree's document has
them, impact from failed runs and the lineage diff between a quarter and three quarters
of the runs' times. A tree whose lineage `depth` counts jobs is asked for half the hops of
one whose `depth` counts hops (its OpenAPI document says which), so both walk as far.
Formerly scripts/time_reads.py. A shared machine drifts: read the pairs, not one figure.
"""

from __future__ import annotations

import random
import tempfile
import urllib.parse
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench import loadgen
from bench.ab import other_tree, turns
from bench.fig_reads import next_page
from bench.harness import cluster, load_workload, metastore
from bench.scenario import parser

HOPS = 4  # how far the lineage requests walk from a dataset


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


def time_side(tree: Path, url: str, paths: dict[str, list[str]], log_dir: Path) -> dict[str, float]:
    with metastore("api", url, log_dir, cwd=tree) as api:
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
                    if name in NEXT_PAGE and (after := next_page(session, path, body)) is not None:
                        latencies.append(after)
                result[name] = loadgen.percentile(latencies, 95)
        finally:
            session.close()
        return result


def main(argv: list[str]) -> int:
    cli = parser("reads", __doc__)
    cli.add_argument("--events", type=int, default=200_000)
    cli.add_argument("--nodes", type=int, default=50_000)
    cli.add_argument("--requests", type=int, default=200, help="first requests an endpoint")
    cli.add_argument("--seed", type=int, default=20241017)
    args = cli.parse_args(argv)
    with (
        other_tree(args.other) as sides,
        cluster("reads", warm=False, durable=False) as pg,
        tempfile.TemporaryDirectory() as log_dir,
    ):
        url = pg.database()
        load_workload(url, args.events, args.nodes, args.seed)
        with psycopg.connect(url) as conn:
            counts = conn.execute(
                "SELECT (SELECT count(*) FROM readmodel.jobs), (SELECT count(*) FROM "
                "readmodel.runs), (SELECT count(*) FROM readmodel.datasets)"
            ).fetchone()
        print(f"{args.events} events: jobs, runs, datasets {counts}", flush=True)
        paths = requests(url, args.seed, args.requests)
        for round_, (name, tree) in turns(sides, args.rounds):
            p95 = time_side(tree, url, paths, Path(log_dir))
            figures = ", ".join(f"{k} {v:.2f}" for k, v in p95.items())
            print(f"round {round_ + 1} {name}: p95 ms: {figures}", flush=True)
    return 0
