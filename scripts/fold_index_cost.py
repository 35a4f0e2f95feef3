"""What an index of a read-model table costs the fold, A/B on the same code and events.

    .venv/bin/python scripts/fold_index_cost.py [--index column_lineage_runs_latest]
        [--events 20000] [--rounds 3]

Loads `--events` generated workload events (bench/datagen.py: most outputs carry column
lineage) into a throwaway PostgreSQL, then folds them into fresh copies of that database,
alternating copies with the index and copies without it (dropped before the fold), each
fold in a child process. Prints each fold's rate. A shared machine drifts: read the pairs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import datagen  # noqa: E402
from bench.harness import copy_records, prepare_database  # noqa: E402
from metastore.embedded_pg import EmbeddedPostgres  # noqa: E402

FOLD = """
import sys, time
from projections.runner import catch_up
started = time.perf_counter()
count = catch_up(sys.argv[1])
print(count / (time.perf_counter() - started))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--index", default="column_lineage_runs_latest")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    pg = EmbeddedPostgres(Path(tempfile.mkdtemp(prefix="metastore-index-cost-")))
    try:
        url = pg.start()
        prepare_database(url)
        copy_records(url, (datagen.to_record(b) for b in datagen.events(1_000, args.events, 1)))
        base = url.rsplit("/", 1)[0]
        with psycopg.connect(base + "/postgres", autocommit=True) as admin:
            for round_ in range(args.rounds):
                for with_index in (True, False) if round_ % 2 == 0 else (False, True):
                    name = f"fold_{round_}_{int(with_index)}"
                    admin.execute(f"CREATE DATABASE {name} TEMPLATE metastore")
                    target = f"{base}/{name}"
                    if not with_index:
                        with psycopg.connect(target, autocommit=True) as conn:
                            conn.execute(f"DROP INDEX readmodel.{args.index}")
                    rate = subprocess.run(
                        [sys.executable, "-c", FOLD, target],
                        cwd=ROOT,
                        check=True,
                        capture_output=True,
                        text=True,
                    ).stdout.split()[-1]
                    label = "with" if with_index else "without"
                    print(f"round {round_ + 1}, {label} {args.index}: {float(rate):,.0f} events/s")
                    admin.execute(f"DROP DATABASE {name}")
    finally:
        pg.destroy()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
