"""What folding run health costs: the fold rate with and without the runs projection's
cadence and failing-span statements (projections/cadence.py, projections/failing.py).

    python -m bench.fold_health_cost [EVENTS]   # default 100,000 of the benchmark's workload

The first EVENTS events of `make bench`'s log (bench/datagen.py, full graph, its seed) are
COPYed into a fresh database of one throwaway PostgreSQL and folded by `catch_up`, four
times, without and with the two statements in turns (this machine's speed drifts).
"""

from __future__ import annotations

import sys
import time

import projections.cadence as cadence
import projections.failing as failing
from bench import datagen
from bench.harness import cluster, copy_records
from bench.sizes import FULL, SEED
from projections.runner import catch_up


def main(argv: list[str]) -> int:
    events = int(argv[0]) if argv else 100_000
    graph = datagen.build_graph(FULL.graph_nodes, SEED)
    learn, refold = cadence.learn, failing.refold
    rates: dict[str, list[float]] = {"without": [], "with": []}
    with cluster("fold-health") as pg:
        for side in ("without", "with", "without", "with"):
            url = pg.database()
            generator = datagen.Generator(graph, SEED)
            copy_records(url, (datagen.to_record(b) for b in generator.events(events)))
            cadence.learn = learn if side == "with" else (lambda cur, job_ids: None)
            failing.refold = refold if side == "with" else (lambda cur, since: None)
            started = time.perf_counter()
            folded = catch_up(url)
            rates[side].append(folded / (time.perf_counter() - started))
            print(f"{side}: {folded:,} events, {rates[side][-1]:,.0f} events/s", flush=True)
    cadence.learn, failing.refold = learn, refold
    ratio = sum(rates["with"]) / sum(rates["without"])
    print(f"with / without: {ratio:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
