"""What an index of a read-model table costs the fold, A/B on the same code and events.

    python -m bench.scenario fold-index-cost [--index column_lineage_runs_latest]
        [--events 20000] [--rounds 3]

Loads `--events` generated workload events (bench/datagen.py: most outputs carry column
lineage) into a throwaway PostgreSQL (durable, as a server's), then folds them into fresh
copies of that database, alternating copies with the index and copies without it
(dropped before the fold), each fold in a child process. Prints each fold's rate.
Formerly scripts/fold_index_cost.py. A shared machine drifts: read the pairs.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import psycopg

from bench.ab import turns
from bench.harness import cluster, load_workload, python_child
from bench.scenario import parser

FOLD = """
import sys, time
from projections.runner import catch_up
started = time.perf_counter()
count = catch_up(sys.argv[1])
print(count / (time.perf_counter() - started))
"""


def main(argv: list[str]) -> int:
    cli = parser("fold-index-cost", __doc__, other=False)
    cli.add_argument("--index", default="column_lineage_runs_latest")
    cli.add_argument("--events", type=int, default=20_000)
    args = cli.parse_args(argv)
    with (
        cluster("index-cost", warm=False) as pg,
        tempfile.TemporaryDirectory(prefix="metastore-index-cost-") as logs,
    ):
        url = pg.database()
        load_workload(url, args.events, 1_000, 1, fold=False)
        for round_, with_index in turns([True, False], args.rounds):
            target = pg.copy(url, f"fold_{round_}_{int(with_index)}")
            if not with_index:
                with psycopg.connect(target, autocommit=True) as conn:
                    conn.execute(f"DROP INDEX readmodel.{args.index}")
            rate = python_child(FOLD, [target], Path(logs) / "fold.log")
            label = "with" if with_index else "without"
            print(f"round {round_ + 1}, {label} {args.index}: {float(rate):,.0f} events/s")
            pg.drop(target)
    return 0
