"""`make bench`'s column lineage and field impact requests against two running APIs on one
store, in turns, answers compared; and the 3,000-field event's, where the store has it.

    python -m bench.scenario column-requests --url URL --this BASE --other BASE
        --middle T [--this-pid PID --other-pid PID] [--rounds 2] [--requests 200]

`--url`: a store of the `log` group's workload (the 1,000,000-event store bench/fig_log.py
builds; `--middle`: the middle of its event times), or one holding bench/hard_cases.py's
wide event (bench/fig_bounded.py's store, or that event alone), served by two `metastore
api` processes (`--this`, `--other`: their base URLs) that you start. The paths are
bench/fig_column_lineage.py's (the same datasets, fields and moment) and, when the store
has the wide event, its column lineage now and as of 2030 as bench/fig_bounded.py reads
it. Each side is timed on one keep-alive connection after 10 warm-ups, the order swapped
each round; with the APIs' process ids, also their CPU time a request (what a loaded
machine's wall clock hides). Prints p50 / p95 ms per side and round, and how many answers
are equal (status and bytes).
"""

from __future__ import annotations

import datetime as dt
import random
import urllib.parse

import psycopg

from bench import hard_cases, loadgen
from bench.fig_bounded import ID_OF
from bench.fig_column_lineage import FIELDS_WITH_DEPENDENTS, WITH_COLUMN_LINEAGE
from bench.harness import cpu_seconds
from bench.scenario import parser
from bench.scenarios.graph_requests import compared
from bench.sizes import FULL, SEED

WIDE_AS_OF = urllib.parse.quote("2030-01-01T00:00:00Z")  # (bench/fig_bounded.py's `end`)


def paths(url: str, middle: dt.datetime, count: int) -> dict[str, list[str]]:
    """The bench's column request paths by kind, as bench/fig_column_lineage.py draws
    them, and the wide event's if the store has it."""
    with psycopg.connect(url) as conn:
        datasets = [r[0] for r in conn.execute(WITH_COLUMN_LINEAGE)]
        fields = [(r[0], r[1]) for r in conn.execute(FIELDS_WITH_DEPENDENTS)]
        wide = conn.execute(ID_OF, hard_cases.WIDE).fetchone()
    starts = random.Random(SEED + 7).sample(datasets, min(len(datasets), count))
    depth = FULL.lineage_depth
    lineage = [f"/api/v1/datasets/{d}/column-lineage?direction=both&depth={depth}" for d in starts]
    asked = random.Random(SEED + 11).sample(fields, min(len(fields), count))
    quote = urllib.parse.quote
    found = {
        "column lineage": lineage,
        "as-of column lineage": [p + f"&as_of={quote(middle.isoformat())}" for p in lineage],
        "field impact": [
            f"/api/v1/impact?depth=5&node={quote(f'field:{d}:{f}')}" for d, f in asked
        ],
    }
    if wide is not None:
        path = f"/api/v1/datasets/{wide[0]}/column-lineage"
        found["wide event"] = [path] * 20
        found["as-of wide event"] = [f"{path}?as_of={WIDE_AS_OF}"] * 20
    return found


def main(argv: list[str]) -> int:
    cli = parser("column-requests", __doc__, other=False, rounds=2)
    cli.add_argument("--url", required=True)
    cli.add_argument("--this", required=True)
    cli.add_argument("--other", required=True)
    cli.add_argument("--this-pid", type=int, help="the `--this` API's process id")
    cli.add_argument("--other-pid", type=int, help="the `--other` API's process id")
    cli.add_argument("--middle", type=dt.datetime.fromisoformat, required=True)
    cli.add_argument("--requests", type=int, default=200)
    args = cli.parse_args(argv)
    sides = {"other": args.other, "this": args.this}
    pids = {"other": args.other_pid, "this": args.this_pid}
    for kind, asked in paths(args.url, args.middle, args.requests).items():
        figures: dict[str, list[str]] = {side: [] for side in sides}
        bodies: dict[str, list[tuple[int, bytes]]] = {}
        for turn in range(args.rounds):
            for side in list(sides)[:: 1 if turn % 2 == 0 else -1]:
                pid = pids[side]
                cpu = cpu_seconds(pid) if pid else 0.0
                answers = loadgen.timed(sides[side], asked)
                ms = answers.latencies_ms
                p50, p95 = loadgen.percentile(ms, 50), loadgen.percentile(ms, 95)
                spent = f", CPU {(cpu_seconds(pid) - cpu) * 1000 / len(asked):.2f}" if pid else ""
                figures[side].append(f"p50 {p50:.1f} p95 {p95:.1f}{spent}")
                if turn == 0:
                    bodies[side] = list(zip(answers.statuses, answers.bodies, strict=True))
        compared(kind, asked, figures, bodies)
    return 0
