"""The lineage graph's statements (walk, edges, datasets) without HTTP, A/B.

    python -m bench.scenario graph [--events 200000] [--nodes 20000] [--queries 150]
        [--other TREE]

Generates the benchmark workload (bench/datagen.py), folds it with this checkout's
projector into a throwaway PostgreSQL, then runs the statements `GET /api/v1/lineage`
runs (depth 5, both directions; now and as of the middle of the log's event times) for
random start nodes, on one connection, as prepared statements, without JIT (as the API
does; `--jit` leaves it on). With `--other` the other tree's statements run too,
alternating with this checkout's per start node, on the same database. Prints p50 and p95
per side and the median of each statement. Formerly scripts/time_graph.py. A shared
machine drifts: read the ratios.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from bench import datagen
from bench.ab import other_tree
from bench.harness import cluster, load_workload
from bench.scenario import parser
from bench.sizes import SEED

# The statements of a source tree (run with that tree first on the path): JSON on stdout.
# Since 4c848a5 the walks are by (as_of given, rule, from a run, restricted), the edges by
# (rule, restricted) (since job_edges.held_now by (now, rule, restricted)), and "now" is
# the moment asof.NOW (`now`: what `as_of` is then).
DUMP = """
import json
from metastore.api import lineage
if hasattr(lineage, "WALKS"):
    from metastore.api import asof
    now_key = (True, "latest", False)  # (now,) first in the edges' key since job_edges.held_now
    if now_key in lineage.LINEAGE_EDGES:
        edges = lineage.LINEAGE_EDGES[now_key]
        edges_as_of = lineage.LINEAGE_EDGES[(False, "latest", False)]
    else:
        edges = edges_as_of = lineage.LINEAGE_EDGES[("latest", False)]
    out = {"walk": lineage.WALKS[(False, "latest", False, False)],
           "walk_as_of": lineage.WALKS[(True, "latest", False, False)],
           "edges": edges, "edges_as_of": edges_as_of,
           "now": asof.NOW.isoformat()}
else:
    out = {"walk": lineage.LINEAGE, "walk_as_of": lineage.LINEAGE_AS_OF,
           "edges": lineage.LINEAGE_EDGES, "edges_as_of": lineage.LINEAGE_EDGES_AS_OF}
try:  # (what a dataset node shows, in a statement of its own since issue 36)
    from metastore.api import dataset_nodes
    out["fresh"], out["fresh_as_of"] = dataset_nodes.STATEMENT_NOW, dataset_nodes.STATEMENT_AS_OF
except ImportError:
    pass
print(json.dumps(out))
"""
STARTS = """
SELECT 'dataset', n.dataset_id FROM readmodel.job_edges e
JOIN readmodel.dataset_names n USING (namespace, name)
UNION
SELECT 'job', job_id FROM readmodel.job_edges
ORDER BY 1, 2
"""


def statements(tree: Path) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", DUMP], cwd=tree, capture_output=True, text=True, check=True
    )
    found: dict[str, str] = json.loads(done.stdout)
    return found


def graph(
    conn: psycopg.Connection[Any], sql: dict[str, str], start: Any, as_of: Any
) -> list[float]:
    """Seconds of the walk, the edges and the datasets' details of one graph."""
    suffix = "_as_of" if as_of is not None else ""
    moment = (
        as_of if as_of is not None or "now" not in sql else dt.datetime.fromisoformat(sql["now"])
    )
    args = {
        "down": True,
        "up": True,
        "kind": start[0],
        "id": start[1],
        "depth": 5,  # hops (whatever the API's `depth` counts)
        "max_nodes": 1000,
        "visit_limit": 20_000,  # (the bounds of issue 35: metastore/api/limits.py)
        "as_of": moment,
        "since": None,
        "run_outputs": None,
    }
    t0 = time.perf_counter()
    found = conn.execute(sql["walk" + suffix], args, prepare=True).fetchall()
    t1 = time.perf_counter()
    jobs = [r[1] for r in found if r[0] == "job"]
    datasets = [r[1] for r in found if r[0] == "dataset"]
    params = {"jobs": jobs, "datasets": datasets, "as_of": moment, "max_edges": 5_001}
    conn.execute(sql["edges" + suffix], params | {"since": None}, prepare=True).fetchall()
    t2 = time.perf_counter()
    if "fresh" in sql and datasets:
        fresh = params | {"as_of": as_of}  # (a dataset's details take None for now)
        conn.execute(sql["fresh" + suffix], fresh, prepare=True).fetchall()
    return [t1 - t0, t2 - t1, time.perf_counter() - t2]


def main(argv: list[str]) -> int:
    cli = parser("graph", __doc__, rounds=None)
    cli.add_argument("--events", type=int, default=200_000)
    cli.add_argument("--nodes", type=int, default=20_000)
    cli.add_argument("--queries", type=int, default=150)
    cli.add_argument(
        "--jit", action="store_true", help="leave JIT compilation on (the server's default)"
    )
    args = cli.parse_args(argv)
    with other_tree(args.other) as trees, cluster("graph", warm=False, durable=False) as pg:
        sides = {name: statements(tree) for name, tree in trees}
        url = pg.database()
        gen = load_workload(url, args.events, args.nodes, SEED)
        middle = datagen.START_TIME + (gen.clock - datagen.START_TIME) / 2
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
            if not args.jit:
                conn.execute("SET jit = off")  # (as the API's read pool: metastore/db.py)
            conn.execute("SET TimeZone = 'UTC'")
            nodes = conn.execute(STARTS).fetchall()
            starts = random.Random(5).sample(nodes, min(len(nodes), args.queries))
            for as_of in (None, middle):
                report(conn, sides, starts, as_of)
    return 0


def report(
    conn: psycopg.Connection[Any],
    sides: dict[str, dict[str, str]],
    starts: list[Any],
    as_of: dt.datetime | None,
) -> None:
    times: dict[str, list[list[float]]] = {side: [] for side in sides}
    for i, start in enumerate(starts[:10] + starts):  # (the first 10: warm-up)
        for side, sql in sides.items():
            parts = graph(conn, sql, start, as_of)
            if i >= 10:
                times[side].append(parts)
    label = f"as of {as_of.isoformat()}" if as_of else "now"
    for side, measured in times.items():
        totals = sorted(sum(p) * 1000 for p in measured)
        p50, p95 = totals[len(totals) // 2], totals[int(len(totals) * 0.95)]
        parts = [statistics.median(p[k] for p in measured) * 1000 for k in range(3)]
        print(
            f"{label:<40} {side:<5} p50 {p50:6.2f} ms  p95 {p95:6.2f} ms  "
            f"(medians: walk {parts[0]:.2f}, edges {parts[1]:.2f}, datasets {parts[2]:.2f})"
        )
