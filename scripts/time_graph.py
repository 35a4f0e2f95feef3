"""Times the lineage graph's statements (walk, edges, datasets), A/B, without HTTP.

    .venv/bin/python scripts/time_graph.py [--events 200000] [--nodes 20000]
        [--queries 150] [--other SRC]

Generates the benchmark workload (bench/datagen.py), folds it with this checkout's
projector into a throwaway PostgreSQL, then runs the statements `GET /api/v1/lineage`
runs (depth 5, both directions; now and as of the middle of the log's event times) for
random start nodes, on one connection, as prepared statements, without JIT (as the API
does; `--jit` leaves it on). With `--other` (a source tree, e.g. `git archive <commit> |
tar -x -C /tmp/other`) the other tree's statements run too, alternating with this
checkout's per start node, on the same database. Prints p50 and p95 per side and the
median of each statement. A shared machine drifts: read the ratios.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import datagen  # noqa: E402
from bench.harness import copy_records, prepare_database  # noqa: E402
from bench.sizes import SEED  # noqa: E402
from metastore.embedded_pg import EmbeddedPostgres  # noqa: E402
from projections.runner import catch_up  # noqa: E402

# The statements of a source tree (run with that tree first on the path): JSON on stdout.
DUMP = """
import json
from metastore.api import lineage
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
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def graph(
    conn: psycopg.Connection[Any], sql: dict[str, str], start: Any, as_of: Any
) -> list[float]:
    """Seconds of the walk, the edges and the datasets' details of one graph."""
    suffix = "_as_of" if as_of is not None else ""
    args = {
        "down": True,
        "up": True,
        "kind": start[0],
        "id": start[1],
        "depth": 5,  # hops (whatever the API's `depth` counts)
        "max_nodes": 1000,
        "visit_limit": 20_000,  # (the bounds of issue 35: metastore/api/limits.py)
        "as_of": as_of,
        "run_outputs": None,
    }
    t0 = time.perf_counter()
    found = conn.execute(sql["walk" + suffix], args, prepare=True).fetchall()
    t1 = time.perf_counter()
    jobs = [r[1] for r in found if r[0] == "job"]
    datasets = [r[1] for r in found if r[0] == "dataset"]
    params = {"jobs": jobs, "datasets": datasets, "as_of": as_of, "max_edges": 5_001}
    conn.execute(sql["edges" + suffix], params, prepare=True).fetchall()
    t2 = time.perf_counter()
    if "fresh" in sql and datasets:
        conn.execute(sql["fresh" + suffix], params, prepare=True).fetchall()
    return [t1 - t0, t2 - t1, time.perf_counter() - t2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--nodes", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--other", type=Path, help="another source tree to compare with")
    parser.add_argument(
        "--jit", action="store_true", help="leave JIT compilation on (the server's default)"
    )
    args = parser.parse_args()
    sides = {"this": statements(ROOT)}
    if args.other:
        sides["other"] = statements(args.other)
    # (a data directory the postgres user can enter when we are root: mkdtemp's own)
    pg = EmbeddedPostgres(Path(tempfile.mkdtemp(prefix="metastore-graph-")), fast_unsafe=True)
    try:
        url = pg.start()
        prepare_database(url)
        graph_model = datagen.build_graph(args.nodes, SEED)
        gen = datagen.Generator(graph_model, SEED)
        copy_records(url, (datagen.to_record(b) for b in gen.events(args.events)))
        catch_up(url)
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
    finally:
        pg.destroy()


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


if __name__ == "__main__":
    main()
