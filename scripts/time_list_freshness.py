"""Times, SQL alone, what freshness adds to a /datasets page: the page's statement, the
freshness of its ids alone (dataset_nodes.FRESHNESS_NOW, what the list reads) and with
all a graph node shows (STATEMENT_NOW), the three alternating per page.

    .venv/bin/python scripts/time_list_freshness.py [--events 100000] [--pages 100]

Generates `--events` events of the benchmark workload into a throwaway PostgreSQL
(scripts/time_reads.py's load), then reads `--pages` pages of 50 datasets, each after a
random dataset's display name, three times, on analyzed tables. Prints p50 and p95 ms of
each statement.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from time_reads import load  # noqa: E402

from metastore.api import dataset_nodes, datasets  # noqa: E402
from metastore.embedded_pg import EmbeddedPostgres  # noqa: E402

PAGE = 50


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=50_000)
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--seed", type=int, default=20241017)
    args = parser.parse_args()
    walk = datasets.DISPLAY_WALK.format(filters=datasets.DATASETS.sorts[""].after)
    listing = datasets.LIST_DATASETS.format(walk=walk, key=datasets.DISPLAY_KEY, matched="NULL")
    statements = {
        "page": listing,
        "freshness": dataset_nodes.FRESHNESS_NOW,
        "node details": dataset_nodes.STATEMENT_NOW,
    }
    pg = EmbeddedPostgres(Path(tempfile.mkdtemp(prefix="time-list-", dir="/tmp")), fast_unsafe=True)
    url = pg.start()
    try:
        load(url, args.events, args.nodes, args.seed)
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
    finally:
        pg.destroy()


if __name__ == "__main__":
    main()
