"""Column walks on issue 35's store, this checkout against another, in turns (issue 46).

    python -m bench.scenario column-walk --other BEFORE [--rounds 2] [--quick]

Builds bench/fig_bounded.py's store once (its 3,000-field event, 20,000 Trino queries,
31,000 generated events; `--quick`: its small one), then per round and checkout, in a
child process importing that checkout's `metastore`: the server's execution time of the
3,000-field event's level statement (EXPLAIN ANALYZE, median of 5), and whole walks (SQL
and Python, no HTTP; median and p95 of 5 passes): that event upstream now and as of
2030, 20 of the deepest generated datasets both ways depth 10 now and as of a moment,
the Trino table as of 2030. Every walk keeps all the fields it finds (the same work on
both sides; the API keeps `max_nodes`). Formerly scripts/time_column_walk.py.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
LATER = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
MIDDLE = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
DEEP = """
SELECT DISTINCT n.dataset_id FROM readmodel.column_lineage c
JOIN readmodel.dataset_names n ON n.namespace = c.out_namespace AND n.name = c.out_name
WHERE c.out_name LIKE '%t11\\_%' ORDER BY 1
"""
ID_OF = "SELECT dataset_id FROM readmodel.dataset_names WHERE namespace = %s AND name = %s"


async def _walk(conn: Any, start: Any, directions: list[str], depth: int, moment: Any) -> int:
    from metastore.api import column_lineage

    if hasattr(column_lineage, "walk_fields"):
        found = column_lineage.Walk(max_fields=10**9)
        for d in directions:
            await column_lineage.walk_fields(conn, [(start, None)], d, depth, moment, found)
    else:  # (before: one start dataset, no field limit)
        found = column_lineage._Walk()  # type: ignore[attr-defined]
        for d in directions:
            await column_lineage._walk(conn, start, d, depth, None, moment, found)  # type: ignore[attr-defined]
    return len(found.edges)


def _level_ms(url: str, wide: tuple[str, str]) -> dict[str, float]:
    import psycopg

    from metastore.api import asof, column_lineage

    levels: Any = column_lineage.LEVELS
    statement = levels.get(("up", "latest")) or levels[("up", True, "latest")]
    found = {}
    with psycopg.connect(url) as conn:
        conn.execute("SET jit = off")
        for label, moment in (("now", asof.NOW), ("as of", LATER)):
            args: dict[str, Any] = {"namespaces": [wide[0]], "names": [wide[1]]}
            args |= {"field_of": [], "fields": []}
            args |= {"known": [], "cap": 20_001, "as_of": moment, "since": None}
            times = []
            for _ in range(5):
                plan = [r[0] for r in conn.execute("EXPLAIN (ANALYZE) " + statement, args)]
                match = re.search(r"Execution Time: ([\d.]+)", plan[-1])
                assert match is not None
                times.append(float(match.group(1)))
            found[f"3,000-field level statement, {label}"] = statistics.median(times)
    return found


async def _walks(url: str) -> dict[str, Any]:
    import psycopg

    from bench import hard_cases
    from metastore.api import asof

    out: dict[str, Any] = {}
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("SET jit = off")
        wide = (await (await conn.execute(ID_OF, hard_cases.WIDE)).fetchone())[0]  # type: ignore[index]
        trino = (await (await conn.execute(ID_OF, hard_cases.TRINO_TARGET)).fetchone())[0]  # type: ignore[index]
        deep = [r[0] for r in await (await conn.execute(DEEP)).fetchall()]
        deep = deep[:: max(1, len(deep) // 20)][:20]
        cases = [
            ("3,000-field event upstream depth 3, now", [wide], ["up"], 3, asof.NOW),
            ("3,000-field event upstream depth 3, as of", [wide], ["up"], 3, LATER),
            ("20 deep datasets both ways depth 10, now", deep, ["up", "down"], 10, asof.NOW),
            ("20 deep datasets both ways depth 10, as of", deep, ["up", "down"], 10, MIDDLE),
            ("Trino table upstream depth 3, as of", [trino], ["up"], 3, LATER),
        ]
        for name, starts, directions, depth, moment in cases:
            for start in starts:  # (warm-up)
                await _walk(conn, start, directions, depth, moment)
            times, edges = [], 0
            for _ in range(5):
                for start in starts:
                    began = time.perf_counter()
                    edges = await _walk(conn, start, directions, depth, moment)
                    times.append((time.perf_counter() - began) * 1000)
            ordered = sorted(times)
            p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
            out[name] = {"p50": statistics.median(times), "p95": p95, "edges": edges}
    return out


def measure(url: str) -> None:
    from bench import hard_cases

    found: dict[str, Any] = {k: {"p50": v} for k, v in _level_ms(url, hard_cases.WIDE).items()}
    found |= asyncio.run(_walks(url))
    print(json.dumps(found))


def main(argv: list[str]) -> int:
    # (imported here: the child runs this file on another tree's `bench`, which may lack them)
    from bench import fig_bounded
    from bench.ab import other_tree, turns
    from bench.harness import Cluster
    from bench.scenario import parser
    from bench.sizes import SEED

    cli = parser("column-walk", __doc__, rounds=2)
    cli.add_argument("--quick", action="store_true")
    cli.add_argument("--measure", help=argparse.SUPPRESS)  # (the child: a database URL)
    args = cli.parse_args(argv)
    if args.measure:
        measure(args.measure)
        return 0
    if args.other is None:
        cli.error("--other is required")
    store = fig_bounded.QUICK if args.quick else fig_bounded.FULL
    cluster = Cluster("column-walk", wal_segments=2)
    results: dict[str, list[dict[str, Any]]] = {"this": [], "other": []}
    try:
        log_dir = Path(tempfile.mkdtemp(prefix="metastore-column-walk-"))
        url = fig_bounded.build(cluster, store, SEED, ROOT, log_dir)
        with other_tree(args.other) as sides:
            for _, (name, tree) in turns(sides, args.rounds):
                # the child imports the tree's `metastore` (this checkout's bench beside it)
                env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{ROOT}"}
                child = subprocess.run(
                    [sys.executable, __file__, "--measure", url],
                    env=env,
                    cwd=tree,
                    check=True,
                    capture_output=True,
                    text=True,
                )
                results[name].append(json.loads(child.stdout.strip().splitlines()[-1]))
    finally:
        cluster.destroy()
    print(f"load {os.getloadavg()}")
    for figure in results["this"][0]:
        cells = []
        for name in results:
            p50 = ", ".join(f"{r[figure]['p50']:.1f}" for r in results[name])
            p95 = ", ".join(f"{r[figure]['p95']:.1f}" for r in results[name] if "p95" in r[figure])
            cells.append(f"{name} p50 {p50}" + (f" p95 {p95}" if p95 else ""))
        print(f"{figure}: " + " | ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
