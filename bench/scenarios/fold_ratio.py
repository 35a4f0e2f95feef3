"""The `log` group's fold figure and its ratio to reading and decoding, A/B in turns.

    python -m bench.scenario fold-ratio [--events 200000] [--rounds 2] [--other TREE]

COPYs the first `--events` events of make bench's `log` workload (bench/datagen.py, its
seed and graph) into a durable throwaway PostgreSQL, then, for each tree in turns, folds
them (`catch_up`, the projector's path) into fresh read models made by that tree's DDL in a
copy of the database, and reads and decodes the same events batch by batch with that
tree's code (bench/fig_fold.py's baseline). Prints both rates and the fold's ratio to
reading (issue 46's target: 0.5): bench/fig_fold.py's figure without building the
1,000,000-event store; and the CPU the fold's process and the server spent on the fold (on
a shared machine steadier than its rate).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench import datagen
from bench.ab import other_tree, turns
from bench.fig_fold import READ_ONLY
from bench.harness import (
    children_cpu_seconds,
    cluster,
    copy_records,
    python_child,
    server_cpu_seconds,
)
from bench.scenario import parser
from bench.scenarios.fold import FOLD


def main(argv: list[str]) -> int:
    cli = parser("fold-ratio", __doc__, rounds=2)
    cli.add_argument("--events", type=int, default=200_000)
    cli.add_argument("--nodes", type=int, default=100_000)
    cli.add_argument("--seed", type=int, default=20241017)
    args = cli.parse_args(argv)
    with (
        other_tree(args.other) as sides,
        tempfile.TemporaryDirectory(prefix="metastore-fold-ratio-") as tmp,
        cluster("fold-ratio") as pg,
    ):
        url = pg.database()
        gen = datagen.Generator(datagen.build_graph(args.nodes, args.seed), args.seed)
        copy_records(url, (datagen.to_record(b) for b in gen.events(args.events)))
        for round_, (name, tree) in turns(sides, args.rounds):
            target = pg.copy(url, f"ratio_{round_}_{name}")
            # (each child's whole time, as bench/fig_fold.py's run_child measures both)
            started = time.perf_counter()
            cpu, server = children_cpu_seconds(), server_cpu_seconds(pg.pg)
            count = python_child(FOLD, [target], Path(tmp) / "fold.log", cwd=tree).split()[0]
            seconds = time.perf_counter() - started
            cpu, server = children_cpu_seconds() - cpu, server_cpu_seconds(pg.pg) - server
            started = time.perf_counter()
            read = python_child(READ_ONLY, [target, "0", "0"], Path(tmp) / "read.log", cwd=tree)
            read_seconds = time.perf_counter() - started
            fold_rate, read_rate = int(count) / seconds, int(read) / read_seconds
            print(
                f"round {round_ + 1} {name}: fold {fold_rate:,.0f} events/s, reading and "
                f"decoding {read_rate:,.0f} events/s, ratio {fold_rate / read_rate:.2f}; "
                f"the fold's CPU {cpu:.1f} s, the server's {server:.1f} s",
                flush=True,
            )
            pg.drop(target)
    return 0
