"""What freshness adds to a /datasets page, SQL alone: the page's statement, the freshness
of its ids alone and with all a graph node shows, the three alternating per page.

    python -m bench.scenario list-freshness [--events 100000] [--pages 100]

Generates `--events` events of the benchmark workload into a throwaway PostgreSQL and
folds them (the reads scenario's store), then reads `--pages` pages of 50 datasets, each
after a random dataset's display name, three times, on analyzed tables: the page
(datasets.LIST_DATASETS), the freshness of its ids (dataset_nodes.FRESHNESS_NOW, what
the list reads) and all a graph node shows (dataset_nodes.STATEMENT_NOW). Prints p50 and
p95 ms of each statement. Formerly scripts/time_list_freshness.py.
"""

from __future__ import annotations

import statistics
import time

import psycopg

from bench.harness import cluster, load_workload
from bench.scenario import parser
from metastore.api import dataset_nodes, datasets

PAGE = 50


def main(argv: list[str]) -> int:
    cli = parser("list-freshness", __doc__, other=False)
    cli.add_argument("--events", type=int, default=100_000)
    cli.add_argument("--nodes", type=int, default=50_000)
    cli.add_argument("--pages", type=int, default=100)
    cli.add_argument("--seed", type=int, default=20241017)
    args = cli.parse_args(argv)
    walk = datasets.DISPLAY_WALK.format(filters=datasets.DATASETS.sorts[""].after)
    listing = datasets.LIST_DATASETS.format(
        summary=datasets.SUMMARY, walk=walk, key=datasets.DISPLAY_KEY, matched="NULL"
    )
    statements = {
        "page": listing,
        "freshness": dataset_nodes.FRESHNESS_NOW,
        "node details": dataset_nodes.STATEMENT_NOW,
    }
    with cluster("list-freshness", warm=False, durable=False) as pg:
        url = pg.database()
        load_workload(url, args.events, args.nodes, args.seed)
        with psycopg.connect(url, autocommit=True) as conn:
            # as autovacuum would have: unanalyzed, 50 ids looked like 4,000 names and
            # the planner hashed all of job_edges (30-100 ms instead of 4-9)
            conn.execute("ANALYZE")
            starts = conn.execute(
                "SELECT namespace, name FROM readmodel.datasets WHERE merged_into IS NULL "
                "ORDER BY md5(id::text) LIMIT %s",
                (args.pages,),
            ).fetchall()
            pages = []
            for namespace, name in starts:
                found = conn.execute(
                    listing,
                    {"limit": PAGE + 1, "a0": namespace, "a1": name},
                ).fetchall()
                pages.append([r[0] for r in found[:PAGE]])
            times: dict[str, list[float]] = {k: [] for k in statements}
            for round_ in range(3):
                order = list(statements) if round_ % 2 == 0 else list(statements)[::-1]
                for (namespace, name), ids in zip(starts, pages, strict=True):
                    for kind in order:
                        params = {
                            "limit": PAGE + 1,
                            "a0": namespace,
                            "a1": name,
                            "datasets": ids,
                            "as_of": None,
                        }
                        began = time.perf_counter()
                        conn.execute(statements[kind], params).fetchall()
                        times[kind].append((time.perf_counter() - began) * 1000)
    for kind, ms in times.items():
        ms.sort()
        p95 = ms[int(len(ms) * 0.95)]
        print(f"{kind}: p50 {statistics.median(ms):.2f} p95 {p95:.2f} ms", flush=True)
    return 0
