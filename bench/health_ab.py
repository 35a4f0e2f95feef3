"""The run health reads (bench/fig_health.py) A/B on one store: the big log of `make bench`
built once (generated, COPY, folded), then the api of each side in turns against it.

    python -m bench.health_ab BEFORE [--rounds 2] [--events 1000000] [--nodes 100000] [--hold]

BEFORE is a commit whose read models are this checkout's (its api runs from a `git
worktree` of it with this venv); the other side is this checkout. Building the store once
(10-15 minutes on two loaded cores) instead of once a side and round is what makes a
same-run A/B of these reads affordable; `bench.ab --only log` rebuilds it every time.
`--hold` keeps the store up at the end (its URL printed) for EXPLAIN ANALYZE, until killed.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench import datagen, fig_fold, fig_health
from bench.context import Context
from bench.harness import cluster, copy_records, metastore
from bench.sizes import FULL

ROOT = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("before")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--events", type=int, default=FULL.log_events)
    parser.add_argument("--nodes", type=int, default=FULL.graph_nodes)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hold", action="store_true")
    args = parser.parse_args(argv)
    # (killed, it still stops its PostgreSQL and removes its worktree)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    log_dir = Path(tempfile.mkdtemp(prefix="metastore-health-ab-"))
    ctx = Context(sizes=FULL, log_dir=log_dir, seed=args.seed, quick=False)
    sides = {args.before: _git("rev-parse", "--short", args.before), "head": "this checkout"}
    graph = datagen.build_graph(args.nodes, args.seed)
    gen = datagen.Generator(graph, args.seed)
    with cluster("health-ab", wal_segments=2) as pg, tempfile.TemporaryDirectory() as tmp:
        url = pg.database()
        ctx.say(f"COPY {args.events:,} events")
        copy_records(url, (datagen.to_record(b) for b in gen.events(args.events)))
        folded, seconds, _ = fig_fold.catch_up(url, log_dir / "fold.log")
        ctx.say(f"folded {folded:,} events in {seconds:.0f} s")
        middle = datagen.START_TIME + (gen.clock - datagen.START_TIME) / 2
        checkout = Path(tmp) / "before"
        _git("worktree", "add", "--detach", str(checkout), args.before)
        try:
            names = list(sides)
            for round_ in range(args.rounds):
                for name in names if round_ % 2 == 0 else names[::-1]:
                    cwd = checkout if name == args.before else ROOT
                    out = fig_health.rows(ctx)
                    with metastore("api", url, log_dir, cwd=cwd) as api:
                        fig_health.measure(ctx, out, url, api, middle)
                    for row in out:
                        print(
                            f"round {round_} {name:>10} {row.figure}: {row.value:.2f}", flush=True
                        )
                    print(f"  ({out[0].note})", flush=True)
            if args.hold:
                ctx.say(f"holding the store: {url}")
                while True:
                    time.sleep(60)
        finally:
            _git("worktree", "remove", "--force", str(checkout))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
