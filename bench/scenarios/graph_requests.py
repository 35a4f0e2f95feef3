"""`make bench`'s graph requests against two running APIs on one store, in turns, answers
compared: lineage now and as of the log's middle, impact from failed runs, the diff.

    python -m bench.scenario graph-requests --url URL --this BASE --other BASE
        --middle T --end T [--rounds 2] [--requests 200]

`--url`: a store of the `log` group's workload folded at its full size (the 1,000,000-event
store bench/fig_log.py builds; `--middle` and `--end`: the middle and the end of its event
times), served by two `metastore api` processes (`--this`, `--other`: their base URLs) that
you start. The paths are bench/fig_lineage.py's (the same start nodes, failed runs and
moments); each side is timed on one keep-alive connection after 10 warm-ups, the order
swapped each round. Prints p50 / p95 ms per side and round, and how many answers are equal
(JSON compared; the first difference is written to /tmp). A shared machine drifts: read the
pairs.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import urllib.parse
from pathlib import Path
from typing import Any

import psycopg

from bench import datagen, loadgen
from bench.fig_lineage import FAILED_RUNS, _keys
from bench.scenario import parser
from bench.sizes import FULL, SEED


def paths(url: str, middle: dt.datetime, end: dt.datetime, count: int) -> dict[str, list[str]]:
    """The bench's graph request paths by kind, as bench/fig_lineage.py draws them."""
    graph = datagen.build_graph(FULL.graph_nodes, SEED)
    linked = sorted({node for edge in graph.edges() for node in edge})
    starts = random.Random(SEED + 5).sample(linked, min(len(linked), count))
    keys = _keys(url, graph)
    depth = FULL.lineage_depth // 2
    quote = urllib.parse.quote
    lineage = [f"/api/v1/lineage?node={keys[n]}&depth={depth}" for n in starts]
    with psycopg.connect(url) as conn:
        failed = [r[0] for r in conn.execute(FAILED_RUNS)]
    runs = random.Random(SEED + 7).sample(failed, min(len(failed), count))
    span = end - datagen.START_TIME
    moments = (
        f"&from={quote((datagen.START_TIME + span / 4).isoformat())}"
        f"&to={quote((datagen.START_TIME + span * 3 / 4).isoformat())}"
    )
    both = [p + "&direction=both" for p in lineage]
    return {
        "lineage": both,
        "as-of lineage": [p + f"&as_of={quote(middle.isoformat())}" for p in both],
        "impact": [f"/api/v1/impact?node=run:{run}&depth={depth}" for run in runs],
        "diff": [p.replace("/lineage?", "/lineage/diff?") + moments for p in lineage],
    }


def _normal(body: bytes) -> str:
    try:
        return json.dumps(json.loads(body), sort_keys=True)
    except ValueError:
        return body.decode(errors="replace")


def main(argv: list[str]) -> int:
    cli = parser("graph-requests", __doc__, other=False, rounds=2)
    cli.add_argument("--url", required=True)
    cli.add_argument("--this", required=True)
    cli.add_argument("--other", required=True)
    cli.add_argument("--middle", type=dt.datetime.fromisoformat, required=True)
    cli.add_argument("--end", type=dt.datetime.fromisoformat, required=True)
    cli.add_argument("--requests", type=int, default=200)
    args = cli.parse_args(argv)
    sides = {"other": args.other, "this": args.this}
    for kind, asked in paths(args.url, args.middle, args.end, args.requests).items():
        figures: dict[str, list[str]] = {side: [] for side in sides}
        bodies: dict[str, list[tuple[int, str]]] = {}
        for turn in range(args.rounds):
            for side in list(sides)[:: 1 if turn % 2 == 0 else -1]:
                answers = loadgen.timed(sides[side], asked)
                ms = answers.latencies_ms
                p50, p95 = loadgen.percentile(ms, 50), loadgen.percentile(ms, 95)
                figures[side].append(f"p50 {p50:.1f} p95 {p95:.1f}")
                if turn == 0:
                    bodies[side] = [
                        (status, _normal(body))
                        for status, body in zip(answers.statuses, answers.bodies, strict=True)
                    ]
        differ = compared(kind, asked, figures, bodies)
        if differ:
            for side in sides:
                Path(f"/tmp/graph-requests-{side}.json").write_text(bodies[side][differ[0]][1])
    return 0


def compared(
    kind: str,
    asked: list[str],
    figures: dict[str, list[str]],
    bodies: dict[str, list[tuple[int, Any]]],
) -> list[int]:
    """Prints a kind's figures by side and round and how many answers are equal (status
    and body); the indexes of those that differ."""
    pairs = list(zip(bodies["other"], bodies["this"], strict=True))
    differ = [i for i, (a, b) in enumerate(pairs) if a != b]
    print(
        f"{kind}: other {' / '.join(figures['other'])} | this {' / '.join(figures['this'])}"
        f" | answers equal {len(pairs) - len(differ)} of {len(pairs)}"
    )
    if differ:
        print(f"  first different: {asked[differ[0]]}")
    return differ
